package dev.dex.rdma.tcp;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;

/** Loopback ports for tests. */
final class TcpTestPorts {
    private TcpTestPorts() {
    }

    /** A loopback port nothing listens on (bound and released at once, so free for a moment). */
    static int unused() {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
