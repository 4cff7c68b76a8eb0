package dev.dex.actors.partition;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

import org.slf4j.Logger;

import com.typesafe.config.Config;

import dev.dex.actors.PartitionLoad;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.partition.PartitionTable;

/**
 * When a compute node splits a partition it holds, or merges two (docs/partition-splits.md, {@code dex.compute.split}):
 * at most one change per {@code interval}. A split: the busiest held partition whose rate over the last load window is at least {@code min-rate}
 * operations a second and at least {@code rate-factor} times the mean rate of the other partitions this node holds (a
 * node that holds one partition compares it with nothing: {@code min-rate} alone decides) splits at the leaf boundary
 * nearest the median of its recent batches' keys ({@link PartitionLoad#medianSample}), on a worker. The new partition
 * has no owner: sharding allocates it on its first batch, as any partition without a home. Else a merge: the coldest
 * pair of neighbours in key order that this node both holds, together below {@code merge-below} times {@code min-rate}
 * (so a merged partition is far from splitting again), while the table has more than {@code min-partitions}; the right
 * one's id leaves the table.
 *
 * <p>Concurrency: {@link #tick} runs on the compute node's actor; the split or merge on a worker; one at a time.
 */
public final class SplitPolicy {
    /** A policy that never splits. */
    public static final SplitPolicy OFF = new SplitPolicy(Duration.ZERO, 0, 0, 0, 0, 0);

    private final long intervalNanos;
    private final double rateFactor;
    private final double minRate;
    /** No split once the table has this many partitions: each new one takes a redo log on a memory server. */
    private final int maxPartitions;
    /** Two neighbours merge below this fraction of minRate, together; 0: never. */
    private final double mergeBelow;
    /** No merge leaves the table with fewer partitions than this. */
    private final int minPartitions;
    private final AtomicBoolean running = new AtomicBoolean();
    private long lastNanos = System.nanoTime();

    public SplitPolicy(Duration interval, double rateFactor, double minRate, int maxPartitions, double mergeBelow,
                       int minPartitions) {
        if (interval.isNegative() || rateFactor < 0 || minRate < 0) {
            throw new IllegalArgumentException("dex.compute.split: interval, rate-factor and min-rate must not be negative");
        }
        if (maxPartitions < 0 || maxPartitions > dev.dex.core.partition.PartitionTable.MAX_PARTITIONS) {
            throw new IllegalArgumentException("dex.compute.split.max-partitions must be in [0, "
                    + dev.dex.core.partition.PartitionTable.MAX_PARTITIONS + "]: " + maxPartitions);
        }
        if (!(mergeBelow >= 0 && mergeBelow <= 0.5)) {
            throw new IllegalArgumentException("dex.compute.split.merge-below must be in [0, 0.5] (a fraction of min-rate; 0:"
                    + " no merges): " + mergeBelow);
        }
        if (minPartitions < 1 && mergeBelow > 0) {
            throw new IllegalArgumentException("dex.compute.split.min-partitions must be at least 1: " + minPartitions);
        }
        this.mergeBelow = mergeBelow;
        this.minPartitions = minPartitions;
        this.intervalNanos = interval.toNanos();
        this.rateFactor = rateFactor;
        this.minRate = minRate;
        this.maxPartitions = maxPartitions;
    }

    /** From {@code dex.compute.split} (actors' reference.conf). */
    public static SplitPolicy from(Config config) {
        Config split = config.getConfig("dex.compute.split");
        return new SplitPolicy(split.getDuration("interval"), split.getDouble("rate-factor"), split.getDouble("min-rate"),
                split.getInt("max-partitions"), split.getDouble("merge-below"), split.getInt("min-partitions"));
    }

    /** Whether this policy ever splits. */
    public boolean enabled() {
        return intervalNanos > 0;
    }

    /**
     * The partition to split now among {@code held} with their {@code rates}, the table having {@code partitions}, or -1.
     * Pure, for the tick and its test.
     */
    int choose(List<Integer> held, List<Double> rates, int partitions) {
        if (held.isEmpty() || rates.size() != held.size() || partitions >= maxPartitions) {
            return -1;
        }
        double sum = 0;
        int busiest = -1;
        for (int i = 0; i < held.size(); i++) {
            sum += rates.get(i);
            if (busiest < 0 || rates.get(i) > rates.get(busiest)) {
                busiest = i;
            }
        }
        double rate = rates.get(busiest);
        double others = held.size() == 1 ? 0 : (sum - rate) / (held.size() - 1);
        boolean hot = rate >= minRate && (held.size() == 1 || rate >= rateFactor * others);
        return hot && rate > 0 ? held.get(busiest) : -1;
    }

