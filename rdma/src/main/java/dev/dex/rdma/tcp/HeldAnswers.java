package dev.dex.rdma.tcp;

import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;

/**
 * The answers of one client connection of a replicated primary that wait for the backups' acknowledgements
 * (docs/replication.md, "The write path"): each is written once {@link ReplicationStream#mayAnswer} the stream's number
 * that was current when it was made (so a read that may have seen a change waits for it too), in request order. Where
 * the server is not a primary ({@link Replica#stream} null) and nothing is held, an answer is written at once.
 *
 * <p>Concurrency: the connection's event loop alone touches the queue, the context and the stream awaited. The stream
 * calls {@link #wake} from any thread when an acknowledgement comes; it schedules one release on the event loop
 * ({@code wakeScheduled} coalesces them). {@link #out} registers with the stream before it looks again, and a release
 * clears the flag before it looks, so no acknowledgement goes unseen.
 */
final class HeldAnswers {
    private final Replica replica;
    /** Runs after answers went out: the connection may read its deferred requests again. */
    private final Consumer<ChannelHandlerContext> released;
    private final ArrayDeque<ByteBuf> held = new ArrayDeque<>();
    private final ArrayDeque<Long> numbers = new ArrayDeque<>();
    private ChannelHandlerContext context;
    private ReplicationStream awaited;
    private final AtomicBoolean wakeScheduled = new AtomicBoolean();
    private final Runnable wake = () -> {
        if (wakeScheduled.compareAndSet(false, true)) {
            try {
                context.executor().execute(this::release);
            } catch (RejectedExecutionException closing) {
                wakeScheduled.set(false);
            }
        }
    };

    HeldAnswers(Replica replica, Consumer<ChannelHandlerContext> released) {
        this.replica = replica;
        this.released = released;
    }

    int size() {
        return held.size();
    }

    /** Writes {@code answer} now, or holds it until the backups acknowledged what its request may have seen. */
    void out(ChannelHandlerContext ctx, ByteBuf answer) {
        if (replica.stream == null && held.isEmpty()) {
            ctx.write(answer, ctx.voidPromise());
            return;
        }
        VarHandle.fullFence(); // what this request read of the region, before the number it waits for
        ReplicationStream stream = replica.stream;
        long number = stream == null ? 0 : stream.assigned();
        if (held.isEmpty() && stream.mayAnswer(number)) {
            ctx.write(answer, ctx.voidPromise());
            return;
        }
        held.add(answer);
        numbers.add(number);
        if (awaited != stream && stream != null) {
            if (awaited != null) {
                awaited.stopAwaiting(wake);
            }
            context = ctx;
            awaited = stream;
            stream.await(wake);
        }
        release(); // again after registering: an acknowledgement may have come in between
    }

    /** Writes the held answers the backups have acknowledged, in order (event loop). */
    private void release() {
        wakeScheduled.set(false);
        ReplicationStream stream = awaited;
        boolean wrote = false;
        while (!held.isEmpty() && stream != null && stream.mayAnswer(numbers.peek())) {
            numbers.poll();
            context.write(held.poll(), context.voidPromise());
            wrote = true;
        }
        if (wrote) {
            context.flush();
            if (held.isEmpty()) {
                stream.stopAwaiting(wake);
                awaited = null;
            }
            released.accept(context);
        }
    }

    /** The connection closed: what is held is never answered (its client fails it as of unknown outcome). */
    void drop() {
        ByteBuf answer;
        while ((answer = held.poll()) != null) {
            answer.release();
        }
        numbers.clear();
        if (awaited != null) {
            awaited.stopAwaiting(wake);
            awaited = null;
        }
    }
}
