package dev.dex.rdma.tcp;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A misbehaving memory server on loopback: it greets like a real one (server id, region and chunk length),
 * then treats every other request as {@link Mode} says. Each accepted connection gets its own thread.
 */
final class FakeMemoryServer implements AutoCloseable {
    enum Mode {
        /** Close the connection on the first request after the greeting. */
        CLOSE,
        /** Never answer a request after the greeting. */
        SILENT,
        /** Answer every read with zeroes, as a healthy server of an empty region would. */
        ANSWER,
        /** Answer with a request id that was never sent. */
        WRONG_ID,
        /** Answer with a frame shorter than an answer's header. */
        SHORT
    }

    private final ServerSocket listener;
    private final int serverId;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final AtomicInteger requests = new AtomicInteger();
    private volatile Mode mode;

    FakeMemoryServer(int serverId, Mode mode) throws IOException {
        this.serverId = serverId;
        this.mode = mode;
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "fake-memory-server");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    String endpoint() {
        return "127.0.0.1:" + listener.getLocalPort();
    }

    void mode(Mode newMode) {
        mode = newMode;
    }

    /** Requests received after greetings. */
    int requests() {
        return requests.get();
    }

    private void accept() {
        while (!listener.isClosed()) {
            try {
                Socket socket = listener.accept();
                sockets.add(socket);
                Thread serving = new Thread(() -> serve(socket), "fake-memory-connection");
                serving.setDaemon(true);
                serving.start();
            } catch (IOException closed) {
                return;
            }
        }
    }

    private void serve(Socket socket) {
        try (socket) {
            DataInputStream in = new DataInputStream(socket.getInputStream());
            OutputStream out = socket.getOutputStream();
            while (true) {
                byte[] prefix = new byte[4];
                in.readFully(prefix);
                byte[] body = new byte[ByteBuffer.wrap(prefix).order(ByteOrder.LITTLE_ENDIAN).getInt()];
                in.readFully(body);
                ByteBuffer request = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
                byte op = request.get(TcpFrameDescriptor.OP_OFFSET);
                long id = request.getLong(TcpFrameDescriptor.REQUEST_ID_OFFSET);
                if (op == TcpFrameDescriptor.OP_HELLO) {
                    out.write(response(id, 1L << 20, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(4096).array()));
                    continue;
                }
                requests.incrementAndGet();
                switch (mode) {
                    case CLOSE -> {
                        return;
                    }
                    case SILENT -> {
                    }
                    case ANSWER -> out.write(response(id, 0,
                            op == TcpFrameDescriptor.OP_READ ? new byte[request.getInt(TcpFrameDescriptor.COUNT_OFFSET)] : new byte[0]));
                    case WRONG_ID -> out.write(response(id + 1000, 0, new byte[0]));
                    case SHORT -> out.write(new byte[] {4, 0, 0, 0, 0, 0, 0, 0});
                }
            }
        } catch (IOException gone) {
            // The client closed; nothing to serve.
        }
    }

    private static byte[] response(long id, long value, byte[] payload) {
        int length = TcpFrameDescriptor.RESPONSE_HEADER_LENGTH + payload.length;
        return ByteBuffer.allocate(4 + length).order(ByteOrder.LITTLE_ENDIAN).putInt(length).put(TcpFrameDescriptor.STATUS_OK)
                .put(new byte[3]).putInt(payload.length).putLong(id).putLong(value).put(payload).array();
    }

    @Override
    public void close() throws IOException {
        listener.close();
        for (Socket socket : sockets) {
            socket.close();
        }
    }
}
