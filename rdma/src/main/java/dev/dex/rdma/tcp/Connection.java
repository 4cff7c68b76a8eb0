package dev.dex.rdma.tcp;

import static dev.dex.rdma.tcp.TcpFrameDescriptor.COUNT_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.LENGTH_FIELD_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_HELLO;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_MESSAGE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_READ;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_WRITE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.REQUEST_HEADER_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.RESPONSE_HEADER_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.RESPONSE_ID_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_OK;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.VALUE_OFFSET;

import java.lang.invoke.VarHandle;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.agrona.concurrent.ManyToOneConcurrentArrayQueue;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.FabricException;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.EventLoop;
import io.netty.channel.SimpleChannelInboundHandler;

/**
 * One pipelined connection from a client to a memory server. Calling threads put their {@link VerbCall}s
 * on a queue and ring a doorbell; the connection's event-loop thread takes every queued call (up to the
 * window of requests in flight), encodes them into one buffer and writes it with one flush, however many
 * threads rang. Answers come back in request order and complete the oldest call in flight.
 *
 * <p>Concurrency: the submission queue is many-to-one (callers to the event loop). The doorbell flag is set
 * by the caller that finds it clear, which then schedules one drain; the drain clears it before polling, so a
 * call queued after the poll found the queue empty sees a clear doorbell and schedules the next drain. The
 * in-flight deque, the request-id sequence and the channel are touched only by the event loop. Breaking the
 * connection (peer closed, protocol error, a verb that timed out, close) runs on the event loop too: it
 * publishes the failure in {@link #broken} first and then fails every call in flight and queued, so a caller
 * either sees the failure before it queues or has its call failed by a later drain.
 */
final class Connection extends SimpleChannelInboundHandler<ByteBuf> {
    private static final int QUEUE_CAPACITY = 1024;

    private final int serverId;
    private final String endpoint;
    private final int window;
    private final ManyToOneConcurrentArrayQueue<VerbCall> submitted = new ManyToOneConcurrentArrayQueue<>(QUEUE_CAPACITY);
    private final AtomicBoolean doorbell = new AtomicBoolean();
    private final ArrayDeque<VerbCall> inFlight = new ArrayDeque<>();
    private final UnsafeBuffer view = new UnsafeBuffer(0, 0);
    private final Runnable drain = this::drain;
    private long nextRequestId;
    private Channel channel;
    private EventLoop loop;
    /** Why the connection is unusable; set once, first reason wins, by the event loop or a caller that timed out. */
    private final AtomicReference<FabricException> broken = new AtomicReference<>();

    private Connection(int serverId, String endpoint, int window) {
        this.serverId = serverId;
        this.endpoint = endpoint;
        this.window = window;
    }

    /**
     * Opens a connection to {@code address}; does not say hello. Failure to connect within the settings'
     * timeout throws {@link FabricException}.
     */
    static Connection open(int serverId, InetSocketAddress address, TcpSettings settings, IoTransport io) {
        String endpoint = TcpEndpoint.format(address.getHostString(), address.getPort());
        Connection connection = new Connection(serverId, endpoint, settings.window());
        Channel channel = io.connect(address, settings, connection, false, (reason, cause) -> new FabricException(
                "cannot connect to memory server " + serverId + " at " + endpoint + ": " + reason, cause));
        connection.channel = channel;
        connection.loop = channel.eventLoop();
        return connection;
    }

    int serverId() {
        return serverId;
    }

    String endpoint() {
        return endpoint;
    }

    /** The reason this connection is unusable, or null while it works. */
    FabricException broken() {
        return broken.get();
    }

