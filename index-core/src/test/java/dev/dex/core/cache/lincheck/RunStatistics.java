package dev.dex.core.cache.lincheck;

import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;

import dev.dex.core.tree.TreeValidator;

/**
 * What the invocations of one Lincheck check did to the tree and to the engines' caches, so that a test
 * can assert that the checked runs really split nodes, overflowed the tiny caches and left dirty frames
 * to write back: a linearizability check that never does proves little. Each counter counts invocations;
 * the cache counters count them per engine.
 */
final class RunStatistics {
    private final LongAdder validations = new LongAdder();
    private final LongAdder rootSplits = new LongAdder();
    private final LongAdder leafSplits = new LongAdder();
    private final LongAdder splitsWhileOverlapping = new LongAdder();
    private final LongAdder[] leafReloads = adders();
    private final LongAdder[] coolingFrames = adders();
    private final LongAdder[] dirtyFramesAtClose = adders();

    private static LongAdder[] adders() {
        LongAdder[] adders = new LongAdder[PartitionedKeyLayout.ENGINES];
        Arrays.setAll(adders, e -> new LongAdder());
        return adders;
    }

    void reset() {
        validations.reset();
        rootSplits.reset();
        leafSplits.reset();
        splitsWhileOverlapping.reset();
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            leafReloads[e].reset();
            coolingFrames[e].reset();
            dirtyFramesAtClose[e].reset();
        }
    }

    /** Records the tree an invocation left, against the bulk-loaded shape. */
    void recordValidated(TreeValidator.Report report, PartitionedKeyLayout layout) {
        validations.increment();
        if (report.height() > layout.height()) {
            rootSplits.increment();
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

    @Override
    public String toString() {
        return "validations=" + validations() + ", rootSplits=" + rootSplits() + ", leafSplits=" + leafSplits()
                + ", splitsWhileOverlapping=" + splitsWhileOverlapping() + ", leafReloads=" + sums(leafReloads)
                + ", coolingFrames=" + sums(coolingFrames) + ", dirtyFramesAtClose=" + sums(dirtyFramesAtClose);
    }

    private static String sums(LongAdder[] perEngine) {
        return Arrays.toString(Arrays.stream(perEngine).mapToLong(LongAdder::sum).toArray());
    }
}
