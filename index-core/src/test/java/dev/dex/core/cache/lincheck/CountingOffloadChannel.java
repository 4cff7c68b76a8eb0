package dev.dex.core.cache.lincheck;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import dev.dex.core.node.LeafOps;
import dev.dex.core.offload.OffloadChannel;
import dev.dex.core.offload.OffloadRequest;

/**
 * An offload channel that tells what each operation's offload came to, so that a test can show its
 * checked runs really offloaded and really fell back. It forwards every request and remembers, per
 * compute thread, how many it sent and the last one.
 *
 * <p>An operation sends at most one message, a write or a read (a lookup): a fallback makes the rest of the
 * operation take the caching path, and a completed write or read ends it. A write the compute node's exclusion
 * refused is not sent at all (the engine counts it, {@code CacheStats#offloadsExcluded}). Each session reuses one
 * request, and resets its answer before sending it again, so the answer to read is the last one, once the
 * operation has returned:
 *
 * <ul>
 *   <li>a write answered OK: the operation was completed by offloading;</li>
 *   <li>a write answered NEEDS_SPLIT: an insert or put met a full leaf;</li>
 *   <li>a read answered OK: either completed, or fell back because a node on the path was cached or in use,
 *       or because the compute node changed that memory server meanwhile; the engine's counters tell how
 *       many of these fell back;</li>
 *   <li>anything else (STALE, FENCE_MISMATCH, CROSS_SERVER, REJECTED): another fallback.</li>
 * </ul>
 *
 * <pre>
 * Concurrency: each compute thread writes only its own sender record (created by computeIfAbsent) and
 * reads it back after its operation; a request's answer is published to it by the request's completion.
 * </pre>
 */
final class CountingOffloadChannel implements OffloadChannel {

    /** What one operation's offload came to. */
    enum Outcome {
        NOT_OFFLOADED, COMPLETED, NEEDS_SPLIT, READ_ANSWERED, OTHER_FALLBACK
    }

    private final OffloadChannel channel;
    private final Map<Thread, Sender> senders = new ConcurrentHashMap<>();

    CountingOffloadChannel(OffloadChannel channel) {
        this.channel = channel;
    }

    @Override
    public void submit(OffloadRequest request) {
        Sender sender = sender();
        sender.sent++;
        sender.last = request;
        channel.submit(request);
    }

    /** Call before an operation of the calling thread; pass the result to {@link #outcomeSince}. */
    long mark() {
        return sender().sent;
    }

    /** What the calling thread's operation, which started at {@code mark} and has returned, offloaded. */
    Outcome outcomeSince(long mark) {
        Sender sender = sender();
        long sent = sender.sent - mark;
        if (sent == 0) {
            return Outcome.NOT_OFFLOADED;
        }
        if (sent > 1) {
            throw new IllegalStateException("one operation sent " + sent + " offload requests; at most one write or one read");
        }
        OffloadRequest last = sender.last;
        if (last.phase() == OffloadRequest.READ) {
            if (sent != 1 || last.op() != LeafOps.LOOKUP) {
                throw new IllegalStateException("one operation sent " + sent + " requests ending in a read of op " + last.op()
                        + "; a read is a lookup's only request");
            }
            return last.status() == OffloadRequest.OK ? Outcome.READ_ANSWERED : Outcome.OTHER_FALLBACK;
        }
        if (last.phase() != OffloadRequest.WRITE || last.op() == LeafOps.LOOKUP) {
            throw new IllegalStateException("an operation sent phase " + last.phase() + " of op " + last.op());
        }
        return switch (last.status()) {
            case OffloadRequest.OK -> Outcome.COMPLETED;
            case OffloadRequest.NEEDS_SPLIT -> Outcome.NEEDS_SPLIT;
            default -> Outcome.OTHER_FALLBACK;
        };
    }

    private Sender sender() {
        return senders.computeIfAbsent(Thread.currentThread(), thread -> new Sender());
    }

    @Override
    public void close() {
        channel.close();
    }

    private static final class Sender {
        long sent;
        OffloadRequest last;
    }
}
