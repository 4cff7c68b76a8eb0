package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;

import com.typesafe.config.ConfigFactory;

import dev.dex.actors.PartitionLoad;
import dev.dex.core.partition.PartitionTable;

/** Which partition a compute node splits, which two it merges ({@code dex.compute.split}), and the settings it takes. */
class SplitPolicyTest {
    private final SplitPolicy policy = new SplitPolicy(Duration.ofSeconds(1), 4.0, 1_000, 100, 0.1, 4);

    @Test
    void theBusiestPartitionSplitsWhenItIsFactorTimesTheMeanAndAboveTheMinimum() {
        assertEquals(7, policy.choose(List.of(3, 7, 9, 12), List.of(100.0, 20_000.0, 100.0, 100.0), 64), "20,000 against a mean of 100 for the others");
        assertEquals(-1, policy.choose(List.of(3, 7, 9, 12), List.of(5_000.0, 9_000.0, 5_000.0, 5_000.0), 64), "1.8x the others: balanced enough");
        assertEquals(-1, policy.choose(List.of(3, 7), List.of(10.0, 900.0), 64), "below min-rate");
        assertEquals(5, policy.choose(List.of(5), List.of(2_000.0), 64), "a node with one partition: min-rate alone decides");
        assertEquals(-1, policy.choose(List.of(5), List.of(999.0), 64));
        assertEquals(-1, policy.choose(List.of(), List.of(), 64), "nothing held");
        assertEquals(-1, policy.choose(List.of(1, 2), List.of(), 64), "no window closed yet");
        assertEquals(-1, policy.choose(List.of(3, 7), List.of(100.0, 20_000.0), 100), "the table has max-partitions already");
        assertEquals(7, policy.choose(List.of(3, 7), List.of(100.0, 20_000.0), 99));
    }

    @Test
    void itIsOffByDefaultAndRefusesNegativeSettings() {
        SplitPolicy shipped = SplitPolicy.from(ConfigFactory.load());
        assertFalse(shipped.enabled(), "reference.conf: interval = 0s");
        assertTrue(SplitPolicy.from(ConfigFactory.parseString("dex.compute.split { interval = 2s, rate-factor = 3, min-rate = 50 }")
                .withFallback(ConfigFactory.load())).enabled());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> new SplitPolicy(Duration.ofSeconds(-1), 4, 1, 64, 0.1, 4));
        IllegalArgumentException tooMany = assertThrows(IllegalArgumentException.class, () -> new SplitPolicy(Duration.ofSeconds(1), 4, 1, 1025, 0.1, 4));
        assertTrue(tooMany.getMessage().contains("max-partitions must be in [0, 1024]: 1025"), tooMany.getMessage());
        assertTrue(bad.getMessage().contains("dex.compute.split"), bad.getMessage());
        assertFalse(SplitPolicy.OFF.enabled());
        IllegalArgumentException hotMerges = assertThrows(IllegalArgumentException.class,
                () -> new SplitPolicy(Duration.ofSeconds(1), 4, 1_000, 64, 0.6, 4));
        assertTrue(hotMerges.getMessage().contains("merge-below must be in [0, 0.5]"), hotMerges.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new SplitPolicy(Duration.ofSeconds(1), 4, 1_000, 64, 0.1, 0));
        assertThrows(IllegalArgumentException.class, () -> new SplitPolicy(Duration.ofSeconds(1), 4, 1_000, 64, Double.NaN, 4));
    }

    @Test
    void theColdestPairOfNeighboursHeldHereMergesWhileTheTableIsAboveMinPartitions() {
        // Key order 0, 6, 1, 2, 3, 5, 4: ids apart from key order after splits.
        PartitionTable table = PartitionTable.of(new long[] {10, 20, 30, 40, 50, 60}, new int[] {0, 6, 1, 2, 3, 5, 4});
        assertArrayEquals(new int[] {6, 1}, policy.chooseMerge(List.of(0, 1, 6), List.of(60.0, 10.0, 20.0), table),
                "6 and 1: 30 together, below 100 (0.1 of min-rate); 0 and 6 make 80, warmer");
        assertArrayEquals(new int[] {2, 3}, policy.chooseMerge(List.of(1, 2, 3, 6), List.of(50.0, 0.0, 1.0, 60.0), table));
        assertNull(policy.chooseMerge(List.of(0, 1, 6), List.of(60.0, 50.0, 50.0), table), "100 together: not below 100");
        assertNull(policy.chooseMerge(List.of(0, 1, 3), List.of(0.0, 0.0, 0.0), table), "cold, but no two of them are neighbours");
        assertNull(policy.chooseMerge(List.of(2, 3), List.of(0.0, 0.0), PartitionTable.of(new long[] {10, 20, 30}, new int[] {0, 1, 2, 3})),
                "the table has min-partitions (4) already");
        assertNull(policy.chooseMerge(List.of(2, 3), List.of(), table), "no window closed yet");
        assertNull(new SplitPolicy(Duration.ofSeconds(1), 4.0, 1_000, 100, 0, 4).chooseMerge(List.of(2, 3), List.of(0.0, 0.0), table),
                "merge-below 0: never");
    }

    @Test
    void aNodeThatIsNotUpChangesNoPartitionAndOneThatIsSplitsTheHotOne() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(4_000, 4, 2)) {
            for (int p = 0; p < 4; p++) {
                tree.engine.acquire(p);
            }
            PartitionLoad load = tree.workers.load();
            load.add(0, 1_000_000);
            for (int p = 1; p < 4; p++) {
                load.add(p, 10);
            }
            for (long key = 2; key < tree.table.upperInclusive(0); key += 40) {
                load.sample(0, key);
            }
            assertTrue(load.roll(System.nanoTime() + 2 * PartitionLoad.DEFAULT_WINDOW.toNanos()), "a window closed");
            SplitPolicy hot = new SplitPolicy(Duration.ofMillis(1), 2.0, 100, 256, 0.1, 4);
            org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(SplitPolicyTest.class);
            Thread.sleep(10);
            hot.tick(tree.engine, tree.workers, log, false); // leaving: a new partition would only be handed off again
            Thread.sleep(500);
            assertEquals(4, PartitionTable.load(tree.admin).count(), "no split while the node is not Up");
            hot.tick(tree.engine, tree.workers, log, true);
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            while (PartitionTable.load(tree.admin).count() == 4) {
                assertTrue(System.nanoTime() < deadline, "partition 0, 50,000 operations a second against 0.5, split");
                Thread.sleep(20);
            }
            PartitionTable split = PartitionTable.load(tree.admin);
            assertTrue(split.upperInclusive(0) < tree.table.upperInclusive(0), "partition 0 was narrowed: " + split);
        }
    }
}
