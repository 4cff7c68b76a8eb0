package dev.dex.bench;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;

import org.HdrHistogram.Histogram;

import me.tongfei.progressbar.ProgressBar;

/**
 * Runs the warm-up and measured phases of a run on {@code threads} worker threads (see {@link RunControl}
 * for the phases), resetting the engines' stats in between, and merges what the workers recorded.
 * Operations are split evenly over the threads; each thread's random source is split from the seed.
 */
final class BenchRunner {
    private static final long POLL_MILLIS = 200;

    private final BenchConfig config;
    private final KeySpace keySpace;
    private final EngineCluster engines;
    private final Progress progress;

    BenchRunner(BenchConfig config, KeySpace keySpace, EngineCluster engines, Progress progress) {
        this.config = config;
        this.keySpace = keySpace;
        this.engines = engines;
        this.progress = progress;
    }

    RunStats run() {
        KeyChooser chooser = KeyChooser.of(config.distribution(), config.keys(), config.theta());
        int n = config.threads();
        RunControl control = new RunControl(n);
        SplittableRandom seeds = new SplittableRandom(config.seed());
        Worker[] workers = new Worker[n];
        Thread[] threads = new Thread[n];
        for (int t = 0; t < n; t++) {
            workers[t] = new Worker(t, config.workload(), keySpace, chooser, engines, seeds.split(), control,
                    share(config.warmup(), t, n), share(config.ops(), t, n), config.commitBatch(), config.keyBytes());
            threads[t] = new Thread(workers[t], "bench-worker-" + t);
            threads[t].setDaemon(true);
            threads[t].start();
        }
        boolean ok = awaitPhase(control, null, null)
                && awaitPhase(control, config.warmup() > 0 ? "warm-up" : null, control.warmedUp);
        if (ok) {
            engines.resetStats();
            ok = awaitPhase(control, null, null) && awaitPhase(control, "run", control.measured);
        }
        if (!ok) {
            // Leave the phaser so the remaining workers pass every barrier and see the stop flag.
            control.phaser.arriveAndDeregister();
        }
        joinAll(threads);
        if (control.failure() != null) {
            throw new IllegalStateException("a benchmark thread failed: " + control.failure(), control.failure());
        }
        return merge(workers);
    }

    /** Operations of thread {@code t} out of {@code total} split over {@code n} threads. */
    static long share(long total, int t, int n) {
        return total / n + (t < total % n ? 1 : 0);
    }

    /** Arrives at the current phase and waits for it to end, updating a progress bar meanwhile. */
    private boolean awaitPhase(RunControl control, String task, LongAdder done) {
        long total = task == null ? 0 : task.equals("run") ? config.ops() : config.warmup();
        boolean interrupted = false;
        try (ProgressBar bar = task == null ? null : progress.start(task, total)) {
            int phase = control.phaser.arrive();
            while (true) {
                try {
                    control.phaser.awaitAdvanceInterruptibly(phase, POLL_MILLIS, TimeUnit.MILLISECONDS);
                    break;
                } catch (TimeoutException e) {
                    if (bar != null) {
                        bar.stepTo(done.sum());
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

    private static void joinAll(Thread[] threads) {
        boolean interrupted = false;
        for (Thread thread : threads) {
            while (true) {
                try {
                    thread.join();
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
        long start = Long.MAX_VALUE;
        long end = Long.MIN_VALUE;
        for (Worker worker : workers) {
            latency.add(worker.latency());
            for (int i = 0; i < outcomes.length; i++) {
                outcomes[i] += worker.outcomes()[i];
            }
            start = Math.min(start, worker.startNanos());
            end = Math.max(end, worker.endNanos());
        }
        return new RunStats(Math.max(1, end - start), latency, outcomes, engines.verbs(), engines.cacheHitRatio());
    }
}
