package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.TreeMap;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.core.node.WideKeys;
import dev.dex.core.partition.OwnershipTable;

/**
 * The free leaves of a partition outlive their owner (docs/merges.md, "Reuse"): the next owner, after a release or an
 * owner that went away without one, reuses the leaves its predecessor's merges freed; a failed write of a chain's head
 * leaks leaves but never hands one out twice; a chain that does not lead to a dead leaf is not followed. After every
 * test, {@link FreeLeaves#validate} checks that every leaf on a chain is dead and unreachable (in
 * {@link DexFixture#validateFlushAndRead}).
 */
class FreeLeavesTest {
    private static final DexEngineSettings CACHED = DexEngineSettings.dex(2_000L * FrameHeaderDescriptor.FRAME_LENGTH)
            .withLeafAdmission(0.5);

    /** Inserts every odd key of {@code partition} (-1: of every partition), so that its leaves fill and split. */
    private static void insertOdd(DexFixture fixture, DexEngine engine, TreeMap<Long, Long> model, int partition) {
        insertOdd(fixture, engine, model, partition, 2);
    }

    /** Inserts the odd keys 1, 1 + step, ... of {@code partition} (-1: of every partition). */
    private static void insertOdd(DexFixture fixture, DexEngine engine, TreeMap<Long, Long> model, int partition, int step) {
        try (DexSession session = engine.newSession()) {
            WideKeys.Session s = fixture.wide.of(session);
            for (long key = 1; key < 2L * fixture.loaded; key += step) {
                if (partition < 0 || fixture.partitionOf(key) == partition) {
                    assertTrue(s.insert(key, key + 1), "insert " + key);
                    model.put(key, key + 1);
                }
            }
        }
    }

