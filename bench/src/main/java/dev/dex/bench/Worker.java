package dev.dex.bench;

import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

import org.HdrHistogram.Histogram;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.engine.PartitionNotHeldException;

/**
 * One benchmark thread: draws operations and keys, sends them through its own {@link Router}, and records
 * the latency and outcome of each measured operation in its own histogram and counters (merged by
 * {@link BenchRunner} after the run, so no operation touches shared state).
 *
 * <p>With a commit batch above 1, operations are gathered per partition and run {@code commitBatch} at a time
 * inside one batch of their partition's session ({@link IndexSession#beginBatch}, {@link IndexSession#commit}),
 * the way a loaded cluster runs a partition's batches; each operation's latency is then its batch's.
 *
 * <p>With injected faults (a {@link KeyModel}), an operation that throws is the outcome {@link Outcome#FAILED} and
 * the thread goes on, after {@link PartitionRecovery taking its partition up again} if the failure left it
 * unusable. Each write holds its key's stripe of the model until the model has recorded its result.
 */
final class Worker implements Runnable {
    static final long MAX_LATENCY_NANOS = TimeUnit.MINUTES.toNanos(1);
    private static final int BATCH = 1024;
    private static final Op[] OPS = Op.values();

    private final int id;
    private final Workload workload;
    private final KeySpace keySpace;
    private final KeyChooser chooser;
    private final EngineCluster engines;
    private final SplittableRandom random;
    private final RunControl control;
    private final long warmupOps;
    private final long measuredOps;
    private final int commitBatch;
    /** What the engine acknowledged, with injected faults; null without. */
    private final KeyModel model;
    /** The keys delete-heavy deletes, in order; null for the other workloads. */
    private final DeleteOrder deletes;
    /** Per partition, the operations (op ordinal, key) gathered for its next batch; null when each commits alone. */
    private int[][] gatheredOps;
    private long[][] gatheredKeys;
    private int[] gathered;
    private final long[] scanKeys;
    /** The keys at the index's width: key n's words. */
    private final BenchKeys keys;
    private final long[] scanValues = new long[Workload.SCAN_LENGTH];
    private final Histogram latency = new Histogram(MAX_LATENCY_NANOS, 3);
    private final long[] outcomes = new long[Outcome.values().length];
    /** Failed operations (measured or not) by the simple name of what they threw. */
    private final TreeMap<String, Long> failures = new TreeMap<>();
    private long updates;
    private long startNanos;
    private long endNanos;

    Worker(int id, Workload workload, KeySpace keySpace, KeyChooser chooser, EngineCluster engines,
           SplittableRandom random, RunControl control, long warmupOps, long measuredOps, int commitBatch, int keyBytes,
           KeyModel model, DeleteOrder deletes) {
        this.keys = new BenchKeys(keyBytes);
        this.scanKeys = new long[Workload.SCAN_LENGTH * keys.words()];
        this.id = id;
        this.workload = workload;
        this.keySpace = keySpace;
        this.chooser = chooser;
        this.engines = engines;
        this.random = random;
        this.control = control;
        this.warmupOps = warmupOps;
        this.measuredOps = measuredOps;
        this.commitBatch = commitBatch;
        this.model = model;
        this.deletes = deletes;
    }

    @Override
    public void run() {
        try (Router router = engines.newRouter(id)) {
            if (commitBatch > 1) {
                gatheredOps = new int[router.partitions()][commitBatch];
                gatheredKeys = new long[router.partitions()][commitBatch];
                gathered = new int[router.partitions()];
            }
            control.phaser.arriveAndAwaitAdvance();
            runOps(router, warmupOps, false, control.warmedUp);
            control.phaser.arriveAndAwaitAdvance();
            control.phaser.arriveAndAwaitAdvance();
            startNanos = System.nanoTime();
            runOps(router, measuredOps, true, control.measured);
            endNanos = System.nanoTime();
        } catch (Throwable t) {
            control.fail(t);
        } finally {
            control.phaser.arriveAndDeregister();
        }
    }

    private void runOps(Router router, long count, boolean measure, LongAdder progress) {
        if (control.stopped()) {
            return;
        }
        long reported = 0;
        for (long i = 0; i < count; i++) {
            if (i - reported == BATCH) {
                progress.add(BATCH);
                reported = i;
                if (control.stopped()) {
                    return;
                }
            } else if (model != null && control.stopped()) {
                // With faults an operation may come back after a stall ended the run: leave at once, not a batch later.
                return;
            }
            Op op = workload.op(random.nextInt(100));
            long index = op == Op.DELETE ? deletes.index(measure, i, id) : chooser.nextIndex(random);
            long key = op == Op.INSERT ? keySpace.insertKey(index, random) : keySpace.loadedKey(index);
            if (commitBatch > 1) {
                gather(router, op, key, measure);
                continue;
            }
            long start = System.nanoTime();
            Outcome outcome = model == null ? execute(router.sessionFor(key), op, key, valueFor(op, key))
                    : executeGuarded(router, op, key);
            long nanos = System.nanoTime() - start;
            if (measure) {
                latency.recordValue(Math.min(nanos, MAX_LATENCY_NANOS));
                outcomes[outcome.ordinal()]++;
            }
        }
        if (commitBatch > 1) {
            for (int p = 0; p < gathered.length; p++) {
                runBatch(router, p, measure);
            }
        }
        progress.add(count - reported);
    }

