package dev.dex.bench;

import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import org.HdrHistogram.Histogram;

import dev.dex.core.cache.DexEngine;
import dev.dex.core.engine.IndexEngine;
import me.tongfei.progressbar.ProgressBar;

/**
 * Runs the warm-up and measured phases of a run on {@code threads} worker threads (see {@link RunControl}
 * for the phases), resetting the engines' stats in between, and merges what the workers recorded.
 * Operations are split evenly over the threads; each thread's random source is split from the seed.
 *
 * <p>With injected faults the injectors are switched on just before the workers start and off once they ended, and
 * the workers record their writes in a {@link KeyModel} ({@link #model()}). Since a failure may leave an engine
 * stuck, such a run also fails when no operation finished for {@link #STALL_NANOS}; the stuck threads are then left
 * behind (they are daemons) and the engines left open.
 */
final class BenchRunner {
    private static final long POLL_MILLIS = 200;
    static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(60);
    /** How long a run that stalled waits for its workers to leave before it gives up on them. */
    private static final long STALLED_JOIN_MILLIS = 2_000;

    private final BenchSettings config;
    private final KeySpace keySpace;
    private final EngineCluster engines;
    private final Progress progress;
    private final KeyModel model;
    private volatile boolean stalled;
    /** The copy under load ({@code --copy-under-load}): its thread once started, and what it measured. */
    private Thread copyThread;
    private volatile boolean copyStop;
    private volatile CopyReport copyReport;

    /**
     * What {@code --copy-under-load} measured: the backups' copy started a third of the way into the measured run.
     *
     * @param bytes      bytes copied (each region to each of its backups)
     * @param copyNanos  from the start of the copy to every backup complete (or to the end of the run)
     * @param before     operations per second of the measured run before the copy (one replica)
     * @param during     operations per second while the copy ran
     * @param after      operations per second from the copy's end to the end of the run (every replica complete, so
     *                   every change also waits for the backups' acknowledgements); NaN when the copy did not complete
     * @param completed  false when the run ended first (then {@code during} ends with the run)
     */
    record CopyReport(long bytes, long copyNanos, double before, double during, double after, boolean completed) {
        double megabytesPerSecond() {
            return bytes / 1e6 / (copyNanos / 1e9);
        }
    }

    BenchRunner(BenchSettings config, KeySpace keySpace, EngineCluster engines, Progress progress) {
        this.config = config;
        this.keySpace = keySpace;
        this.engines = engines;
        this.progress = progress;
        this.model = config.faults() == null ? null : new KeyModel(keySpace);
    }

    /** What the copy under load measured; null when there was none. */
    CopyReport copyReport() {
        return copyReport;
    }

    /** What the engines acknowledged, for the end-of-run checks; null without injected faults. */
    KeyModel model() {
        return model;
    }

    RunStats run() {
        KeyChooser chooser = KeyChooser.of(config.distribution(), config.keys(), config.theta());
        int n = config.threads();
        RunControl control = new RunControl(n);
        SplittableRandom seeds = new SplittableRandom(config.seed());
        Worker[] workers = new Worker[n];
        DeleteOrder deletes = config.workload() == Workload.DELETE_HEAVY
                ? new DeleteOrder(config.keys(), config.warmup(), n, config.seed()) : null;
        Thread[] threads = new Thread[n];
        for (int t = 0; t < n; t++) {
            workers[t] = new Worker(t, config.workload(), keySpace, chooser, engines, seeds.split(), control,
                    share(config.warmup(), t, n), share(config.ops(), t, n), config.commitBatch(), config.keyBytes(), model, deletes);
            threads[t] = new Thread(workers[t], "bench-worker-" + t);
            threads[t].setDaemon(true);
        }
        engines.injectFaults(true);
        for (Thread thread : threads) {
            thread.start();
        }
        boolean ok = awaitPhase(control, null, null)
                && awaitPhase(control, config.warmup() > 0 ? "warm-up" : null, control.warmedUp);
        if (ok) {
            engines.resetStats();
            ok = awaitPhase(control, null, null) && awaitPhase(control, "run", control.measured);
        }
        endCopy();
        if (!ok && !stalled) {
            // Leave the phaser so the remaining workers pass every barrier and see the stop flag.
            control.phaser.arriveAndDeregister();
        }
        if (stalled) {
            engines.leaveOpen();
            joinAll(threads, STALLED_JOIN_MILLIS);
            for (Thread thread : threads) {
                if (thread.isAlive()) {
                    // Where each stuck worker is, for whoever looks into the engine's failure path.
                    IllegalStateException where = new IllegalStateException(thread.getName() + " is stuck here");
                    where.setStackTrace(thread.getStackTrace());
                    control.failure().addSuppressed(where);
                }
            }
        } else {
            joinAll(threads, 0);
        }
        engines.injectFaults(false);
        if (control.failure() != null) {
            throw new IllegalStateException("a benchmark thread failed: " + control.failure(), control.failure());
        }
        return merge(workers);
    }

