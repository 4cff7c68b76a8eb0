package dev.dex.core.cache.lincheck;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

import dev.dex.core.tree.TreeValidator;

/**
 * What the invocations of one Lincheck check did to the tree, to the engines' caches and through the
 * offload channel, so that a test can assert that the checked runs really split nodes, overflowed the tiny
 * caches, left dirty frames to write back, offloaded and fell back: a linearizability check that never
 * does proves little. Each counter counts invocations; the cache and offload counters count them per
 * engine, and the offload totals count operations.
 */
final class RunStatistics {
    private final LongAdder validations = new LongAdder();
    private final LongAdder rootSplits = new LongAdder();
    private final LongAdder innerSplits = new LongAdder();
    private final LongAdder leafSplits = new LongAdder();
    private final LongAdder splitsWhileOverlapping = new LongAdder();
    private final LongAdder[] leafReloads = adders();
    private final LongAdder[] coolingFrames = adders();
    private final LongAdder[] dirtyFramesAtClose = adders();
    private final LongAdder[] offloaded = adders();
    private final LongAdder[] splitFallbacks = adders();
    private final LongAdder[] pathInUseFallbacks = adders();
    private final LongAdder[] offloadTotals = adders();
    private final LongAdder[] fallbackTotals = adders();
    private final LongAdder offloadedWhileOverlapping = new LongAdder();

    private static LongAdder[] adders() {
        LongAdder[] adders = new LongAdder[PartitionedKeyLayout.ENGINES];
        Arrays.setAll(adders, e -> new LongAdder());
        return adders;
    }

    void reset() {
        validations.reset();
        rootSplits.reset();
        innerSplits.reset();
        leafSplits.reset();
        splitsWhileOverlapping.reset();
        offloadedWhileOverlapping.reset();
        for (LongAdder[] perEngine : List.of(leafReloads, coolingFrames, dirtyFramesAtClose, offloaded, splitFallbacks,
                pathInUseFallbacks, offloadTotals, fallbackTotals)) {
            Arrays.stream(perEngine).forEach(LongAdder::reset);
        }
    }

    /** Records the tree an invocation left, against the bulk-loaded shape. */
    void recordValidated(TreeValidator.Report report, PartitionedKeyLayout layout) {
        validations.increment();
        if (report.height() > layout.height()) {
            rootSplits.increment();
        }
        long[] loaded = layout.nodesPerLevel();
        for (int level = 1; level < layout.height() - 1; level++) {
            if (report.nodesPerLevel()[level] > loaded[level]) {
                innerSplits.increment();
                break;
            }
        }
        if (report.nodesPerLevel()[0] > layout.nodesPerLevel()[0]) {
            leafSplits.increment();
        }
    }

    /**
     * Records what engine {@code engine}'s cache went through in one invocation.
     *
     * @param reloaded it read again a leaf of its own partitions during the operations
     * @param cooling  it had a COOLING frame when the operations ended
     * @param dirty    it had dirty frames to write back when it was closed
     */
    void recordCache(int engine, boolean reloaded, boolean cooling, boolean dirty) {
        if (reloaded) {
            leafReloads[engine].increment();
        }
        if (cooling) {
            coolingFrames[engine].increment();
        }
        if (dirty) {
            dirtyFramesAtClose[engine].increment();
        }
    }

    /**
     * Records what the operations on engine {@code engine}'s keys offloaded in one invocation.
     *
     * @param completed  operations completed by offloading
     * @param needsSplit offloads that fell back because an insert or put met a full leaf
     * @param pathInUse  writes not sent because a node below the missed one was cached or in use (the
     *                   exclusion refused them), or lookups whose answer failed validation (a node on the path
     *                   cached or in use, or changed by this compute node meanwhile)
     * @param fallbacks  offloads that fell back, for any reason
     */
    void recordOffloads(int engine, long completed, long needsSplit, long pathInUse, long fallbacks) {
        offloadTotals[engine].add(completed);
        fallbackTotals[engine].add(fallbacks);
        if (completed > 0) {
            offloaded[engine].increment();
        }
        if (needsSplit > 0) {
            splitFallbacks[engine].increment();
        }
        if (pathInUse > 0) {
            pathInUseFallbacks[engine].increment();
        }
    }

    /** Records how many operations of one invocation were completed by offloading while another operation ran. */
    void recordOffloadsWhileOverlapping(long operations) {
        if (operations > 0) {
            offloadedWhileOverlapping.increment();
        }
    }

    /** Records an operation during which the root or a child of the root split while another operation ran. */
    void recordSplitWhileOverlapping() {
        splitsWhileOverlapping.increment();
    }

    long validations() {
        return validations.sum();
    }

    long rootSplits() {
        return rootSplits.sum();
    }

    /** Invocations in which an inner node below the root split. */
    long innerSplits() {
        return innerSplits.sum();
    }

    long leafSplits() {
        return leafSplits.sum();
    }

    long splitsWhileOverlapping() {
        return splitsWhileOverlapping.sum();
    }

    /** Invocations in which {@code engine} read again a leaf of its own partitions. */
    long leafReloads(int engine) {
        return leafReloads[engine].sum();
    }

    /** Invocations after whose operations {@code engine} had a COOLING frame. */
    long coolingFrames(int engine) {
        return coolingFrames[engine].sum();
    }

    /** Invocations in which {@code engine} had dirty frames to write back when it was closed. */
    long dirtyFramesAtClose(int engine) {
        return dirtyFramesAtClose[engine].sum();
    }

    /** Invocations in which an operation on {@code engine}'s keys was completed by offloading. */
    long offloaded(int engine) {
        return offloaded[engine].sum();
    }

    /** Invocations in which an offload on {@code engine} fell back because an insert or put needed a split. */
    long splitFallbacks(int engine) {
        return splitFallbacks[engine].sum();
    }

    /** Invocations in which an offload on {@code engine} fell back because a node on its path was cached or in use. */
    long pathInUseFallbacks(int engine) {
        return pathInUseFallbacks[engine].sum();
    }

    /** Invocations in which an operation completed by offloading overlapped another operation. */
    long offloadedWhileOverlapping() {
        return offloadedWhileOverlapping.sum();
    }

    @Override
    public String toString() {
        return "validations=" + validations() + ", rootSplits=" + rootSplits() + ", innerSplits=" + innerSplits()
                + ", leafSplits=" + leafSplits() + ", splitsWhileOverlapping=" + splitsWhileOverlapping()
                + ", leafReloads=" + sums(leafReloads) + ", coolingFrames=" + sums(coolingFrames)
                + ", dirtyFramesAtClose=" + sums(dirtyFramesAtClose) + ", offloaded=" + sums(offloaded)
                + ", offloadedWhileOverlapping=" + offloadedWhileOverlapping() + ", splitFallbacks=" + sums(splitFallbacks)
                + ", pathInUseFallbacks=" + sums(pathInUseFallbacks) + ", offloadedOperations=" + sums(offloadTotals)
                + ", fallbackOperations=" + sums(fallbackTotals);
    }

    private static String sums(LongAdder[] perEngine) {
        return Arrays.toString(Arrays.stream(perEngine).mapToLong(LongAdder::sum).toArray());
    }
}
