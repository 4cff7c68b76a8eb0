package dev.dex.bench;

import java.util.concurrent.Phaser;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

/**
 * What the main thread and the workers of one run share.
 *
 * <pre>
 * Phases of {@link #phaser} (the main thread and every worker are parties):
 *   0 ready     every worker has its sessions
 *   1 warm-up   every worker has run its warm-up operations; the main thread then resets the engines' stats
 *   2 go        the measured operations start
 *   3 done      every worker has finished (workers deregister, which is also how a failed worker leaves)
 *
 * Concurrency: workers count progress in LongAdders (one add per batch of operations, never per operation);
 * the first failure wins a compare-and-set; stop is a volatile flag workers poll once per batch.
 * </pre>
 */
final class RunControl {
    final Phaser phaser;
    final LongAdder warmedUp = new LongAdder();
    final LongAdder measured = new LongAdder();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private volatile boolean stop;

    RunControl(int workers) {
        this.phaser = new Phaser(workers + 1);
    }

    /** Records {@code t} if it is the first failure, and stops every worker. */
    void fail(Throwable t) {
        failure.compareAndSet(null, t);
        stop = true;
    }

    Throwable failure() {
        return failure.get();
    }

    boolean stopped() {
        return stop;
    }
}
