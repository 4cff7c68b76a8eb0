package dev.dex.rdma.tcp;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP proxy on loopback between the tcp fabric's clients and a memory server, whose connections the test can
 * cut at any moment, in the middle of requests and answers, as a network would.
 */
final class ChaosProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final InetSocketAddress target;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    /** While set, nothing passes either way and no end learns that the other closed: a paused host or a silent link. */
    private volatile boolean frozen;

    ChaosProxy(String targetEndpoint) throws IOException {
        this.target = TcpEndpoint.parse(0, targetEndpoint);
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "chaos-proxy");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    String endpoint() {
        return "127.0.0.1:" + listener.getLocalPort();
    }

    /** Cuts every connection that passes through the proxy now; new ones are accepted as before. */
    void cutAll() throws IOException {
        for (Socket socket : sockets) {
            socket.close();
        }
        sockets.clear();
    }

    /** From now on nothing passes and nothing is closed, as if a host paused or a link went silent. */
    void freeze() {
        frozen = true;
    }

    /** Lets what was held pass again (and the closes that happened meanwhile). */
    void thaw() {
        frozen = false;
    }

    private void awaitThaw() {
        while (frozen) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private void accept() {
        while (!listener.isClosed()) {
            try {
                Socket client = listener.accept();
                awaitThaw();
                Socket server = new Socket(target.getHostString(), target.getPort());
                client.setTcpNoDelay(true);
                server.setTcpNoDelay(true);
                sockets.add(client);
                sockets.add(server);
                pump(client, server);
                pump(server, client);
            } catch (IOException closed) {
                return;
            }
        }
    }

    private void pump(Socket from, Socket to) {
        Thread thread = new Thread(() -> {
            byte[] buffer = new byte[8192];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    awaitThaw();
                    out.write(buffer, 0, n);
                }
                awaitThaw();
            } catch (IOException cut) {
                // One side was cut: the other side goes with it.
            } finally {
                try {
                    from.close();
                    to.close();
                } catch (IOException ignored) {
                    // Closing a cut socket has nothing left to report.
                }
            }
        }, "chaos-proxy-pump");
        thread.setDaemon(true);
        thread.start();
    }

    @Override
    public void close() throws IOException {
        listener.close();
        cutAll();
    }
}