    /**
     * Queues {@code call} and rings the doorbell. Throws {@link FabricException} when the connection is already
     * broken; a call queued as it breaks is failed by the event loop instead.
     */
    void submit(VerbCall call, long deadline) {
        FabricException failure = broken.get();
        if (failure != null) {
            throw copy(failure);
        }
        while (!submitted.offer(call)) {
            FabricException now = broken.get();
            if (now != null || System.nanoTime() - deadline >= 0) {
                throw new FabricException("memory server " + serverId + " at " + endpoint + ": more than " + QUEUE_CAPACITY
                        + " verbs queued on one connection" + (now != null ? " and the connection broke: " + now.getMessage() : ""));
            }
            Thread.yield();
        }
        // offer publishes the call with a release store; the doorbell must not be read before that store is
        // visible, or a drain that just cleared it could miss the call and leave it waiting for its timeout.
        VarHandle.fullFence();
        if (!doorbell.get() && doorbell.compareAndSet(false, true)) {
            try {
                loop.execute(drain);
            } catch (RejectedExecutionException closed) {
                call.fail(new FabricException("memory server " + serverId + " at " + endpoint + ": the fabric is closed"));
            }
        }
    }

    /** Closes the connection and fails what is in flight with {@code reason}; returns at once. */
    void breakWith(FabricException reason) {
        // Marked broken at once, so the caller's next verb opens a new connection instead of queueing here.
        broken.compareAndSet(null, reason);
        try {
            loop.execute(() -> breakNow(reason));
        } catch (RejectedExecutionException closed) {
            // The event loops are gone with the fabric; nothing is left to fail.
        }
    }

    /** A fresh exception that keeps {@code failure}'s message and cause, with the caller's stack trace. */
    static FabricException copy(FabricException failure) {
        if (failure instanceof dev.dex.rdma.FencedException) {
            return new dev.dex.rdma.FencedException(failure.getMessage());
        }
        return new FabricException(failure.getMessage(), failure);
    }

    // ---- event loop only

    private void drain() {
        doorbell.set(false);
        FabricException failure = broken.get();
        if (failure != null) {
            failQueued(failure);
            return;
        }
        ByteBuf out = null;
        VerbCall call;
        while (inFlight.size() < window && (call = submitted.poll()) != null) {
            if (call.isAbandoned()) {
                continue;
            }
            if (out == null) {
                out = channel.alloc().directBuffer(LENGTH_FIELD_LENGTH + REQUEST_HEADER_LENGTH + payloadOf(call));
            }
            int mark = out.writerIndex();
            try {
                encode(call, out);
            } catch (RuntimeException badBuffer) {
                // The caller's source did not hold the bytes it named: that verb fails, the others go out.
                out.writerIndex(mark);
                call.fail(new FabricException("a request to memory server " + serverId + " could not be encoded: " + badBuffer,
                        badBuffer));
                continue;
            }
            inFlight.add(call);
        }
        if (out != null) {
            channel.writeAndFlush(out, channel.voidPromise());
        }
    }

    private void encode(VerbCall call, ByteBuf out) {
        int payload = payloadOf(call);
        call.requestId = nextRequestId++;
        out.writeIntLE(REQUEST_HEADER_LENGTH + payload);
        out.writeByte(call.op);
        out.writeZero(3);
        out.writeIntLE(call.count);
        out.writeLongLE(call.requestId);
        out.writeLongLE(call.address);
        out.writeLongLE(call.operand1);
        out.writeLongLE(call.operand2);
        if (payload > 0) {
            out.ensureWritable(payload);
            ByteBufViews.wrap(view, out, out.writerIndex(), payload);
            view.putBytes(0, call.src, call.srcOffset, payload);
            out.writerIndex(out.writerIndex() + payload);
        }
    }