    /** What the DEX engines' frame locks say while workers are stuck: a frame left locked stalls every later visitor. */
    private String lockedFrames() {
        int locked = EndChecks.lockedFrames(engines);
        return locked >= 0 ? " (" + locked + " frames locked)" : "";
    }

    /**
     * Starts the backups' copy on a thread of its own, which records the measured operations and the time at its start
     * and at its end ({@link #copyReport}).
     */
    private void startCopy(ReplicaCopy copy, LongAdder done, long phaseStart, long doneAtStart) {
        copyThread = new Thread(() -> {
            long started = System.nanoTime();
            long opsAtStart = done.sum();
            double before = doneAtStart / ((started - phaseStart) / 1e9);
            copy.start();
            boolean complete;
            while (!(complete = copy.complete()) && !copyStop) {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            long ended = System.nanoTime();
            long opsAtEnd = done.sum();
            copyReport = new CopyReport(copy.bytes(), ended - started, before, (opsAtEnd - opsAtStart) / ((ended - started) / 1e9),
                    Double.NaN, complete);
            if (complete) {
                // The rest of the run, with every backup complete: what the copy is measured against besides the run before it.
                while (!copyStop) {
                    LockSupport.parkNanos(1_000_000);
                }
                long now = System.nanoTime();
                CopyReport report = copyReport;
                copyReport = new CopyReport(report.bytes(), report.copyNanos(), report.before(), report.during(),
                        (done.sum() - opsAtEnd) / ((now - ended) / 1e9), true);
            }
        }, "bench-copy");
        copyThread.setDaemon(true);
        copyThread.start();
    }

    /** Waits for the copy thread; a copy still running when the run ended is reported as not complete. */
    private void endCopy() {
        if (copyThread == null) {
            return;
        }
        copyStop = true;
        try {
            copyThread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Operations of thread {@code t} out of {@code total} split over {@code n} threads. */
    static long share(long total, int t, int n) {
        return total / n + (t < total % n ? 1 : 0);
    }

    /** Arrives at the current phase and waits for it to end, updating a progress bar meanwhile. */
    private boolean awaitPhase(RunControl control, String task, LongAdder done) {
        long total = task == null ? 0 : task.equals("run") ? config.ops() : config.warmup();
        boolean interrupted = false;
        long lastDone = -1;
        long lastChange = System.nanoTime();
        long phaseStart = System.nanoTime();
        try (ProgressBar bar = task == null ? null : progress.start(task, total)) {
            int phase = control.phaser.arrive();
            while (true) {
                try {
                    control.phaser.awaitAdvanceInterruptibly(phase, POLL_MILLIS, TimeUnit.MILLISECONDS);
                    break;
                } catch (TimeoutException e) {
                    if (bar != null) {
                        long now = done.sum();
                        if (task.equals("run") && engines.copyUnderLoad() != null && copyThread == null && now >= total / 3) {
                            startCopy(engines.copyUnderLoad(), done, phaseStart, now);
                        }
                        bar.stepTo(now);
                        if (now != lastDone) {
                            lastDone = now;
                            lastChange = System.nanoTime();
                        } else if (model != null && System.nanoTime() - lastChange > STALL_NANOS) {
                            stalled = true;
                            control.fail(new IllegalStateException("no operation finished for "
                                    + TimeUnit.NANOSECONDS.toSeconds(STALL_NANOS) + " s of the " + task
                                    + ": a worker is stuck in the engine after a failure" + lockedFrames()));
                            break;
                        }
                    }
                } catch (InterruptedException e) {
                    // Stop the workers, but wait for the phase to end: the main thread has arrived in it.
                    interrupted = true;
                    control.fail(e);
                }
            }
            if (bar != null) {
                bar.stepTo(done.sum());
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        return control.failure() == null;
    }

    /** Joins every thread, each for at most {@code millis} (0: for as long as it takes). */
    private static void joinAll(Thread[] threads, long millis) {
        boolean interrupted = false;
        for (Thread thread : threads) {
            while (true) {
                try {
                    thread.join(millis);
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private RunStats merge(Worker[] workers) {
        Histogram latency = new Histogram(Worker.MAX_LATENCY_NANOS, 3);
        long[] outcomes = new long[Outcome.values().length];
        TreeMap<String, Long> failures = new TreeMap<>();
        long start = Long.MAX_VALUE;
        long end = Long.MIN_VALUE;
        for (Worker worker : workers) {
            latency.add(worker.latency());
            for (int i = 0; i < outcomes.length; i++) {
                outcomes[i] += worker.outcomes()[i];
            }
            worker.failures().forEach((name, count) -> failures.merge(name, count, Long::sum));
            start = Math.min(start, worker.startNanos());
            end = Math.max(end, worker.endNanos());
        }
        return new RunStats(Math.max(1, end - start), latency, outcomes, engines.verbs(), engines.cacheHitRatio(),
                engines.leafAdmission(), failures);
    }
}
