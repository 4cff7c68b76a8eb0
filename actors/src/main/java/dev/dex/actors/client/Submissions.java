package dev.dex.actors.client;

import java.util.concurrent.CompletableFuture;

import org.apache.pekko.actor.typed.ActorRef;

import dev.dex.actors.partition.HopTrace;
import dev.dex.actors.partition.Ops;

/**
 * Where a {@link DexClientApi} leaves operations for its {@link DexClient} actor, in one JVM: a lock-free queue and a
 * doorbell (a flag set by the producer that finds it clear, which then sends one {@link DexClient.Drain}); the actor
 * completes each operation's future on {@code executor}, the API's, in one task per batch answer. Kept apart from the
 * actor because it is the one piece both sides touch: the API's threads produce, the actor consumes.
 *
 * <p>Concurrency: any number of producer threads, one consumer (the actor). A producer adds to the queue,
 * then rings; the actor clears the doorbell before it polls, so an operation is either polled by a drain
 * already running or rings for the next one.
 */
final class Submissions {
    /** One operation of a {@link DexClientApi}: a get, put or delete ({@code reply}), or a scan ({@code scanReply}). */
    record Submitted(Ops.Op op, CompletableFuture<DexClient.Reply> reply, CompletableFuture<DexClient.ScanReply> scanReply,
                     long deadline, long[] trace) {
        Submitted(Ops.Op op, CompletableFuture<DexClient.Reply> reply, CompletableFuture<DexClient.ScanReply> scanReply,
                  long deadline) {
            this(op, reply, scanReply, deadline, null);
        }
    }

    /** Where traced operations are recorded, and one in how many is traced (0: none); set together. */
    private record Tracing(int every, HopTable table) {
    }

    private volatile Tracing tracing = new Tracing(0, null);

    void trace(int every, HopTable table) {
        tracing = new Tracing(every, table);
    }

    /** A new trace stamped with its submission, for about one operation in {@code every}; null for the others. */
    long[] sample() {
        Tracing t = tracing;
        if (t.every == 0 || java.util.concurrent.ThreadLocalRandom.current().nextInt(t.every) != 0) {
            return null;
        }
        long[] trace = HopTrace.create();
        HopTrace.stamp(trace, HopTrace.SUBMIT);
        return trace;
    }

    /** Records a traced operation's completion. */
    void completed(long[] trace) {
        HopTrace.stamp(trace, HopTrace.COMPLETED);
        HopTable table = tracing.table;
        if (table != null) {
            table.record(trace);
        }
    }

    final java.util.concurrent.ConcurrentLinkedQueue<Submitted> queue = new java.util.concurrent.ConcurrentLinkedQueue<>();
    final java.util.concurrent.atomic.AtomicBoolean doorbell = new java.util.concurrent.atomic.AtomicBoolean();
    final java.util.concurrent.Executor executor;

    Submissions(java.util.concurrent.Executor executor) {
        this.executor = executor;
    }

    /** Why the client actor stopped, once it has; set before the queue is emptied one last time. */
    private volatile String stopped;

    /** Leaves {@code submitted} for {@code client}, ringing it if nobody has since its last drain. */
    void submit(Submitted submitted, ActorRef<DexClient.Command> client) {
        queue.add(submitted);
        if (stopped != null) {
            failWaiting(stopped);
        } else if (!doorbell.get() && doorbell.compareAndSet(false, true)) {
            client.tell(new DexClient.Drain(this));
        }
    }

    /** The client actor stopped: what waits, and everything submitted from now on, fails with {@code why}. */
    void stop(String why) {
        stopped = why;
        failWaiting(stopped);
    }

    /** Every operation waiting in the queue fails with {@code why}. */
    void failWaiting(String why) {
        for (Submitted submitted; (submitted = queue.poll()) != null; ) {
            if (submitted.scanReply() != null) {
                submitted.scanReply().complete(new DexClient.ScanReply(new long[0], new long[0], why));
            } else {
                submitted.reply().complete(new DexClient.Reply(false, 0, why));
            }
        }
    }
}
