package dev.dex.core.cache.lincheck;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import org.jetbrains.lincheck.datastructures.StressOptions;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.offload.OffloadSettings;

/**
 * Checks with Lincheck (stress mode) that operations stay linearizable when the engines offload them to the
 * memory servers (paper §6): two engines over {@link PartitionedKeyLayout#FOUR_PARTITIONS_OVER_OWNED_SUBTREES},
 * a three-level tree with M = 1 whose owned level-1 nodes miss in caches of a few frames and are offloaded
 * through one in-process channel per invocation, with one memory-side thread per memory server. Inserts
 * of absent keys meet full leaves, so their offloads fall back to the caching path, which splits the leaf
 * and, eagerly, its full level-1 parent; a split of a level-1 node leaves cached leaves under a sibling
 * that is not cached (orphans), and the shared level-1 node splits into two owned halves, so offloaded writes
 * also meet cached nodes below the missed one (escapes) and must not be sent, and lookups meet cached nodes on
 * the path they were answered for and must fall back.
 *
 * <p>Each invocation validates the caches, the tree and the values in remote memory
 * ({@link ConcurrentDex#validateEngines}), checks that the engines' offload counters agree with what the
 * channel answered, and closes its channel. Each test then asserts that operations were completed by
 * offloading while others ran, in a good share of the invocations, that offloads fell back because an
 * insert needed a split and because a node below the missed one was cached or in use, that nodes split, and
 * that no memory-side thread outlived its invocation.
 *
 * <p>Both tests were checked to catch a write sent although an escape lies below the missed node (the
 * exclusion's check removed): the engine then found the leaf the write changed cached and hot, a broken
 * invariant it throws on, where otherwise the cached leaf's write-back would undo the write.
 */
class DexOffloadLinearizabilityTest {
    /** Many short iterations: each iteration runs one scenario, and what a run meets depends on its scenario. */
    private static final int ITERATIONS = dev.dex.core.testing.LincheckBudget.scaled(45);
    private static final int INVOCATIONS_PER_ITERATION = dev.dex.core.testing.LincheckBudget.scaled(40);
    private static final int INVOCATIONS = ITERATIONS * INVOCATIONS_PER_ITERATION;
    private static final int MEMORY_THREADS = 1;
    /** Pinned root, a level-1 node and two leaves: a level-1 node cached by a fallback is soon evicted again. */
    private static final int TINY = 4;
    private static final int SMALL = 6;
    /**
     * The cost model with windows of one sample, so each session decides from real samples after its first
     * two eligible misses, and flipping half of its decisions, so both paths are taken often.
     */
    private static final OffloadSettings EXPLORING = new OffloadSettings(OffloadSettings.Policy.COST_MODEL, 1, 0.01, 0.5, 40, 1.2);
    private static final String OFFLOAD_THREAD_PREFIX = "dex-offload";

