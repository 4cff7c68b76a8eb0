package dev.dex.core.cache;

import org.agrona.DirectBuffer;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/**
 * Watches the engine's writing verbs (write, compare-and-swap, fetch-and-add) for failures ({@link FabricException}),
 * for two decisions ({@code docs/durability.md}, "When a verb fails"):
 * <ul>
 *   <li>whether the engine may give a partition up without being fenced: a write whose answer was lost may still
 *       land later, after a new owner started, so once one failed the next owner must fence this engine instead
 *       ({@link #since});</li>
 *   <li>whether the engine is healthy: writes that keep failing for longer than the node's
 *       {@code write-back-timeout} make the compute node report itself not ready and leave
 *       ({@link #failingSinceNanos}).</li>
 * </ul>
 *
 * <pre>
 * Concurrency: called by every thread that issues verbs. The failure count is an atomic counter; the start of the
 * current run of failures is a volatile word that a failure sets when it is 0 and any successful write clears
 * (a success costs one volatile read when nothing is failing). Races between a success and a failure at the same
 * moment leave either value, both true of some instant.
 * </pre>
 */
final class WriteFailures extends ForwardingRemoteMemory {
    private final java.util.concurrent.atomic.AtomicLong failures = new java.util.concurrent.atomic.AtomicLong();
    /** System.nanoTime() of the first failure since the last success, or 0. */
    private volatile long failingSince;
    private volatile Throwable last;

    WriteFailures(RemoteMemory delegate) {
        super(delegate);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        try {
            super.write(address, src, srcOffset, length);
        } catch (FabricException e) {
            throw failed(e);
        }
        succeeded();
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        long found;
        try {
            found = super.compareAndSwap(address, expected, desired);
        } catch (FabricException e) {
            throw failed(e);
        }
        succeeded();
        return found;
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        long found;
        try {
            found = super.fetchAndAdd(address, delta);
        } catch (FabricException e) {
            throw failed(e);
        }
        succeeded();
        return found;
    }

    private FabricException failed(FabricException e) {
        failures.incrementAndGet();
        last = e;
        if (failingSince == 0) {
            failingSince = Math.max(1, System.nanoTime());
        }
        return e;
    }

    private void succeeded() {
        if (failingSince != 0) {
            failingSince = 0;
        }
    }

    /** Writing verbs that failed so far; compare two readings to learn whether one failed in between. */
    long count() {
        return failures.get();
    }

    /** Whether a writing verb failed after the reading {@code count} of {@link #count}. */
    boolean since(long count) {
        return failures.get() != count;
    }

    /** System.nanoTime() when writes started failing with no success since, or 0 when the last one succeeded. */
    long failingSinceNanos() {
        return failingSince;
    }

    /** The last failure, or null. */
    Throwable last() {
        return last;
    }
}
