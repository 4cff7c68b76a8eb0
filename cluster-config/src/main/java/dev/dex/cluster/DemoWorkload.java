package dev.dex.cluster;

import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

import dev.dex.actors.client.DexClientApi;
import dev.dex.core.tree.SortedEntries;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;

/**
 * The demo's data and the load it puts on the cluster through the client actor: the keys it bulk-loads, the mix of
 * gets and puts (whose acknowledged writes it remembers, key by key) and the final check that every key holds its
 * last written value. Progress bars go to stderr, so stdout keeps only the report.
 */
final class DemoWorkload {
    /** Loaded keys are spaced so inserts could fall between them. */
    static final long KEY_SPACING = 16;
    /** The resolution of the scale-out's timeline (--timeline): operations completed per 100 ms. */
    static final long TICK_NANOS = 100_000_000L;

    private DemoWorkload() {
    }

    /**
     * What one mix did: operations completed (gets and puts of them), how long it ran, their latencies (ns), and the bytes
     * this JVM allocated meanwhile (-1: not measured).
     */
    record Result(long ops, long gets, long puts, long nanos, Histogram latency, long allocated, long scans) {
    }

    /** Entries a scan of the mix asks for (the paper's and YCSB E's scan length). */
    static final int SCAN_LENGTH = 100;

    /** The bulk load's entries, ascending: key {@code i * KEY_SPACING} with value {@code key + 1}, for i in [1, n]. */
    static SortedEntries entries(long n) {
        return new SortedEntries() {
            private long i;

            @Override
            public boolean next() {
                return ++i <= n;
            }

            @Override
            public long key() {
                return i * KEY_SPACING;
            }

            @Override
            public long value() {
                return i * KEY_SPACING + 1;
            }
        };
    }

    /**
     * The mix: uniform keys over the loaded ones; a key has at most one write in flight, so its last value is known.
     * Closed loop ({@code rate} 0): a new operation as soon as one of the {@code inFlight} slots is free. Open loop:
     * operation i is scheduled at {@code i / rate} s and its latency counts from then, so time spent waiting for a
     * slot (the system falling behind) is counted too.
     */
    static Result mix(DexClientApi client, long n, int putPercent, int seconds, int inFlight, long rate, Map<Long, Long> written)
            throws InterruptedException {
        return mix(client, n, putPercent, 0, seconds, inFlight, rate, written, null, null, null, null, "mix (s)");
    }

    /** As above, with {@code scanPercent} of the operations scans of {@link #SCAN_LENGTH} entries from a loaded key. */
    static Result mix(DexClientApi client, long n, int putPercent, int scanPercent, int seconds, int inFlight, long rate,
                      Map<Long, Long> written) throws InterruptedException {
        return mix(client, n, putPercent, scanPercent, seconds, inFlight, rate, written, null, null, null, null, "mix (s)");
    }

    /**
     * The mix, ended early when {@code stop} is set (if given), counting completed operations per second of its
     * run in {@code perSecond} (if given) and, along with it, per {@link #TICK_NANOS} in {@code perTick} (if given); with
     * {@code perSecond}, the longest operation (ns) sent in each second goes to {@code longest} (if given).
     */
    static Result mix(DexClientApi client, long n, int putPercent, int scanPercent, int seconds, int inFlight, long rate,
            Map<Long, Long> written, java.util.concurrent.atomic.AtomicBoolean stop, java.util.concurrent.atomic.AtomicLongArray perSecond,
            java.util.concurrent.atomic.AtomicLongArray longest, java.util.concurrent.atomic.AtomicLongArray perTick, String task)
            throws InterruptedException {
        return mix(client, uniform(n), n, putPercent, scanPercent, seconds, inFlight, rate, written, stop, perSecond, longest, perTick,
                task);
    }

    /** Loaded keys' indexes in [0, n), uniform. */
    static java.util.function.ToLongFunction<SplittableRandom> uniform(long n) {
        return random -> random.nextLong(n);
    }

