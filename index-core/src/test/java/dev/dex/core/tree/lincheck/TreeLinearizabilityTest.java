package dev.dex.core.tree.lincheck;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.jetbrains.lincheck.datastructures.StressOptions;
import org.junit.jupiter.api.Test;

/**
 * Checks with Lincheck (stress mode) that lookups, inserts, updates, puts, deletes and short scans on
 * the baseline tree are linearizable when run through two tree instances at once, while inserts split
 * leaves and inner nodes. Each invocation bulk loads a fresh tree of full nodes after a
 * {@link KeyLayout} and validates it afterwards ({@link ConcurrentTree#validateTree}); each test then
 * asserts that the splits its layout is built for did happen, and during overlapping operations.
 *
 * <p>Stress mode runs the real tree on real threads; model checking cannot follow its off-heap memory.
 */
class TreeLinearizabilityTest {
    private static final int ITERATIONS = dev.dex.core.testing.LincheckBudget.scaled(20);
    private static final int INVOCATIONS_PER_ITERATION = dev.dex.core.testing.LincheckBudget.scaled(260);

    @Test
    void operationsStayLinearizableWhileTheRootLeafSplits() {
        RunStatistics statistics = check(RootLeafTree.class, RootLeafModel.class, RootLeafTree.STATISTICS);
        assertTrue(statistics.rootSplits() > 0, "the root leaf never split: " + statistics);
    }

    @Test
    void operationsStayLinearizableWhileAFullInnerRootAndItsLeavesSplit() {
        RunStatistics statistics = check(FullInnerRootTree.class, FullInnerRootModel.class, FullInnerRootTree.STATISTICS);
        assertTrue(statistics.rootSplits() > 0, "the inner root never split: " + statistics);
        assertTrue(statistics.splitsAt(0) > 0, "no leaf split: " + statistics);
    }

    @Test
    void operationsStayLinearizableWhileAFullInnerNodeBelowTheRootAndItsLeavesSplit() {
        RunStatistics statistics = check(FullInnerBelowRootTree.class, FullInnerBelowRootModel.class,
                FullInnerBelowRootTree.STATISTICS);
        assertEquals(0, statistics.rootSplits(), "the root has room and must not split: " + statistics);
        assertTrue(statistics.splitsAt(1) > 0, "the inner node below the root never split: " + statistics);
        assertTrue(statistics.splitsAt(0) > 0, "no leaf split: " + statistics);
    }

    private static RunStatistics check(Class<? extends ConcurrentTree> tree, Class<? extends SequentialTree> model,
                                       RunStatistics statistics) {
        statistics.reset();
        new StressOptions()
                .iterations(ITERATIONS)
                .invocationsPerIteration(INVOCATIONS_PER_ITERATION)
                .threads(3)
                .actorsPerThread(3)
                .actorsBefore(1)
                .actorsAfter(2)
                .sequentialSpecification(model)
                .check(tree);
        assertEquals((long) ITERATIONS * INVOCATIONS_PER_ITERATION, statistics.validations(),
                "every invocation is validated once: " + statistics);
        assertTrue(statistics.splitsWhileOverlapping() > 0, "no split overlapped another operation: " + statistics);
        return statistics;
    }

    public static final class RootLeafTree extends ConcurrentTree {
        static final RunStatistics STATISTICS = new RunStatistics();

        public RootLeafTree() {
            super(KeyLayout.ROOT_LEAF, STATISTICS);
        }
    }

    public static final class RootLeafModel extends SequentialTree {
        public RootLeafModel() {
            super(KeyLayout.ROOT_LEAF);
        }
    }

    public static final class FullInnerRootTree extends ConcurrentTree {
        static final RunStatistics STATISTICS = new RunStatistics();

        public FullInnerRootTree() {
            super(KeyLayout.FULL_INNER_ROOT, STATISTICS);
        }
    }

    public static final class FullInnerRootModel extends SequentialTree {
        public FullInnerRootModel() {
            super(KeyLayout.FULL_INNER_ROOT);
        }
    }

    public static final class FullInnerBelowRootTree extends ConcurrentTree {
        static final RunStatistics STATISTICS = new RunStatistics();

        public FullInnerBelowRootTree() {
            super(KeyLayout.FULL_INNER_BELOW_ROOT, STATISTICS);
        }
    }

    public static final class FullInnerBelowRootModel extends SequentialTree {
        public FullInnerBelowRootModel() {
            super(KeyLayout.FULL_INNER_BELOW_ROOT);
        }
    }
}
