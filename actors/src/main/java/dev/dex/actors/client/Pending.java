package dev.dex.actors.client;

import java.time.Duration;
import java.util.function.Consumer;

import dev.dex.actors.partition.Ops;

/**
 * One operation of a {@link DexClient} waiting for its partition, or in flight to it; a scan in progress carries its
 * accumulated entries ({@link ScanProgress}). Counts its attempts, so that the client knows when to give up.
 */
final class Pending {
    /** The deadline of operations sent as actor messages: their askers time out on their own. */
    static final long FOREVER = Duration.ofDays(365).toNanos();

    final Ops.Op op;
    final Consumer<DexClient.Reply> reply;
    final ScanProgress scan;
    /** {@link System#nanoTime()} after which the operation is not tried again; far off for actor messages. */
    final long deadline;
    int attempts;
    /** The operation's {@link dev.dex.actors.partition.HopTrace}, null unless it is traced. */
    long[] trace;

    Pending(Ops.Op op, Consumer<DexClient.Reply> reply, ScanProgress scan) {
        this(op, reply, scan, System.nanoTime() + FOREVER);
    }

    Pending(Ops.Op op, Consumer<DexClient.Reply> reply, ScanProgress scan, long deadline) {
        this.op = op;
        this.reply = reply;
        this.scan = scan;
        this.deadline = deadline;
    }

    /**
     * Answers the operation with {@code result}; or, when it is a part of a scan that goes on, takes the part's entries
     * and returns the operation that asks for the next part, to be sent like any other.
     */
    Pending answer(Ops.Result result) {
        if (scan == null) {
            reply.accept(new DexClient.Reply(result.found(), result.value(), result.status() == Ops.OK ? null : errorOf(result)));
            return null;
        }
        Ops.Op next = scan.take(op, result);
        return next == null ? null : new Pending(next, null, scan, scan.deadline);
    }

    /** The error text of a failed result; a status without one (a newer node's) is still an error. */
    static String errorOf(Ops.Result result) {
        return result.error() != null ? result.error() : "the partition answered status " + result.status();
    }
}
