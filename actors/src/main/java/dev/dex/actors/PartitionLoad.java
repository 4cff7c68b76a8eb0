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
