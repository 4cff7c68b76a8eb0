package dev.dex.core.cache.lincheck;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.jetbrains.lincheck.datastructures.StressOptions;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.KeyFormat;

/**
 * Checks with Lincheck (stress mode) that lookups, inserts, updates, puts, deletes and short scans stay
 * linearizable when run through two DEX engines at once, each holding some of the partitions of one tree
 * (see {@link PartitionedKeyLayout}), while inserts split the shared root and the leaves, and caches of a
 * few frames cool, evict and write back. Each invocation builds a fresh pool and validates it afterwards
 * ({@link ConcurrentDex#validateEngines}); each test then asserts that the root and leaves split, that splits
 * overlapped other operations, that caching engines left dirty frames to write back at close, and that
 * engines admitting every leaf read leaves again after their tiny caches overflowed.
 *
 * <p>Stress mode runs the real engines on real threads; model checking cannot follow their off-heap memory.
 */
class DexLinearizabilityTest {
    private static final int ITERATIONS = dev.dex.core.testing.LincheckBudget.scaled(20);
    private static final int INVOCATIONS_PER_ITERATION = dev.dex.core.testing.LincheckBudget.scaled(130);
    /**
     * Fewer frames than the nodes on each engine's paths to its keys (pinned root, the two inner nodes
     * under it, a test leaf and its split sibling, a stale copy of the old root): leaves are evicted and
     * read again. With 6 frames the paths fit and leaves were read again in under 1% of invocations.
     */
    private static final int TINY = 4;
    private static final int SMALL = 6;

