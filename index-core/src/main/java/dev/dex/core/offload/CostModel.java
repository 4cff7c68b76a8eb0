package dev.dex.core.offload;

import java.util.SplittableRandom;

/**
 * Decides, at a cache miss on an owned node at level L (at most M), whether to offload the rest of the
 * operation (paper §6.1): offload iff {@code l_p < (L + 1) * (l_o + l_s) * c}, where {@code l_o} is the
 * moving average of a remote read, {@code l_p} that of an offload, {@code l_s} a local node search and
 * {@code c} the cost of using the cache (free frames, admission).
 *
 * <p>Averages are over windows of {@link OffloadSettings#window()} samples. Bootstrapping: the first
 * {@code window} decisions take the caching path and the next {@code window} offload, so both averages
 * start from real samples. After that, latencies are sampled with probability
 * {@link OffloadSettings#sampleRate()}, and each decision is flipped with probability
 * {@link OffloadSettings#exploreRate()} so both averages keep up with the load, within a budget
 * ({@link OffloadSettings#exploreBudget()}, docs/offloading.md): a flip takes the choice the model found slower, and
 * what it cost beyond the other choice (its own measured latency against the other's average) is paid off before
 * the next: after it, the thread flips no other decision for that cost divided by the budget, and never longer than
 * {@link #MAX_FLIP_WAIT_NANOS}. A flip is always timed, since learning is what it is for; so after the memory side
 * recovers from a stall the first flip that finds it fast costs nothing and the next ones follow at once, until
 * the stall's samples have left the window.
 *
 * <p>Not thread-safe: one per compute thread (session), as in the paper.
 */
public final class CostModel {
    /** The longest a thread waits between two flips, whatever the last one cost: a stall is noticed to be over by then. */
    public static final long MAX_FLIP_WAIT_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(30);

    private final OffloadSettings settings;
    private final java.util.function.LongSupplier clock;
    private final Window reads;
    private final Window offloads;
    private long decisions;
    /** clock time of the last flipped decision, once there was one. */
    private long lastFlip;
    private boolean flipped;
    /** What the last flip cost beyond the other choice, in ns (its measured latency once recorded). */
    private double flipCost;
    /** A flip whose latency is not recorded yet (it is timed), whether it offloaded, and at which level. */
    private boolean explored;
    private boolean exploredOffload;
    private int exploredLevel;

    public CostModel(OffloadSettings settings) {
        this(settings, System::nanoTime);
    }

    /** A model that reads the time from {@code clock} (tests). */
    CostModel(OffloadSettings settings, java.util.function.LongSupplier clock) {
        this.settings = settings;
        this.clock = clock;
        this.reads = new Window(settings.window());
        this.offloads = new Window(settings.window());
    }

    /** Whether a miss at {@code level} should be offloaded. */
    public boolean shouldOffload(int level, SplittableRandom random) {
        int window = settings.window();
        if (decisions < 2L * window) {
            return decisions++ >= window;
        }
        decisions++;
        boolean offload;
        if (reads.count == 0 || offloads.count == 0) {
            offload = offloads.count == 0;
        } else {
            offload = offloads.average() < cachePath(level);
        }
        explored = false;
        if (random.nextDouble() < settings.exploreRate() && withinBudget()) {
            offload = !offload;
            explored = true;
            exploredOffload = offload;
            exploredLevel = level;
            // Until its latency is recorded, the flip is charged the gap between the two averages.
            flipCost = reads.count == 0 || offloads.count == 0 ? 0 : Math.abs(offloads.average() - cachePath(level));
        }
        return offload;
    }

    /** The caching path's estimated cost at {@code level}: {@code (L + 1) * (l_o + l_s) * c}. */
    private double cachePath(int level) {
        return (level + 1) * (reads.average() + settings.localSearchNanos()) * settings.cacheCoefficient();
    }

    /** Whether a flip now keeps the flips within their budget (see the class comment); records it when it does. */
    private boolean withinBudget() {
        double budget = settings.exploreBudget();
        if (budget == 0) {
            return true;
        }
        long now = clock.getAsLong();
        if (flipped && now - lastFlip < Math.min(flipCost / budget, MAX_FLIP_WAIT_NANOS)) {
            return false;
        }
        flipped = true;
        lastFlip = now;
        return true;
    }

    /** Whether to time the current remote read or offload (always while bootstrapping, and after a flipped decision). */
    public boolean sample(SplittableRandom random) {
        return decisions < 2L * settings.window() || explored || random.nextDouble() < settings.sampleRate();
    }

    public void recordRead(long nanos) {
        reads.add(nanos);
        if (explored && !exploredOffload) {
            explored = false; // a flip to the caching path: its gap against the offload average stands as its cost
        }
    }

    public void recordOffload(long nanos) {
        offloads.add(nanos);
        flipOffloaded(nanos);
    }

    /** A flipped offload's latency: its cost beyond the caching path. */
    private void flipOffloaded(long nanos) {
        if (explored && exploredOffload) {
            explored = false;
            flipCost = reads.count == 0 ? 0 : Math.max(0, nanos - cachePath(exploredLevel));
        }
    }

    /**
     * An offload attempt that did not complete the operation (it fell back): it counts as an offload that
     * cost what the attempt took plus the caching path the operation then takes at {@code level}, so
     * failures, and above all timeouts, steer decisions away from offloading.
     */
    public void recordFailedOffload(long nanos, int level) {
        double cachePath = reads.count == 0 ? 0 : (level + 1) * (reads.average() + settings.localSearchNanos());
        offloads.add(nanos + (long) cachePath);
        flipOffloaded(nanos + (long) cachePath);
    }

    /** Moving average of a remote read, or NaN before the first sample. */
    public double readNanos() {
        return reads.count == 0 ? Double.NaN : reads.average();
    }

    /** Moving average of an offload, or NaN before the first sample. */
    public double offloadNanos() {
        return offloads.count == 0 ? Double.NaN : offloads.average();
    }

    private static final class Window {
        private final long[] samples;
        private int next;
        private int count;
        private long sum;

        Window(int size) {
            samples = new long[size];
        }

        void add(long value) {
            if (count == samples.length) {
                sum -= samples[next];
            } else {
                count++;
            }
            samples[next] = value;
            sum += value;
            next = (next + 1) % samples.length;
        }

        double average() {
            return (double) sum / count;
        }
    }
}
