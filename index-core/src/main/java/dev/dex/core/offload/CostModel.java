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
 * ({@link OffloadSettings#exploreBudget()}): a flipped decision takes the choice the model found slower, which costs
 * the gap between the two averages, so after one the next waits that gap divided by the budget. At hundreds of
 * thousands of operations a second, a rate alone made flips a visible share of the time where an offload costs
 * far more than a miss (docs/offloading.md). A flipped decision is always timed, since learning is what it is for.
 *
 * <p>Not thread-safe: one per compute thread (session), as in the paper.
 */
public final class CostModel {
    private final OffloadSettings settings;
    private final Window reads;
    private final Window offloads;
    private long decisions;
    /** System.nanoTime() of the last flipped decision. */
    private long lastExplored;
    private boolean exploredOnce;
    /** Whether the last decision was flipped (its latency is then timed). */
    private boolean explored;

    public CostModel(OffloadSettings settings) {
        this.settings = settings;
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
            double cachePath = (level + 1) * (reads.average() + settings.localSearchNanos()) * settings.cacheCoefficient();
            offload = offloads.average() < cachePath;
        }
        explored = false;
        if (random.nextDouble() < settings.exploreRate() && withinBudget(level)) {
            explored = true;
            offload = !offload;
        }
        return offload;
    }

    /**
     * Whether a flip now keeps the flips within their budget: the time since the last one is at least the gap between
     * the two choices' averages at {@code level} divided by the budget. Records the flip when it does.
     */
    private boolean withinBudget(int level) {
        double budget = settings.exploreBudget();
        if (budget == 0 || reads.count == 0 || offloads.count == 0) {
            return true;
        }
        double cachePath = (level + 1) * (reads.average() + settings.localSearchNanos()) * settings.cacheCoefficient();
        long now = System.nanoTime();
        if (exploredOnce && now - lastExplored < Math.abs(offloads.average() - cachePath) / budget) {
            return false;
        }
        exploredOnce = true;
        lastExplored = now;
        return true;
    }

    /** Whether to time the current remote read or offload (always while bootstrapping, and after a flipped decision). */
    public boolean sample(SplittableRandom random) {
        return decisions < 2L * settings.window() || explored || random.nextDouble() < settings.sampleRate();
    }

    public void recordRead(long nanos) {
        reads.add(nanos);
    }

    public void recordOffload(long nanos) {
        offloads.add(nanos);
    }

    /**
     * An offload attempt that did not complete the operation (it fell back): it counts as an offload that
     * cost what the attempt took plus the caching path the operation then takes at {@code level}, so
     * failures, and above all timeouts, steer decisions away from offloading.
     */
    public void recordFailedOffload(long nanos, int level) {
        double cachePath = reads.count == 0 ? 0 : (level + 1) * (reads.average() + settings.localSearchNanos());
        offloads.add(nanos + (long) cachePath);
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