    /** Adds an operation to its partition's next batch, and runs the batch once it holds {@code commitBatch}. */
    private void gather(Router router, Op op, long key, boolean measure) {
        int p = router.partitionOf(key);
        gatheredOps[p][gathered[p]] = op.ordinal();
        gatheredKeys[p][gathered[p]] = key;
        if (++gathered[p] == commitBatch) {
            runBatch(router, p, measure);
        }
    }

    /** Runs partition {@code p}'s gathered operations as one batch with one commit. */
    private void runBatch(Router router, int p, boolean measure) {
        int n = gathered[p];
        if (n == 0) {
            return;
        }
        gathered[p] = 0;
        IndexSession session = router.sessionFor(gatheredKeys[p][0]);
        long start = System.nanoTime();
        session.beginBatch();
        for (int i = 0; i < n; i++) {
            Op op = OPS[gatheredOps[p][i]];
            Outcome outcome = execute(session, op, gatheredKeys[p][i], valueFor(op, gatheredKeys[p][i]));
            if (measure) {
                outcomes[outcome.ordinal()]++;
            }
        }
        session.commit();
        long nanos = System.nanoTime() - start;
        if (measure) {
            latency.recordValueWithCount(Math.min(nanos, MAX_LATENCY_NANOS), n);
        }
    }

    /** The value a write of {@code key} sends: an update's differs from every earlier one of this thread. */
    private long valueFor(Op op, long key) {
        return switch (op) {
            case UPDATE -> key + 1 + ++updates;
            case INSERT -> key + 1;
            case LOOKUP, SCAN, DELETE -> 0;
        };
    }

    private Outcome execute(IndexSession session, Op op, long key, long value) {
        if (keys.words() > 1) {
            return executeWide(session, op, keys.of(key), value);
        }
        return switch (op) {
            case LOOKUP -> session.lookup(key) ? Outcome.FOUND : Outcome.NOT_FOUND;
            case UPDATE -> session.update(key, value) ? Outcome.FOUND : Outcome.NOT_FOUND;
            case INSERT -> session.insert(key, value) ? Outcome.INSERTED : Outcome.ALREADY_PRESENT;
            case SCAN -> session.scan(key, Workload.SCAN_LENGTH, scanKeys, scanValues) > 0 ? Outcome.FOUND : Outcome.NOT_FOUND;
            case DELETE -> session.delete(key) ? Outcome.FOUND : Outcome.NOT_FOUND;
        };
    }

    /** {@link #execute} of a key wider than 8 bytes: its words {@code words}. */
    private Outcome executeWide(IndexSession session, Op op, long[] words, long value) {
        return switch (op) {
            case LOOKUP -> session.lookup(words) ? Outcome.FOUND : Outcome.NOT_FOUND;
            case UPDATE -> session.update(words, value) ? Outcome.FOUND : Outcome.NOT_FOUND;
            case INSERT -> session.insert(words, value) ? Outcome.INSERTED : Outcome.ALREADY_PRESENT;
            case SCAN -> session.scan(words, Workload.SCAN_LENGTH, scanKeys, scanValues) > 0 ? Outcome.FOUND : Outcome.NOT_FOUND;
            case DELETE -> session.delete(words) ? Outcome.FOUND : Outcome.NOT_FOUND;
        };
    }

    /**
     * {@link #execute} with injected faults: a write and the model's record of it under the key's stripe; anything
     * the engine throws is a failed operation, after which the key's partition is taken up again if it needs it.
     */
    private Outcome executeGuarded(Router router, Op op, long key) {
        long value = valueFor(op, key);
        RuntimeException failure = null;
        Outcome outcome = Outcome.FAILED;
        if (op == Op.UPDATE || op == Op.INSERT) {
            synchronized (model.stripe(key)) {
                try {
                    outcome = execute(router.sessionFor(key), op, key, value);
                    model.acknowledged(op, key, outcome, value);
                } catch (PartitionNotHeldException refused) {
                    failure = refused; // refused before it started: the key is as it was
                } catch (RuntimeException e) {
                    failure = e;
                    model.failed(key, value);
                }
            }
        } else {
            try {
                outcome = execute(router.sessionFor(key), op, key, value);
            } catch (RuntimeException e) {
                failure = e;
            }
        }
        if (failure != null) {
            failures.merge(failure.getClass().getSimpleName(), 1L, Long::sum);
            PartitionRecovery recovery = engines.recovery();
            if (recovery != null) {
                recovery.recoverIfNeeded(router.partitionOf(key));
            }
        }
        return outcome;
    }

    /** Latencies of the measured operations; read after the thread ended. */
    Histogram latency() {
        return latency;
    }

    long[] outcomes() {
        return outcomes;
    }

    /** Failed operations by what they threw; read after the thread ended. */
    TreeMap<String, Long> failures() {
        return failures;
    }

    long startNanos() {
        return startNanos;
    }

    long endNanos() {
        return endNanos;
    }
}