    @Test
    void operationsStayLinearizableWhenTwoOffloadOnlyEnginesOffloadEveryEligibleMiss() {
        RunStatistics statistics = check(OffloadOnlyBesideOffloadOnly.class, OffloadOnlyBesideOffloadOnly.STATISTICS);
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            assertTrue(statistics.offloaded(e) > INVOCATIONS / 3, "engine " + e + " seldom offloaded: " + statistics);
            assertTrue(statistics.splitFallbacks(e) > 0, "no offload of engine " + e + " met a full leaf: " + statistics);
        }
        assertTrue(statistics.pathInUseFallbacks(1) > 0, "no offload of engine 1 met a cached or busy path node: " + statistics);
    }

    @Test
    void operationsStayLinearizableWhenACostModelEngineOffloadsBesideAnOffloadOnlyEngine() {
        RunStatistics statistics = check(CostModelBesideOffloadOnly.class, CostModelBesideOffloadOnly.STATISTICS);
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            assertTrue(statistics.offloaded(e) > INVOCATIONS / 10, "engine " + e + " seldom offloaded: " + statistics);
            assertTrue(statistics.splitFallbacks(e) > 0, "no offload of engine " + e + " met a full leaf: " + statistics);
        }
        assertTrue(statistics.pathInUseFallbacks(1) > 0, "no offload of engine 1 met a cached or busy path node: " + statistics);
    }

    @Test
    void operationsStayLinearizableWhenOffloadOnlyEnginesOffloadKeysOfSixtyFourBytes() {
        RunStatistics statistics = check(OffloadOnlyBesideOffloadOnly64.class, OffloadOnlyBesideOffloadOnly64.STATISTICS,
                SequentialOverOwnedSubtrees64.class);
        // Leaves of 11 entries split five times as often as 8-byte ones: more offloads meet a full leaf or a path node
        // in use and fall back (engine 1's share measured 17%, engine 0's 77%).
        for (int e = 0; e < PartitionedKeyLayout.ENGINES; e++) {
            assertTrue(statistics.offloaded(e) > INVOCATIONS / 10, "engine " + e + " seldom offloaded: " + statistics);
            assertTrue(statistics.splitFallbacks(e) > 0, "no offload of engine " + e + " met a full leaf: " + statistics);
        }
    }

    private static RunStatistics check(Class<? extends ConcurrentDex> engines, RunStatistics statistics) {
        return check(engines, statistics, SequentialOverOwnedSubtrees.class);
    }

    private static RunStatistics check(Class<? extends ConcurrentDex> engines, RunStatistics statistics,
                                       Class<? extends SequentialDex> specification) {
        long threadsBefore = liveOffloadThreads();
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
        assertEquals(INVOCATIONS, statistics.validations(), "every invocation is validated once: " + statistics);
        assertTrue(statistics.offloadedWhileOverlapping() > INVOCATIONS / 5,
                "operations were seldom completed by offloading while others ran: " + statistics);
        assertTrue(statistics.innerSplits() > 0, "no level-1 node split: " + statistics);
        assertTrue(statistics.leafSplits() > 0, "no leaf split: " + statistics);
        assertTrue(statistics.splitsWhileOverlapping() > 0, "no split overlapped another operation: " + statistics);
        long left = awaitOffloadThreadsStopping(threadsBefore);
        assertTrue(left <= threadsBefore + (long) ConcurrentDex.SERVERS * MEMORY_THREADS,
                left + " memory-side offload threads are alive after " + INVOCATIONS + " invocations, " + threadsBefore + " before");
        return statistics;
    }

    /** Waits a little for the last invocations' memory-side threads, interrupted at close, to end. */
    private static long awaitOffloadThreadsStopping(long threadsBefore) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        long alive = liveOffloadThreads();
        while (alive > threadsBefore && System.nanoTime() < deadline) {
            Thread.onSpinWait();
            alive = liveOffloadThreads();
        }
        return alive;
    }

    private static long liveOffloadThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.isAlive() && t.getName().startsWith(OFFLOAD_THREAD_PREFIX))
                .count();
    }

    /** The sequential specification over the layout both tests use. */
    public static final class SequentialOverOwnedSubtrees extends SequentialDex {
        public SequentialOverOwnedSubtrees() {
            super(PartitionedKeyLayout.FOUR_PARTITIONS_OVER_OWNED_SUBTREES);
        }
    }

    public static final class OffloadOnlyBesideOffloadOnly extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public OffloadOnlyBesideOffloadOnly() {
            super(PartitionedKeyLayout.FOUR_PARTITIONS_OVER_OWNED_SUBTREES, STATISTICS, MEMORY_THREADS,
                    withCache("offload-only", TINY, 1.0), withCache("offload-only", TINY, 1.0));
        }
    }

    public static final class CostModelBesideOffloadOnly extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public CostModelBesideOffloadOnly() {
            super(PartitionedKeyLayout.FOUR_PARTITIONS_OVER_OWNED_SUBTREES, STATISTICS, MEMORY_THREADS,
                    withCache("dex", SMALL, 0.3).withOffload(EXPLORING), withCache("offload-only", TINY, 1.0));
        }
    }

    static final PartitionedKeyLayout OWNED_SUBTREES_64 = PartitionedKeyLayout.fourPartitionsOverOwnedSubtrees(KeyFormat.of(64));

    public static final class SequentialOverOwnedSubtrees64 extends SequentialDex {
        public SequentialOverOwnedSubtrees64() {
            super(OWNED_SUBTREES_64);
        }
    }

    /** Two offload-only engines on 64-byte keys: offload requests of 104 bytes, leaves of 11 entries. */
    public static final class OffloadOnlyBesideOffloadOnly64 extends ConcurrentDex {
        static final RunStatistics STATISTICS = new RunStatistics();

        public OffloadOnlyBesideOffloadOnly64() {
            super(OWNED_SUBTREES_64, STATISTICS, MEMORY_THREADS, withCache("offload-only", TINY, 1.0), withCache("offload-only", TINY, 1.0));
        }
    }
}
