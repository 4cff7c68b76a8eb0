package dev.dex.actors;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The load a compute node measures on each partition: the operations its workers ran for it since the node started,
 * and their rate over the last complete window ({@code dex.compute.load-window}, 10 s). {@code bin/dex status} prints it per node and partition,
 * and {@code /metrics} exports the counts as {@code dex_partition_operations_total} (docs/operations.md).
 *
 * <p>A partition's operations are counted where its batches run (the node's {@code EngineWorkers}), one add per batch, whatever
 * each operation's outcome. A partition that moves away keeps its count here (a counter never goes back); its rate
 * is that of the window's part it was held in, spread over the whole window.
 *
 * <pre>
 * Concurrency: workers add into an AtomicLongArray (lock-free, any thread). One thread at a time rolls the window
 * (the compute node's actor, on its health tick): the counts at the window's start are that thread's alone, and each
 * complete window (its length and rates) is published as a new object through a volatile field, never changed
 * afterwards. Readers (a status request, a metrics scrape) read that object, or the counters, from any thread. A rate is that of the
 * adds its window's roll saw; an add racing the roll counts in the next window.
 * </pre>
 */
public final class PartitionLoad {
    /** The window of {@code dex.compute.load-window}'s default (actors' reference.conf). */
    public static final Duration DEFAULT_WINDOW = Duration.ofSeconds(10);

    private final long windowNanos;
    private final AtomicLongArray operations;
    /** Counts at the open window's start, and when it opened (System.nanoTime): the rolling thread's alone. */
    private final long[] atStart;
    private long startNanos;
    /** The last complete window; null before the first one closed. */
    private volatile Window last;

    /** A closed window: how long it really lasted (it closes on the first roll after its length), and each rate in it. */
    private record Window(double seconds, double[] rates) {
    }

    /**
     * The last complete window's rates of some partitions, in the order asked for, and how long that window lasted;
     * {@link #NONE} before the first window closed.
     */
    public record Measured(List<Double> rates, double seconds) {
        public static final Measured NONE = new Measured(List.of(), 0);
    }

    /** A load of {@code partitions} partitions measured over windows of {@code window}, the first opening at {@code nowNanos}. */
    public PartitionLoad(int partitions, Duration window, long nowNanos) {
        if (partitions <= 0) {
            throw new IllegalArgumentException("partitions must be positive: " + partitions);
        }
        if (window.isNegative() || window.isZero()) {
            throw new IllegalArgumentException("dex.compute.load-window must be positive: " + window);
        }
        this.windowNanos = window.toNanos();
        this.operations = new AtomicLongArray(partitions);
        this.atStart = new long[partitions];
        this.samples = new java.util.concurrent.atomic.AtomicLongArray(partitions * SAMPLES);
        this.sampled = new java.util.concurrent.atomic.AtomicIntegerArray(partitions);
        this.startNanos = nowNanos;
    }

    /** How long a window lasts. */
    public Duration window() {
        return Duration.ofNanos(windowNanos);
    }

    /** The partitions this load counts. */
    public int partitions() {
        return operations.length();
    }

    /** The workers ran {@code count} operations of {@code partition} (for the node's workers, in actors.partition). */
    public void add(int partition, int count) {
        operations.addAndGet(partition, count);
    }

    /** Keys sampled per partition: one per batch, the last {@link #SAMPLES} kept (a split's boundary, SplitPolicy). */
    public static final int SAMPLES = 32;
    private final java.util.concurrent.atomic.AtomicLongArray samples;
    private final java.util.concurrent.atomic.AtomicIntegerArray sampled;

    /** A batch of {@code partition} led with a key whose first word is {@code key}: kept among its recent samples. */
    public void sample(int partition, long key) {
        int slot = sampled.getAndIncrement(partition) & (SAMPLES - 1);
        samples.set(partition * SAMPLES + slot, key);
    }

    /** Forgets {@code partition}'s samples (it split: its range narrowed). */
    public void clearSamples(int partition) {
        sampled.set(partition, 0);
    }

    /** The median of {@code partition}'s recent samples (first words), or {@code Long.MIN_VALUE} when none was taken. */
    public long medianSample(int partition) {
        int n = Math.min(SAMPLES, sampled.get(partition));
        if (n == 0) {
            return Long.MIN_VALUE;
        }
        long[] keys = new long[n];
        for (int i = 0; i < n; i++) {
            keys[i] = samples.get(partition * SAMPLES + i);
        }
        java.util.Arrays.sort(keys);
        return keys[n / 2];
    }

    private final java.util.concurrent.atomic.AtomicLong splits = new java.util.concurrent.atomic.AtomicLong();

    /** One of this node's partitions split (partition.SplitPolicy): counted on /metrics, {@code dex_partition_splits_total}. */
    public void split() {
        splits.incrementAndGet();
    }

    /** Partitions this node split since it started. */
    public long splits() {
        return splits.get();
    }

    private final java.util.concurrent.atomic.AtomicLong merges = new java.util.concurrent.atomic.AtomicLong();

    /** Two of this node's partitions merged (partition.SplitPolicy): {@code dex_partition_merges_total} on /metrics. */
    public void merged() {
        merges.incrementAndGet();
    }

    /** Merges of two partitions this node made since it started. */
    public long merges() {
        return merges.get();
    }

    /** Operations run for {@code partition} since the node started. */
    public long operations(int partition) {
        return operations.get(partition);
    }

    /**
     * Closes the open window and opens the next if it has lasted a window's length at {@code nowNanos}; answers whether
     * it did. Called by one thread at a time (the node's actor).
     */
    public boolean roll(long nowNanos) {
        long elapsed = nowNanos - startNanos;
        if (elapsed < windowNanos) {
            return false;
        }
        double[] closed = new double[atStart.length];
        for (int p = 0; p < atStart.length; p++) {
            long now = operations.get(p);
            closed[p] = (now - atStart[p]) * 1e9 / elapsed;
            atStart[p] = now;
        }
        startNanos = nowNanos;
        last = new Window(elapsed / 1e9, closed);
        return true;
    }

    /** The rates of the partitions {@code held} over the last complete window, one window read once. */
    public Measured last(List<Integer> held) {
        Window window = last;
        return window == null ? Measured.NONE : new Measured(held.stream().map(p -> window.rates()[p]).toList(), window.seconds());
    }

    /** {@code partition}'s operations per second over the last complete window; NaN before the first one closed. */
    public double rate(int partition) {
        Window window = last;
        return window == null ? Double.NaN : window.rates()[partition];
    }
}
