package dev.dex.core.cache;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Sweeps (docs/merges.md, "Sweeps"): the passes that deletes start ({@link Merges}) leave leaves between a quarter full
 * and the merged fill that could still merge; once a partition's deletes stopped, a sweep merges over all of it.
 *
 * <p><b>Which partitions.</b> A held partition is due once it saw at least {@link #MIN_DELETES} deletes since its last
 * sweep, and {@link #DELETES_PER_LEAF} per leaf that sweep read (so that a large partition with a trickle of deletes is
 * not read whole for a few of them). It is swept when it then saw no delete for the quiet time, or, under a steady
 * trickle that never stops, {@link #LATEST_QUIET_TIMES} quiet times after it became due.
 *
 * <p><b>Short pauses.</b> A sweep goes over a partition in steps: each is a pass of its own ({@link Merges#sweepStep})
 * that pauses the partition for at most {@link #PARENTS_PER_STEP} level-1 nodes and their leaves; then the sweep
 * parks as long as the step took (at least {@link #GAP_NANOS}), so that the operations that waited run; a cursor (a
 * key) says where the next step goes on, first at level 1, then at level 2. A call ends after
 * {@link #CALL_BUDGET_NANOS} and the next goes on from the cursors, so a worker is not held long. A step that cannot
 * pause the partition (its operations do not drain), or that ends with a failed verb or a node it could not read,
 * backs off as any pass does, and the sweep goes on from its cursor at a later call. A partition is swept once every
 * step ran, whatever they merged. A sweep "at once" (quiet time 0: the caller knows the partitions idle) neither
 * parks, nor ends early, nor waits for a back-off.
 *
 * <pre>
 * Concurrency: noteDelete is called by any session thread: one atomic add on a cache line of the partition's own.
 *   sweep runs on one thread at a time (sweeping; a call while another runs returns at once); it alone touches the
 *   plain arrays and cursors, published from one sweeping thread to the next by the flag's compare-and-set and set.
 *   Its steps exclude every other pass through Merges' running flag.
 * </pre>
 */
final class MergeSweeps {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(MergeSweeps.class);
    /** Deletes since a partition's last sweep that make it due, at least... */
    static final int MIN_DELETES = 256;
    /** ... and this many per leaf that sweep read (a tenth of a leaf at the merged fill, for 8-byte keys). */
    static final int DELETES_PER_LEAF = 4;
    /** A due partition whose deletes never stop is swept this many quiet times after it became due. */
    static final int LATEST_QUIET_TIMES = 30;
    /** Level-1 nodes a step merges under: the partition's operations wait for that much work at most. */
    static final int PARENTS_PER_STEP = 16;
    /** The least time a sweep lets a partition's operations run between two of its steps. */
    static final long GAP_NANOS = java.util.concurrent.TimeUnit.MICROSECONDS.toNanos(100);
    /** A sweep call that waits for quiet ends after this long, and the next call goes on from the cursors. */
    static final long CALL_BUDGET_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(100);
    /** Longs between two partitions' delete counters: a cache line each. */
    private static final int STRIDE = 8;

    /** Where a sweep of one partition goes on. */
    static final class Cursor {
        int level = 1;
        /** The key of the next level-{@code level} node; null: the partition's start. */
        long[] key;
        boolean done;
        /** The last step ended with a failed verb. */
        boolean failed;
        int leaves;

        /** One step's work, inside a pass over the paused partition: up to PARENTS_PER_STEP nodes at this level. */
        void step(Merges.Pass pass, int levels) {
            int before = pass.leaves;
            key = pass.everyParent(level, key, PARENTS_PER_STEP);
            leaves += pass.leaves - before;
            if (pass.gaveUp) {
                failed = true; // on from this key later, not past it
            } else if (key == null && ++level > levels) {
                done = true;
            }
        }
    }

    private final Merges merges;
    private final HeldPartitions held;
    /** Per partition (every STRIDE-th slot): deletes this engine applied. */
    private final AtomicLongArray deletes;
    private final long[] deletesSeen;
    private final long[] quietSince;
    private final long[] dueSince;
    private final long[] deletesAtSweep;
    private final long[] leavesAtSweep;
    private final Cursor[] cursors;
    private final AtomicBoolean sweeping = new AtomicBoolean();
    /** Steps that ran (each a pause of its partition). */
    private final java.util.concurrent.atomic.AtomicLong steps = new java.util.concurrent.atomic.AtomicLong();

    /** Per partition, 1 once it split: its cursor is dropped by the next sweep (the sweeping thread owns the cursors). */
    private final java.util.concurrent.atomic.AtomicIntegerArray restarts;

    MergeSweeps(Merges merges, HeldPartitions held, int partitions) {
        this.merges = merges;
        this.held = held;
        this.deletes = new AtomicLongArray(partitions * STRIDE);
        this.deletesSeen = new long[partitions];
        this.quietSince = new long[partitions];
        this.dueSince = new long[partitions];
        this.deletesAtSweep = new long[partitions];
        this.leavesAtSweep = new long[partitions];
        this.cursors = new Cursor[partitions];
        this.restarts = new java.util.concurrent.atomic.AtomicIntegerArray(partitions);
    }

    /** Partitions swept so far (every step of a sweep ran). */
    private final java.util.concurrent.atomic.AtomicLong sweptTotal = new java.util.concurrent.atomic.AtomicLong();

    /** Partitions swept so far. */
    long swept() {
        return sweptTotal.get();
    }

    /** Steps the sweeps ran so far: each paused its partition once. */
    long steps() {
        return steps.get();
    }

    /** {@code partition} split: its sweep, if under way, starts over (its cursor may lie in the half it gave away). */
    void restart(int partition) {
        restarts.set(partition, 1);
    }

    /** A delete of this engine took effect in {@code partition}. */
    void noteDelete(int partition) {
        deletes.incrementAndGet(partition * STRIDE);
    }

    /** See {@link DexEngine#sweep}; returns the partitions whose sweep ended in this call. */
    int sweep(long quietNanos) {
        if (!sweeping.compareAndSet(false, true)) {
            return 0;
        }
        try {
            int swept = 0;
            long callStart = System.nanoTime();
            for (int p = 0; p < cursors.length; p++) {
                if (restarts.get(p) != 0 && restarts.getAndSet(p, 0) != 0) {
                    cursors[p] = null;
                }
                if (!held.holds(p)) {
                    cursors[p] = null; // a new owner, or this one again later, starts over
                    continue;
                }
                long now = System.nanoTime();
                long d = deletes.get(p * STRIDE);
                if (d != deletesSeen[p]) {
                    deletesSeen[p] = d;
                    quietSince[p] = now;
                }
                boolean due = d - deletesAtSweep[p] >= Math.max(MIN_DELETES, DELETES_PER_LEAF * leavesAtSweep[p]);
                if (!due) {
                    dueSince[p] = 0;
                    continue;
                }
                if (dueSince[p] == 0) {
                    dueSince[p] = now;
                }
                boolean quiet = now - quietSince[p] >= quietNanos;
                boolean late = quietNanos > 0 && now - dueSince[p] >= LATEST_QUIET_TIMES * quietNanos;
                if (!quiet && !late && cursors[p] == null) {
                    continue;
                }
                Cursor cursor = cursors[p] == null ? new Cursor() : cursors[p];
                cursors[p] = cursor;
                boolean ended = false;
                while (!cursor.done && !ended) {
                    cursor.failed = false;
                    long stepStart = System.nanoTime();
                    Merges.Report step;
                    try {
                        step = merges.sweepStep(p, cursor, quietNanos > 0); // at once: the caller knows it idle
                    } catch (RuntimeException unexpected) {
                        LOG.error("a merge sweep over partition {} failed; it is not swept again before more deletes", p, unexpected);
                        cursors[p] = null;
                        deletesAtSweep[p] = d;
                        dueSince[p] = 0;
                        break;
                    }
                    if (step == null || !step.ran()) {
                        break; // another pass runs, or the partition would not pause: on from the cursor later
                    }
                    steps.incrementAndGet();
                    if (cursor.failed) {
                        merges.backOff(p); // a verb failed, or a node stayed unreadable: on from the cursor later
                        break;
                    }
                    if (quietNanos > 0 && !cursor.done) {
                        // Between two steps the partition's operations run: as long as the step took, at least 100 µs
                        // (those that waited wake from 20 µs parks), and this call ends after its time budget.
                        long took = System.nanoTime() - stepStart;
                        java.util.concurrent.locks.LockSupport.parkNanos(Math.max(took, GAP_NANOS));
                        ended = System.nanoTime() - callStart > CALL_BUDGET_NANOS;
                    }
                }
                if (cursor.done) {
                    cursors[p] = null;
                    deletesAtSweep[p] = d;
                    leavesAtSweep[p] = cursor.leaves;
                    dueSince[p] = 0;
                    swept++;
                    sweptTotal.incrementAndGet();
                }
                if (quietNanos > 0 && System.nanoTime() - callStart > CALL_BUDGET_NANOS) {
                    break; // the rest at the next call
                }
            }
            return swept;
        } finally {
            sweeping.set(false);
        }
    }
}