    private static int payloadOf(VerbCall call) {
        return call.op == OP_WRITE || call.op == OP_MESSAGE ? call.count : 0;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf frame) {
        int base = frame.readerIndex();
        int length = frame.readableBytes();
        if (length < RESPONSE_HEADER_LENGTH) {
            protocolError("an answer of " + length + " bytes is shorter than its header");
            return;
        }
        long id = frame.getLongLE(base + RESPONSE_ID_OFFSET);
        int payload = frame.getIntLE(base + COUNT_OFFSET);
        if (frame.getByte(base + STATUS_OFFSET) == TcpFrameDescriptor.STATUS_FENCED && payload == length - RESPONSE_HEADER_LENGTH) {
            // A refused greeting, or the notice a fenced client's connections get: everything in flight fails as
            // fenced (it was not applied), and so does every later verb, on this connection and on new ones.
            String reason = frame.toString(base + RESPONSE_HEADER_LENGTH, Math.min(payload, TcpFrameDescriptor.MAX_REASON_BYTES),
                    StandardCharsets.UTF_8);
            breakNow(new dev.dex.rdma.FencedException("memory server " + serverId + " at " + endpoint + " fenced this client: " + reason));
            return;
        }
        VerbCall call = inFlight.peek();
        if (call == null || call.requestId != id || payload != length - RESPONSE_HEADER_LENGTH) {
            // Left in flight, so breaking the connection fails it with the others.
            protocolError("an answer to request " + id + (call == null ? " with none in flight" : " where " + call.requestId + " was next"));
            return;
        }
        inFlight.poll();
        if (!call.beginCompletion()) {
            return;
        }
        byte status = frame.getByte(base + STATUS_OFFSET);
        call.status = status;
        call.value = frame.getLongLE(base + VALUE_OFFSET);
        if (status != STATUS_OK) {
            call.reason = frame.toString(base + RESPONSE_HEADER_LENGTH, payload, StandardCharsets.UTF_8);
        } else if (call.op == OP_READ) {
            if (payload != call.count) {
                call.failure = new FabricException("memory server " + serverId + " at " + endpoint + " answered a read of "
                        + call.count + " bytes with " + payload);
            } else {
                copyOut(call, frame, base, payload);
            }
        } else if (call.op == OP_MESSAGE) {
            if (payload > call.dst.capacity() - call.dstOffset) {
                call.failure = new FabricException("memory server " + serverId + " at " + endpoint + " answered a message with "
                        + payload + " bytes, more than the " + (call.dst.capacity() - call.dstOffset) + " the sender has room for");
            } else {
                copyOut(call, frame, base, payload);
                call.value = payload;
            }
        } else if (call.op == OP_HELLO && payload >= Long.BYTES) {
            call.extra = frame.getLongLE(base + RESPONSE_HEADER_LENGTH);
            call.extra2 = payload >= 2 * Long.BYTES ? frame.getLongLE(base + RESPONSE_HEADER_LENGTH + Long.BYTES) : 0;
            call.extra3 = payload >= 3 * Long.BYTES ? frame.getLongLE(base + RESPONSE_HEADER_LENGTH + 2 * Long.BYTES) : 0;
        }
        call.finish();
    }

    /** Copies an answer's payload into the caller's buffer; a copy that fails fails the verb, never the loop. */
    private void copyOut(VerbCall call, ByteBuf frame, int base, int payload) {
        try {
            ByteBufViews.wrap(view, frame, base + RESPONSE_HEADER_LENGTH, payload);
            call.dst.putBytes(call.dstOffset, view, 0, payload);
        } catch (RuntimeException badBuffer) {
            call.failure = new FabricException("the answer of memory server " + serverId + " did not fit the caller's buffer: "
                    + badBuffer, badBuffer);
        }
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        if (!submitted.isEmpty()) {
            drain();
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        breakNow(new FabricException("connection to memory server " + serverId + " at " + endpoint + " was closed"));
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        breakNow(new FabricException("connection to memory server " + serverId + " at " + endpoint + " failed: " + cause, cause));
    }

    private void protocolError(String what) {
        breakNow(new FabricException("memory server " + serverId + " at " + endpoint + " broke the protocol: " + what));
    }

    private void breakNow(FabricException reason) {
        broken.compareAndSet(null, reason);
        FabricException failure = broken.get();
        VerbCall call;
        while ((call = inFlight.poll()) != null) {
            call.fail(failure);
        }
        failQueued(failure);
        if (channel != null) {
            channel.close();
        }
    }

    private void failQueued(FabricException reason) {
        VerbCall call;
        while ((call = submitted.poll()) != null) {
            call.fail(reason);
        }
    }
}