    @ParameterizedTest(name = "given up by {0}")
    @CsvSource({"release", "abandon"})
    void theNextOwnerReusesTheLeavesItsPredecessorFreed(String how) {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            DexEngine first = fixture.open(1, CACHED).get(0);
            TreeMap<Long, Long> model = MergeTest.deleteShare(fixture, first, 0.9, 11);
            first.checkpointAll();
            int freed = 0;
            for (int p = 0; p < fixture.table.count(); p++) {
                first.merge(p);
                freed += first.merges.freeCount(p);
            }
            assertTrue(freed > 100, "dead leaves freed: " + freed);
            assertEquals(freed, Arrays.stream(FreeLeaves.validate(fixture.admin)).sum(), "every one of them is on a chain");
            long leakedBefore = first.merges.counts()[2];
            for (int p = 0; p < fixture.table.count(); p++) {
                if (how.equals("release")) {
                    first.release(p);
                } else {
                    first.abandon(p); // as an owner that died: nothing handed over but what remote memory holds
                }
            }
            assertEquals(leakedBefore, first.merges.counts()[2], "giving the partitions up leaks no free leaf");
            DexEngine next = fixture.openEngine(CACHED, null);
            for (int p = 0; p < fixture.table.count(); p++) {
                next.acquire(p);
            }
            long chunksBefore = MergeTest.chunksTaken(fixture.admin);
            // Every other odd key (5,000): the leaves split some 250 times, fewer than the free leaves.
            insertOdd(fixture, next, model, -1, 4);
            long[] counts = next.merges.counts();
            assertTrue(counts[1] > freed / 2, "the new owner's splits reused its predecessor's leaves: " + counts[1] + " of " + freed);
            assertEquals(counts[1], counts[3], "every leaf it reused was inherited");
            assertTrue(MergeTest.chunksTaken(fixture.admin) - chunksBefore <= 1,
                    "the splits took few chunks while inherited leaves were free: " + chunksBefore + " -> "
                            + MergeTest.chunksTaken(fixture.admin) + "; freed " + freed + ", reused " + counts[1]);
            MergeTest.readsMatch(fixture, next, model);
            fixture.engines.remove(first);
            first.close();
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /**
     * The head's write fails, before or after it is applied, first when a pass pushes the leaves it freed, then when
     * splits take them: leaves may leak, no leaf is handed out while remote memory still has it on a chain, and once
     * the writes succeed again, the splits reuse what the chain holds.
     */
    @ParameterizedTest(name = "head write applied={0}")
    @CsvSource({"false", "true"})
    void aFailedHeadWriteLeaksLeavesButNeverHandsOneOutTwice(boolean applied) {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            List<MergeTest.FailingWrites> connections = MergeTest.failingConnections(fixture);
            DexEngine engine = fixture.open(1, CACHED).get(0);
            TreeMap<Long, Long> model = MergeTest.deleteShare(fixture, engine, 0.9, 13);
            MergeTest.FailingWrites failing = connections.get(0);
            failing.applied = applied;
            // A pass whose push fails: its leaves are on the chain only if the write was applied.
            int p = 1;
            long headP = OwnershipTable.freeHead(fixture.admin, 0, p);
            assertNotEquals(0, headP, "the ownership table keeps free heads");
            long before = FreeLeaves.validate(fixture.admin)[p]; // the passes the deletes ran freed some
            failing.failAddress = headP;
            engine.merge(p);
            assertTrue(failing.failed > 0, "the push's head write failed");
            assertEquals(applied, FreeLeaves.validate(fixture.admin)[p] > before, "chain of " + p + " after a failed push: "
                    + before + " before");
            // Splits whose take fails: nothing is reused while the head cannot be written.
            int q = 2;
            failing.failAddress = -1;
            engine.merge(q);
            long onChain = FreeLeaves.validate(fixture.admin)[q];
            assertTrue(onChain > 20, "leaves freed in " + q + ": " + onChain);
            long reusedBefore = engine.merges.counts()[1];
            failing.failed = 0;
            failing.failAddress = OwnershipTable.freeHead(fixture.admin, 0, q);
            insertOdd(fixture, engine, model, q);
            assertTrue(failing.failed > 0, "the takes' head writes failed");
            assertEquals(reusedBefore, engine.merges.counts()[1], "no leaf was reused while its take failed");
            long[] chains = FreeLeaves.validate(fixture.admin); // no leaf on a chain is in the tree
            // Each failed take that was applied moved the head past one leaf, which leaks; one that was not moved nothing.
            assertEquals(applied ? Math.max(0, onChain - failing.failed) : onChain, chains[q],
                    "leaves left on the chain after " + failing.failed + " failed takes");
            // The writes work again: the splits of partition p reuse what its chain holds (after reading it again).
            failing.failAddress = -1;
            insertOdd(fixture, engine, model, p);
            assertTrue(engine.merges.counts()[1] > reusedBefore, "reused once the writes work: " + engine.merges.counts()[1]);
            MergeTest.readsMatch(fixture, engine, model);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /**
     * A head that leads to a live leaf, or to a dead leaf of another partition's chain (a damaged table, say), is not
     * followed: the splits allocate, nothing is lost, no leaf is handed out twice.
     */
    @ParameterizedTest(name = "head leads to {0}")
    @CsvSource({"a live leaf", "another partition's dead leaf"})
    void aChainThatLeadsToALeafNotItsOwnIsNotFollowed(String what) {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            DexEngine engine = fixture.open(1, CACHED).get(0);
            TreeMap<Long, Long> model = fixture.initialModel();
            int p = 3;
            long head = OwnershipTable.freeHead(fixture.admin, 0, p);
            long target;
            if (what.equals("a live leaf")) {
                target = someLeafOf(fixture, p);
            } else {
                int q = 0;
                model = MergeTest.deleteShare(fixture, engine, 0.9, 23);
                engine.merge(q); // p's own chain, from its deletes' passes, is lost below: those leaves leak
                target = fixture.admin.readLong(OwnershipTable.freeHead(fixture.admin, 0, q));
                assertNotEquals(0, target, "partition " + q + " has free leaves");
            }
            long reusedBefore = engine.merges.counts()[1];
            UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
            word.putLong(0, target, java.nio.ByteOrder.LITTLE_ENDIAN);
            fixture.admin.write(head, word, 0, Long.BYTES);
            engine.release(p);
            engine.acquire(p); // reads the head again
            insertOdd(fixture, engine, model, p); // its leaves split
            assertEquals(reusedBefore, engine.merges.counts()[1], "no leaf was taken from that chain");
            MergeTest.readsMatch(fixture, engine, model);
            word.putLong(0, 0, java.nio.ByteOrder.LITTLE_ENDIAN);
            fixture.admin.write(head, word, 0, Long.BYTES); // so that the validator below does not refuse the damage
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /** A leaf of the bulk-loaded tree whose keys lie in {@code partition}. */
    private static long someLeafOf(DexFixture fixture, int partition) {
        for (long key = 2; key <= 2L * fixture.loaded; key += 2) {
            if (fixture.partitionOf(key) == partition) {
                long[] words = new long[fixture.wide.words()];
                fixture.wide.toWords(key, words, 0);
                dev.dex.core.node.NodeView node = new dev.dex.core.node.NodeView(
                        dev.dex.core.tree.Superblock.read(fixture.admin).keyFormat())
                        .wrap(new UnsafeBuffer(new byte[dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH]), 0);
                long address = dev.dex.core.tree.Superblock.read(fixture.admin).root();
                while (true) {
                    fixture.admin.read(address, node.buffer(), 0, dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH);
                    if (node.isLeaf()) {
                        return address;
                    }
                    address = node.child(node.childIndex(words));
                }
            }
        }
        throw new AssertionError("partition " + partition + " has no key");
    }
}
