package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.dex.actors.partition.LocalTree;
import dev.dex.core.cache.DexSession;
import dev.dex.core.tree.TreeValidator;

/**
 * The compute node's merge sweep ({@code dex.compute.merge-sweep}): its health ticks merge the leaves of partitions
 * whose deletes stopped, which the deletes themselves leave alone, and never with the sweep off.
 */
class MergeSweepTest {
    private static final int KEYS = 20_000;
    private static final int PARTITIONS = 4;

    /**
     * Deletes every other loaded key: each leaf keeps half its entries, never under a quarter (no merge starts by
     * itself), and two neighbours fit in one merged leaf. Returns the keys left.
     */
    private static TreeMap<Long, Long> deleteEveryOther(LocalTree tree) {
        TreeMap<Long, Long> model = LocalTree.loadedModel(KEYS);
        for (int p = 0; p < PARTITIONS; p++) {
            tree.engine.acquire(p);
        }
        try (DexSession session = tree.engine.newSession()) {
            for (long key = 2; key <= 2L * KEYS; key += 4) {
                assertTrue(session.delete(key), "delete " + key);
                model.remove(key);
            }
        }
        return model;
    }

    @Test
    void healthTicksSweepThePartitionsOnceTheirDeletesStopped() throws InterruptedException {
        try (LocalTree tree = LocalTree.bulkLoaded(KEYS, PARTITIONS, 2)) {
            long leavesBefore = TreeValidator.validate(tree.admin).nodesPerLevel()[0];
            TreeMap<Long, Long> model = deleteEveryOther(tree);
            assertEquals(0, tree.engine.mergeCounts()[0], "the deletes alone merged nothing");
            MergeSweep sweep = new MergeSweep(Duration.ofMillis(200));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            // Every partition had 2,500 deletes, over the 256 and 4 per leaf a sweep needs: each is swept once.
            while (sweptLeaves(tree) < leavesBefore / 3) {
                assertTrue(System.nanoTime() < deadline, "swept within 30 s: " + tree.engine.mergeCounts()[0] + " merged");
                sweep.tick(tree.engine, tree.workers, true);
                Thread.sleep(50);
            }
            long leavesAfter = TreeValidator.validate(tree.admin).nodesPerLevel()[0];
            assertTrue(leavesAfter * 3 < leavesBefore * 2, "leaves: " + leavesBefore + " before, " + leavesAfter + " after");
            try (DexSession session = tree.engine.newSession()) {
                for (long key = 1; key <= 2L * KEYS + 1; key++) {
                    Long expected = model.get(key);
                    assertEquals(expected != null, session.lookup(key), "key " + key);
                    if (expected != null) {
                        assertEquals(expected, session.value(), "value of " + key);
                    }
                }
            }
            tree.engine.checkpointAll();
            assertEquals(model, tree.remoteEntries());
        }
    }

    /** Leaves merged away so far. */
    private static long sweptLeaves(LocalTree tree) {
        return tree.engine.mergeCounts()[0];
    }

    @Test
    void offOrUnhealthyNeverSweeps() throws InterruptedException {
        try (LocalTree tree = LocalTree.bulkLoaded(KEYS, PARTITIONS, 2)) {
            deleteEveryOther(tree);
            MergeSweep sweep = new MergeSweep(Duration.ZERO);
            for (int i = 0; i < 5; i++) {
                sweep.tick(tree.engine, tree.workers, true);
                Thread.sleep(50);
            }
            assertEquals(0, tree.engine.mergeCounts()[0], "nothing merged with the sweep off");
            MergeSweep on = new MergeSweep(Duration.ofMillis(1));
            for (int i = 0; i < 5; i++) {
                on.tick(tree.engine, tree.workers, false); // a memory server out, or the node leaving
                Thread.sleep(50);
            }
            assertEquals(0, tree.engine.mergeCounts()[0], "nothing merged while the node is not healthy");
            assertEquals(PARTITIONS, tree.engine.sweep(0), "while a sweep at once goes over every partition");
            assertTrue(tree.engine.mergeCounts()[0] > 0, "and merges");
        }
    }
}