    @Test
    void operationsStayLinearizableThroughTwoDexEnginesAdmittingEveryLeaf() {
        RunStatistics statistics = check(FullAdmission.class, FullAdmission.STATISTICS);
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            assertTrue(statistics.leafReloads(e) > 0, "engine " + e + " never read a leaf again: " + statistics);
            assertTrue(statistics.dirtyFramesAtClose(e) > 0, "engine " + e + " never had dirty frames to write back: " + statistics);
        }
    }

    @Test
    void operationsStayLinearizableWithSixteenByteKeys() {
        RunStatistics statistics = check(FullAdmission16.class, FullAdmission16.STATISTICS, Sequential16.class);
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            assertTrue(statistics.dirtyFramesAtClose(e) > 0, "engine " + e + " never had dirty frames to write back: " + statistics);
        }
    }

    @Test
    void operationsStayLinearizableWithSixtyFourByteKeys() {
        RunStatistics statistics = check(FullAdmission64.class, FullAdmission64.STATISTICS, Sequential64.class);
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            assertTrue(statistics.dirtyFramesAtClose(e) > 0, "engine " + e + " never had dirty frames to write back: " + statistics);
        }
    }

    @Test
    void operationsStayLinearizableThroughTwoDexEnginesAdmittingLeavesLazily() {
        RunStatistics statistics = check(LazyAdmission.class, LazyAdmission.STATISTICS);
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            assertTrue(statistics.dirtyFramesAtClose(e) > 0, "engine " + e + " never had dirty frames to write back: " + statistics);
        }
    }

    @Test
    void operationsStayLinearizableThroughAnUncachedPartitionedEngineBesideADexEngine() {
        RunStatistics statistics = check(PartitionedBesideDex.class, PartitionedBesideDex.STATISTICS);
        assertEquals(0, statistics.dirtyFramesAtClose(0), "the partitioned engine has no frames: " + statistics);
        assertTrue(statistics.leafReloads(1) > 0, "the dex engine never read a leaf again: " + statistics);
        assertTrue(statistics.dirtyFramesAtClose(1) > 0, "the dex engine never had dirty frames to write back: " + statistics);
    }

    @Test
    void operationsStayLinearizableThroughAShermanEngineBesideADexEngine() {
        RunStatistics statistics = check(ShermanBesideDex.class, ShermanBesideDex.STATISTICS);
        // A split writes its parent through (docs/durability.md), so an engine that caches inner nodes only
        // never holds a dirty frame, while it split inner nodes and leaves under its cached parents.
        assertEquals(0, statistics.dirtyFramesAtClose(0), "the sherman engine kept a dirty inner node: " + statistics);
        assertTrue(statistics.leafSplits() > 0, "no leaf split under a cached parent: " + statistics);
        assertTrue(statistics.dirtyFramesAtClose(1) > 0, "the dex engine never had dirty frames to write back: " + statistics);
    }

    private static RunStatistics check(Class<? extends ConcurrentDex> engines, RunStatistics statistics) {
        return check(engines, statistics, SequentialDex.class);
    }

    private static RunStatistics check(Class<? extends ConcurrentDex> engines, RunStatistics statistics,
                                       Class<? extends SequentialDex> specification) {
        statistics.reset();
        new StressOptions()
                .iterations(ITERATIONS)
                .invocationsPerIteration(INVOCATIONS_PER_ITERATION)
                .threads(3)
                .actorsPerThread(3)
                .actorsBefore(1)
                .actorsAfter(2)
                .sequentialSpecification(specification)
                .check(engines);
        assertEquals((long) ITERATIONS * INVOCATIONS_PER_ITERATION, statistics.validations(),
                "every invocation is validated once: " + statistics);
        assertTrue(statistics.rootSplits() > 0, "the root never split: " + statistics);
        assertTrue(statistics.leafSplits() > 0, "no leaf split: " + statistics);
        assertTrue(statistics.splitsWhileOverlapping() > 0, "no split overlapped another operation: " + statistics);
        return statistics;
    }

    public static final class FullAdmission extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public FullAdmission() {
            super(PartitionedKeyLayout.THREE_PARTITIONS_OVER_A_FULL_ROOT, STATISTICS, dex(TINY, 1.0), dex(TINY, 1.0));
        }
    }

    public static final class LazyAdmission extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public LazyAdmission() {
            super(PartitionedKeyLayout.THREE_PARTITIONS_OVER_A_FULL_ROOT, STATISTICS, dex(SMALL, 0.3), dex(SMALL, 0.3));
        }
    }

    public static final class PartitionedBesideDex extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public PartitionedBesideDex() {
            super(PartitionedKeyLayout.THREE_PARTITIONS_OVER_A_FULL_ROOT, STATISTICS, partitioned(), dex(TINY, 1.0));
        }
    }

    public static final class ShermanBesideDex extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public ShermanBesideDex() {
            super(PartitionedKeyLayout.THREE_PARTITIONS_OVER_A_FULL_ROOT, STATISTICS, sherman(TINY), dex(SMALL, 0.3));
        }
    }

    static final PartitionedKeyLayout LAYOUT_16 = PartitionedKeyLayout.threePartitionsOverAFullRoot(KeyFormat.of(16));
    static final PartitionedKeyLayout LAYOUT_64 = PartitionedKeyLayout.threePartitionsOverAFullRoot(KeyFormat.of(64));

    /** Two DEX engines admitting every leaf, on 16-byte keys (39 leaf entries, 39 children per inner node). */
    public static final class FullAdmission16 extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public FullAdmission16() {
            super(LAYOUT_16, STATISTICS, dex(TINY, 1.0), dex(TINY, 1.0));
        }
    }

    public static final class Sequential16 extends SequentialDex {
        public Sequential16() {
            super(LAYOUT_16);
        }
    }

    /** Two DEX engines admitting every leaf, on 64-byte keys (11 leaf entries, 12 children per inner node). */
    public static final class FullAdmission64 extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public FullAdmission64() {
            super(LAYOUT_64, STATISTICS, dex(TINY, 1.0), dex(TINY, 1.0));
        }
    }

    public static final class Sequential64 extends SequentialDex {
        public Sequential64() {
            super(LAYOUT_64);
        }
    }
}
