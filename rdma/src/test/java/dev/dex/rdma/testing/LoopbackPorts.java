package dev.dex.rdma.testing;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Loopback ports for tests that pick a port themselves (to bind it later, or to know one where nothing listens).
 *
 * <p>They lie in [20000, 32000), below the kernel's ephemeral range (32768 up by default). A port the kernel handed out
 * for {@code bind(0)} could be handed out again, to a node's remoting in this JVM or in the module's other test JVM,
 * between the test's pick and its use: a CI run saw "could not listen at 127.0.0.1:37607". Below the range only
 * another test's pick can take it, and picks start at a random port.
 */
public final class LoopbackPorts {
    private static final int FIRST = 20_000;
    private static final int COUNT = 12_000;

    private LoopbackPorts() {
    }

    /** A socket listening on a loopback port below the ephemeral range; the caller closes it. */
    public static ServerSocket listen() throws IOException {
        int start = ThreadLocalRandom.current().nextInt(COUNT);
        for (int i = 0; i < COUNT; i++) {
            int port = FIRST + (start + i) % COUNT;
            try {
                return new ServerSocket(port, 1, InetAddress.getLoopbackAddress());
            } catch (IOException taken) {
                // the next one
            }
        }
        throw new IOException("no free loopback port in [" + FIRST + ", " + (FIRST + COUNT) + ")");
    }

    /** A loopback port below the ephemeral range where nothing listened when it was picked. */
    public static int free() throws IOException {
        try (ServerSocket socket = listen()) {
            return socket.getLocalPort();
        }
    }
}
