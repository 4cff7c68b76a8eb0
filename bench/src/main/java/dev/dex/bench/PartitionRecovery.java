package dev.dex.bench;

import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

import dev.dex.core.cache.DexEngine;
import dev.dex.core.partition.PartitionedEngine;

/**
 * Takes a partition up again after a failed operation left it unusable, as the cluster's Partition actor does: with
 * the redo log, a lost append makes every later commit of the partition fail until it is abandoned and acquired
 * again ({@link DexEngine#logFailed}), and an acquire that failed leaves the partition unheld until one succeeds.
 * Acquire is tried {@value #ACQUIRE_ATTEMPTS} times, since faults are still being injected; a partition left unheld
 * is tried again by the next operation that finds it so.
 *
 * <pre>
 * Concurrency: recoveries of one partition are serialized on its monitor, and a thread that waited there checks
 * again whether the partition still needs one. A worker recovers only after its operation ended and with no key
 * stripe held, so abandon's wait for the partition's operations in flight waits only for operations that end
 * on their own. Counters are LongAdders.
 * </pre>
 */
final class PartitionRecovery {
    static final int ACQUIRE_ATTEMPTS = 5;

    private final List<? extends PartitionedEngine> engines;
    private final Object[] monitors;
    private final LongAdder recovered = new LongAdder();
    private final LongAdder failedAcquires = new LongAdder();
    private final AtomicReference<RuntimeException> lastFailure = new AtomicReference<>();

    /** @param engines the engines of the bench's static assignment: partition p is held by engine p mod size */
    PartitionRecovery(List<? extends PartitionedEngine> engines) {
        this.engines = List.copyOf(engines);
        this.monitors = new Object[engines.get(0).partitions().count()];
        for (int p = 0; p < monitors.length; p++) {
            monitors[p] = new Object();
        }
    }

    int partitions() {
        return monitors.length;
    }

    private PartitionedEngine holder(int partition) {
        return engines.get(partition % engines.size());
    }

    private static boolean needsRecovery(PartitionedEngine engine, int partition) {
        return !engine.holds(partition) || engine instanceof DexEngine dex && dex.logFailed(partition);
    }

    /** Abandons and acquires {@code partition} again if it needs it; true when its engine holds it afterwards. */
    boolean recoverIfNeeded(int partition) {
        synchronized (monitors[partition]) {
            PartitionedEngine engine = holder(partition);
            if (!needsRecovery(engine, partition)) {
                return true;
            }
            if (engine instanceof DexEngine dex) {
                dex.abandon(partition);
            } else {
                engine.release(partition);
            }
            for (int attempt = 0; attempt < ACQUIRE_ATTEMPTS; attempt++) {
                try {
                    engine.acquire(partition);
                    recovered.increment();
                    return true;
                } catch (RuntimeException e) {
                    failedAcquires.increment();
                    lastFailure.set(e);
                }
            }
            return false;
        }
    }

    /** Partitions given up and acquired again. */
    long recovered() {
        return recovered.sum();
    }

    /** Acquires that failed (and were tried again, up to {@value #ACQUIRE_ATTEMPTS} times per recovery). */
    long failedAcquires() {
        return failedAcquires.sum();
    }

    /** Why the last acquire that failed did, or null. */
    RuntimeException lastFailure() {
        return lastFailure.get();
    }
}