    /**
     * Loaded keys' indexes in [0, n), Zipf-distributed with skew {@code theta} (0.99: YCSB's): index 0, the smallest key,
     * is the hottest, so the hot keys lie together in the first partitions, as a range-partitioned index's would.
     */
    static java.util.function.ToLongFunction<SplittableRandom> zipf(long n, double theta) {
        dev.dex.bench.ZipfGenerator zipf = new dev.dex.bench.ZipfGenerator(n, theta);
        return random -> zipf.rank(random.nextDouble());
    }

    /** The mix over the loaded keys {@code keyIndex} picks. */
    static Result mix(DexClientApi client, java.util.function.ToLongFunction<SplittableRandom> keyIndex, long n, int putPercent,
                      int scanPercent, int seconds, int inFlight, long rate, Map<Long, Long> written,
                      java.util.concurrent.atomic.AtomicBoolean stop, java.util.concurrent.atomic.AtomicLongArray perSecond,
                      java.util.concurrent.atomic.AtomicLongArray longest, java.util.concurrent.atomic.AtomicLongArray perTick, String task)
            throws InterruptedException {
        Semaphore slots = new Semaphore(inFlight);
        Set<Long> writing = ConcurrentHashMap.newKeySet();
        Recorder recorder = new Recorder(3);
        AtomicLong gets = new AtomicLong();
        AtomicLong puts = new AtomicLong();
        AtomicLong scans = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        SplittableRandom random = new SplittableRandom(42);
        long allocatedBefore = dev.dex.actors.node.JvmAllocation.allocatedBytes();
        long start = System.nanoTime();
        long end = start + TimeUnit.SECONDS.toNanos(seconds);
        long ops = 0;
        try (ProgressBar bar = bar(task, seconds)) {
            while (System.nanoTime() < end && (stop == null || !stop.get())) {
                long scheduled = rate > 0 ? start + (long) (ops * (1e9 / rate)) : 0;
                if (rate > 0) {
                    for (long wait; (wait = scheduled - System.nanoTime()) > 0; ) {
                        java.util.concurrent.locks.LockSupport.parkNanos(Math.min(wait, 200_000));
                    }
                }
                slots.acquire();
                long key = (1 + keyIndex.applyAsLong(random)) * KEY_SPACING;
                long t0 = rate > 0 ? scheduled : System.nanoTime();
                int roll = random.nextInt(100);
                if (roll < scanPercent) {
                    long from = key;
                    client.scan(key, SCAN_LENGTH).whenComplete((entries, failure) -> {
                        // Loaded keys are never deleted: a scan from one holds it first, and a full count unless it ran
                        // past the last key.
                        boolean ok = failure == null && !entries.isEmpty() && entries.get(0).key() == from
                                && (entries.size() == SCAN_LENGTH || from > (n - SCAN_LENGTH) * KEY_SPACING);
                        (ok ? scans : failures).incrementAndGet();
                        if (!ok && failures.get() <= 3) {
                            System.err.println("scan from " + from + ": " + (failure != null ? failure : entries.size() + " entries"));
                        }
                        done(recorder, t0, start, perSecond, longest, perSecond == null ? null : perTick);
                        slots.release();
                    });
                } else if (roll < scanPercent + putPercent && writing.add(key)) {
                    long value = random.nextLong();
                    client.put(key, value).whenComplete((replaced, failure) -> {
                        if (failure == null) {
                            written.put(key, value);
                            puts.incrementAndGet();
                        } else {
                            failures.incrementAndGet();
                        }
                        writing.remove(key);
                        done(recorder, t0, start, perSecond, longest, perSecond == null ? null : perTick);
                        slots.release();
                    });
                } else {
                    client.get(key).whenComplete((value, failure) -> {
                        if (failure == null) {
                            gets.incrementAndGet();
                        } else {
                            failures.incrementAndGet();
                        }
                        done(recorder, t0, start, perSecond, longest, perSecond == null ? null : perTick);
                        slots.release();
                    });
                }
                if ((++ops & 1023) == 0) {
                    bar.stepTo(Math.min(seconds, (System.nanoTime() - start) / 1_000_000_000L));
                }
            }
            slots.acquire(inFlight);
            slots.release(inFlight);
            bar.stepTo(seconds);
        }
        if (failures.get() > 0) {
            throw new IllegalStateException(failures.get() + " operations of the mix failed");
        }
        long allocatedAfter = dev.dex.actors.node.JvmAllocation.allocatedBytes();
        return new Result(ops, gets.get(), puts.get(), System.nanoTime() - start, recorder.getIntervalHistogram(),
                allocatedBefore < 0 || allocatedAfter < 0 ? -1 : allocatedAfter - allocatedBefore, scans.get());
    }