    /**
     * The neighbours to merge now, as {left, right} in key order, among {@code held} with their {@code rates} in
     * {@code table}, or null: the coldest pair both held here whose rates add up to less than merge-below times min-rate,
     * while the table has more than min-partitions. Pure, for the tick and its test.
     */
    int[] chooseMerge(List<Integer> held, List<Double> rates, PartitionTable table) {
        if (mergeBelow <= 0 || rates.size() != held.size() || table.count() <= minPartitions) {
            return null;
        }
        java.util.Map<Integer, Double> rateOf = new java.util.HashMap<>();
        for (int i = 0; i < held.size(); i++) {
            rateOf.put(held.get(i), rates.get(i));
        }
        int[] ids = table.ids();
        int[] best = null;
        double coldest = mergeBelow * minRate;
        for (int i = 0; i + 1 < ids.length; i++) {
            Double left = rateOf.get(ids[i]);
            Double right = rateOf.get(ids[i + 1]);
            if (left != null && right != null && left + right < coldest) {
                coldest = left + right;
                best = new int[] {ids[i], ids[i + 1]};
            }
        }
        return best;
    }

    /**
     * Called on every health tick, after the load window may have rolled: starts a split or a merge when one is due and
     * {@code mayChange} (the node is Up: not leaving, where a new partition would only be handed off again). Also keeps
     * the table this node serves (and answers clients with) current with other nodes' changes: read again on a worker
     * when its stored version moved.
     */
    public void tick(DexEngine engine, EngineWorkers workers, Logger log, boolean mayChange) {
        try {
            workers.submit(() -> engine.servedTable(true));
        } catch (java.util.concurrent.RejectedExecutionException stopping) {
            return; // the workers stopped: the node is going away
        }
        long now = System.nanoTime();
        if (!enabled() || !mayChange || now - lastNanos < intervalNanos || running.get()) {
            return;
        }
        List<Integer> held = workers.held();
        PartitionLoad.Measured measured = workers.load().last(held);
        int partition = choose(held, measured.rates(), engine.partitions().count());
        if (partition < 0) {
            int[] pair = chooseMerge(held, measured.rates(), engine.partitions());
            if (pair != null) {
                lastNanos = now;
                running.set(true);
                merge(engine, workers, log, pair[0], pair[1]);
            }
            return;
        }
        lastNanos = now;
        running.set(true);
        double rate = workers.load().rate(partition);
        long median = workers.load().medianSample(partition);
        workers.load().clearSamples(partition); // what comes after the split is sampled afresh
        workers.submit(() -> {
            long boundary = engine.splitBoundary(partition, median == Long.MIN_VALUE ? 0 : median);
            if (boundary == Long.MIN_VALUE) {
                return null;
            }
            return engine.split(partition, boundary);
        }).whenComplete((report, failure) -> {
            running.set(false);
            if (failure != null) {
                log.warn("partition {} ({} operations/s) was not split: {}", partition, Math.round(rate), failure.toString());
            } else if (report != null) {
                workers.load().split();
                log.info("partition {} ({} operations/s) split at {}: keys above it are partition {} now (table version {}, {} ms)",
                        partition, Math.round(rate), report.boundary(), report.added(), report.version(), report.nanos() / 1_000_000);
            }
        });
    }

    private void merge(DexEngine engine, EngineWorkers workers, Logger log, int left, int right) {
        double rate = workers.load().rate(left) + workers.load().rate(right);
        workers.submit(() -> engine.mergePartitions(left, right)).whenComplete((report, failure) -> {
            running.set(false);
            if (failure != null) {
                log.warn("partitions {} and {} ({} operations/s together) were not merged: {}", left, right, Math.round(rate),
                        failure.toString());
            } else {
                workers.load().merged();
                workers.load().clearSamples(left);
                workers.load().clearSamples(right);
                log.info("partitions {} and {} ({} operations/s together) merged: partition {} holds both ranges (table version"
                        + " {}, {} ms)", left, right, Math.round(rate), left, report.version(), report.nanos() / 1_000_000);
            }
        });
    }
}
