package dev.dex.rdma.tcp;

import static dev.dex.rdma.tcp.TcpFrameDescriptor.COUNT_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.RESPONSE_HEADER_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_NOT_PRIMARY;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_OK;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.VALUE_OFFSET;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicReference;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;

/**
 * One backup of a primary's {@link ReplicationStream}: a connection from the primary to the backup's region server on
 * which the stream's frames go out in stream order and the backup answers each, in order, once it applied it.
 *
 * <p>Concurrency: {@link #send} is called by the stream under its lock and hands the frame to the channel's event loop
 * with {@code execute}, never writing inline, so frames leave in the order the lock gave them whichever thread sent
 * them. The frames in flight, the flush flag and the channel are touched only by the event loop. What the stream and
 * the region server's connections read of a link ({@link #acked}, {@link #ackedSentNanos}, {@link #gating}, {@link #complete},
 * {@link #broken}) is volatile; {@code acked} and {@code ackedSentNanos} only grow.
 */
final class ReplicaLink extends SimpleChannelInboundHandler<ByteBuf> {
    final String endpoint;
    private final ReplicationStream stream;
    private Channel channel;
    /** Per frame sent and not answered, oldest first: its flags, when it was sent, its copy bytes (event loop only). */
    private final ArrayDeque<long[]> inFlight = new ArrayDeque<>();
    private boolean flushScheduled;
    private final Runnable flush = this::flushNow;
    /** The number of the last change the backup acknowledged: it holds the stream up to it. */
    volatile long acked;
    /** When the primary sent the last frame the backup acknowledged (System.nanoTime, the primary's clock). */
    volatile long ackedSentNanos;
    /**
     * Its acknowledgements hold the primary's answers back: from its greeting until it says it needs a copy, and from
     * the end of its copy on. So every change answered after that point is on it.
     */
    volatile boolean gating = true;
    /**
     * It holds every change the primary answered: it held the stream's prefix at its greeting, or its copy's last
     * frame is acknowledged (it was gating since that frame was sent). Only such a backup may become primary.
     */
    volatile boolean complete;
    /** Copy bytes not yet acknowledged, while a copy runs (for status). */
    volatile long copyLeft;
    private final AtomicReference<String> broken = new AtomicReference<>();
    /** The backup answered this link's greeting: it says where it stands (see {@link ReplicationStream#greeted}). */
    volatile boolean greetingAnswered;

    private ReplicaLink(String endpoint, ReplicationStream stream, long acked) {
        this.endpoint = endpoint;
        this.stream = stream;
        this.acked = acked;
        // No lease from this link until its backup acknowledged something (its greeting first).
        this.ackedSentNanos = System.nanoTime() - (1L << 62);
    }

    /** Connects to the backup at {@code endpoint}; throws {@link IllegalStateException} when it cannot be reached. */
    static ReplicaLink connect(String endpoint, int serverId, ReplicationStream stream, TcpSettings settings, IoTransport io) {
        InetSocketAddress address = TcpEndpoint.parse(serverId, endpoint);
        ReplicaLink link = new ReplicaLink(endpoint, stream, 0);
        link.channel = io.connect(address, settings, link, true, (reason, cause) -> new IllegalStateException(
                "memory server " + serverId + " cannot reach its backup at " + endpoint + ": " + reason, cause));
        return link;
    }

    /** Starts counting acknowledgements from {@code number} (the stream's last change when the link joined). */
    void startAt(long number) {
        acked = number;
    }

    /** Why the link is gone, or null while it works. */
    String broken() {
        return broken.get();
    }

    /** Whether the backup takes frames now (its queued frames are below the water mark); the copy waits otherwise. */
    boolean writable() {
        return channel.isWritable() || broken.get() != null;
    }

    /** Sends {@code frame} (released by the link) after every frame sent before; called under the stream's lock. */
    void send(ByteBuf frame, long flags, int copyBytes) {
        try {
            channel.eventLoop().execute(() -> {
                if (broken.get() != null) {
                    frame.release();
                    return;
                }
                inFlight.add(new long[] {flags, System.nanoTime(), copyBytes});
                channel.write(frame, channel.voidPromise());
                if (!flushScheduled) {
                    flushScheduled = true;
                    channel.eventLoop().execute(flush);
                }
            });
        } catch (RejectedExecutionException closed) {
            frame.release();
            breakWith("the fabric is closed");
        }
    }

    /**
     * Breaks the link when its oldest unanswered frame was sent more than {@code limitNanos} ago: a backup that went
     * silent without closing its connection (a host that froze, a cut that drops packets) does not hold the primary's
     * answers until TCP gives up, hours later. Runs on the link's event loop.
     */
    void checkSilence(long limitNanos) {
        try {
            channel.eventLoop().execute(() -> {
                long[] oldest = inFlight.peek();
                if (oldest != null && System.nanoTime() - oldest[1] > limitNanos) {
                    breakWith("no acknowledgement for " + (System.nanoTime() - oldest[1]) / 1_000_000 + " ms");
                }
            });
        } catch (RejectedExecutionException closed) {
            breakWith("the fabric is closed");
        }
    }

    private void flushNow() {
        flushScheduled = false;
        channel.flush();
    }

    /** Closes the link; the stream hears of it through {@link ReplicationStream#linkLost}. */
    void breakWith(String reason) {
        if (broken.compareAndSet(null, reason)) {
            if (channel != null) {
                channel.close();
            }
            stream.linkLost(this, reason);
        }
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf frame) {
        int base = frame.readerIndex();
        int length = frame.readableBytes();
        long[] sent = inFlight.poll();
        if (length < RESPONSE_HEADER_LENGTH || sent == null) {
            breakWith("the backup answered what the primary did not ask");
            return;
        }
        byte status = frame.getByte(base + STATUS_OFFSET);
        if (status != STATUS_OK) {
            int payload = Math.min(frame.getIntLE(base + COUNT_OFFSET), length - RESPONSE_HEADER_LENGTH);
            String reason = frame.toString(base + RESPONSE_HEADER_LENGTH, Math.max(0, payload), StandardCharsets.UTF_8);
            if (status == STATUS_NOT_PRIMARY) {
                stream.refusedByView(this, reason); // a newer view: this primary was replaced
            }
            breakWith("the backup refused the stream: " + reason); // otherwise greeted again later
            return;
        }
        long value = frame.getLongLE(base + VALUE_OFFSET);
        long flags = sent[0];
        if (flags == ReplicationStream.GREETING) {
            ackedSentNanos = sent[1];
            greetingAnswered = true;
            complete = value == 1;
            stream.greeted(this, complete);
        } else {
            if (value > acked) {
                acked = value;
            }
            ackedSentNanos = sent[1];
            if ((flags & TcpFrameDescriptor.APPLY_COPY) != 0) {
                copyLeft -= sent[2];
            }
            if ((flags & TcpFrameDescriptor.APPLY_COPY_DONE) != 0) {
                complete = true;
                copyLeft = 0;
            }
        }
        stream.progressed();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        breakWith("the connection to the backup closed");
        ctx.fireChannelInactive();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        breakWith(cause.toString());
    }
}