    private static void done(Recorder recorder, long t0, long start, java.util.concurrent.atomic.AtomicLongArray perSecond,
                             java.util.concurrent.atomic.AtomicLongArray longest, java.util.concurrent.atomic.AtomicLongArray perTick) {
        long now = System.nanoTime();
        recorder.recordValue(now - t0);
        if (perSecond != null) {
            int second = (int) ((now - start) / 1_000_000_000L);
            if (second < perSecond.length()) {
                perSecond.incrementAndGet(second);
            }
            int sent = (int) (Math.max(0, t0 - start) / 1_000_000_000L);
            if (longest != null && sent < longest.length()) {
                longest.accumulateAndGet(sent, now - t0, Math::max);
            }
        }
        if (perTick != null) {
            int tick = (int) ((now - start) / TICK_NANOS);
            if (tick < perTick.length()) {
                perTick.incrementAndGet(tick);
            }
        }
    }

    /**
     * Reads every loaded key through the client and counts those that do not hold their last acknowledged write
     * ({@code written}, or the loaded value where the mix never wrote); the first five are printed on stderr.
     */
    static long verify(DexClientApi client, long n, int inFlight, Map<Long, Long> written) throws InterruptedException {
        return verify(client, n, inFlight, written, Map.of());
    }

    /**
     * As {@link #verify(DexClientApi, long, int, Map)}, where a key of {@code unknown} may also hold the value of a put
     * whose outcome is unknown (it failed, as during a failover, after {@code written}'s).
     */
    static long verify(DexClientApi client, long n, int inFlight, Map<Long, Long> written, Map<Long, Long> unknown)
            throws InterruptedException {
        Semaphore slots = new Semaphore(inFlight);
        AtomicLong mismatches = new AtomicLong();
        try (ProgressBar bar = bar("verify", n)) {
            for (long i = 1; i <= n; i++) {
                long key = i * KEY_SPACING;
                long expected = written.getOrDefault(key, key + 1);
                Long maybe = unknown.get(key);
                slots.acquire();
                client.get(key).whenComplete((OptionalLong value, Throwable failure) -> {
                    boolean ok = failure == null && value.isPresent()
                            && (value.getAsLong() == expected || maybe != null && value.getAsLong() == maybe);
                    if (!ok && mismatches.incrementAndGet() <= 5) {
                        System.err.println("key " + key + ": expected " + expected + (maybe != null ? " or " + maybe : "") + ", got "
                                + (failure != null ? failure : value));
                    }
                    slots.release();
                });
                if ((i & 1023) == 0) {
                    bar.stepTo(i);
                }
            }
            slots.acquire(inFlight);
            bar.stepTo(n);
        }
        return mismatches.get();
    }

    /** A progress bar on stderr (stdout is the report's). */
    static ProgressBar bar(String task, long total) {
        return new ProgressBarBuilder().setTaskName(task).setInitialMax(total).setStyle(ProgressBarStyle.ASCII)
                .setConsumer(new me.tongfei.progressbar.ConsoleProgressBarConsumer(System.err)).build();
    }
}
