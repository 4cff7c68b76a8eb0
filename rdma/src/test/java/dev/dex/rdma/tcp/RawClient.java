package dev.dex.rdma.tcp;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** A plain-socket peer that speaks (or breaks) the tcp fabric's frames, for tests of the memory node. */
final class RawClient implements AutoCloseable {
    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;

    RawClient(String endpoint) throws IOException {
        InetSocketAddress address = TcpEndpoint.parse(0, endpoint);
        socket = new Socket(address.getHostString(), address.getPort());
        socket.setSoTimeout(10_000);
        in = new DataInputStream(socket.getInputStream());
        out = socket.getOutputStream();
    }

    /** A request frame as the descriptor lays it out; {@code declaredLength} overrides the length prefix when >= 0. */
    static byte[] request(int op, int count, long id, long address, long operand1, long operand2, byte[] payload, int declaredLength) {
        int length = TcpFrameDescriptor.REQUEST_HEADER_LENGTH + payload.length;
        ByteBuffer frame = ByteBuffer.allocate(TcpFrameDescriptor.LENGTH_FIELD_LENGTH + length).order(ByteOrder.LITTLE_ENDIAN);
        frame.putInt(declaredLength >= 0 ? declaredLength : length);
        frame.put((byte) op).put(new byte[3]).putInt(count).putLong(id).putLong(address).putLong(operand1).putLong(operand2).put(payload);
        return frame.array();
    }

    /** Says HELLO to memory server {@code serverId} as client {@code client} (0: anonymous); returns the answer. */
    Response greet(int serverId, long client) throws IOException {
        send(request(TcpFrameDescriptor.OP_HELLO, 0, 0, dev.dex.rdma.GlobalAddress.of(serverId, 0), client, 0, new byte[0], -1));
        return receive();
    }

    void send(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
    }

    /** The next response: status, request id, value, payload. */
    Response receive() throws IOException {
        byte[] prefix = new byte[4];
        in.readFully(prefix);
        int length = ByteBuffer.wrap(prefix).order(ByteOrder.LITTLE_ENDIAN).getInt();
        byte[] body = new byte[length];
        in.readFully(body);
        ByteBuffer frame = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
        byte status = frame.get(TcpFrameDescriptor.STATUS_OFFSET);
        long id = frame.getLong(TcpFrameDescriptor.RESPONSE_ID_OFFSET);
        long value = frame.getLong(TcpFrameDescriptor.VALUE_OFFSET);
        byte[] payload = new byte[length - TcpFrameDescriptor.RESPONSE_HEADER_LENGTH];
        frame.position(TcpFrameDescriptor.RESPONSE_HEADER_LENGTH);
        frame.get(payload);
        return new Response(status, id, value, payload);
    }

    /** True when the peer closed the connection (end of stream or reset) before sending anything more. */
    boolean closedByPeer() throws IOException {
        try {
            return in.read() < 0;
        } catch (EOFException | java.net.SocketException closed) {
            return true;
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }

    record Response(byte status, long id, long value, byte[] payload) {
    }
}
