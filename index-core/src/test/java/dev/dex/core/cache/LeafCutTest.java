package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.TreeMap;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.RemoteMemory;

/**
 * Splits at a key inside a leaf (LeafCuts, docs/partition-splits.md "Hot leaves"): the leaf is cut there first, so the
 * boundary is a leaf's and no leaf spans the two partitions; a partition that is one leaf splits at the key its load
 * names; an owner killed at each writing verb of such a split loses nothing. The fixture's tree holds keys 2, 4, ...,
 * 2n with value key + 1.
 */
class LeafCutTest {
    private static final DexEngineSettings CONFIG =
            DexEngineSettings.dex(3_000L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);

    /** The leaf that holds {@code key}, read from remote memory. */
    static NodeView leafOf(RemoteMemory memory, long key) {
        Superblock.Contents superblock = Superblock.read(memory);
        NodeView node = new NodeView(superblock.keyFormat()).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        long address = superblock.root();
        while (true) {
            memory.read(address, node.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
            if (node.isLeaf()) {
                return node;
            }
            address = node.child(node.childIndex(key));
        }
    }

    @Test
    void aSplitAtAKeyInsideALeafCutsTheLeafThereAndTheNewPartitionIsServedElsewhere() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            DexEngine a = fixture.open(1, CONFIG).get(0);
            long fence = a.splitBoundary(0, a.partitions().upperInclusive(0) / 2);
            NodeView before = leafOf(fixture.admin, fence);
            assertEquals(fence, before.highFence());
            long inside = before.key(before.count() / 2); // a loaded key in the middle of that leaf
            assertTrue(inside < fence && inside > before.lowFence());
            TreeMap<Long, Long> model = fixture.initialModel();
            try (DexSession session = a.newSession()) {
                session.put(inside, 1);
                session.put(inside + 2, 2); // dirty in the cache: the split's checkpoint writes them back first
                model.put(inside, 1L);
                model.put(inside + 2, 2L);
            }
            DexEngine.SplitReport report = a.split(0, inside);
            assertEquals(inside, report.boundary(), "the boundary is the key: the leaf was cut after it");
            assertEquals(inside, a.partitions().upperInclusive(0));
            assertEquals(inside, leafOf(fixture.admin, inside).highFence(), "the leaf ends at the boundary now");
            assertEquals(inside, leafOf(fixture.admin, inside + 2).lowFence(), "and a new leaf starts after it");
            assertEquals(fence, leafOf(fixture.admin, inside + 2).highFence());
            DexEngine b = fixture.openEngine(CONFIG, null);
            b.acquire(report.added());
            try (DexSession sa = a.newSession(); DexSession sb = b.newSession()) {
                assertTrue(sa.lookup(inside));
                assertEquals(1, sa.value());
                assertThrows(PartitionNotHeldException.class, () -> sa.lookup(inside + 2));
                assertTrue(sb.lookup(inside + 2));
                assertEquals(2, sb.value());
                sb.insert(inside + 1, 9); // an insert into the new leaf, in the new partition
                model.put(inside + 1, 9L);
            }
            CacheValidator.validate(a);
            CacheValidator.validate(b);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void aPartitionThatIsOneLeafSplitsAtTheKeyItsLoadNames() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            DexEngine a = fixture.open(1, CONFIG).get(0);
            // Partition 0 split down to its first leaf.
            long first = a.splitBoundary(0, 3);
            a.split(0, first);
            assertEquals(first, a.partitions().upperInclusive(0));
            NodeView leaf = leafOf(fixture.admin, 2);
            assertEquals(first, leaf.highFence(), "partition 0 is one leaf");
            long median = leaf.key(leaf.count() / 2);
            assertEquals(median, a.splitBoundary(0, median), "inside the one leaf: the key itself");
            assertEquals(leaf.key(leaf.count() - 2), a.splitBoundary(0, first),
                    "at the leaf's last entry: its second to last, so that both halves hold entries");
            assertEquals(leaf.key(0), a.splitBoundary(0, 1), "below its first entry: after the first");
            DexEngine.SplitReport report = a.split(0, median);
            assertEquals(median, a.partitions().upperInclusive(0));
            assertEquals(median, a.partitions().lowerExclusive(report.added()));
            a.acquire(report.added());
            TreeMap<Long, Long> model = fixture.initialModel();
            try (DexSession session = a.newSession()) {
                for (long key = 3; key < first; key += 2) {
                    assertTrue(session.insert(key, key), "insert " + key + " on both sides of the cut");
                    model.put(key, key);
                }
            }
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void wideKeysAreNotCutAndASplitInsideALeafTakesTheLeafsFence() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0, dev.dex.core.tree.TreeSettings.DEFAULT_BULK_FILL_FACTOR,
                false, 16)) {
            DexEngine a = fixture.open(1, CONFIG).get(0);
            long fence = a.splitBoundary(0, a.partitions().upperInclusive(0) / 2);
            long inside = fence - 1; // a first word inside that leaf: a table bound there would leave the leaf shared
            DexEngine.SplitReport report = a.split(0, inside);
            assertEquals(fence, report.boundary(), "the leaf's fence: keys of 16 bytes are not cut");
            long first = a.splitBoundary(0, 1);
            a.split(0, first);
            assertEquals(Long.MIN_VALUE, a.splitBoundary(0, first / 2), "a one-leaf partition of wide keys: no split");
            TreeMap<Long, Long> model = fixture.initialModel();
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void aCrashAtAnyWritingVerbOfASplitThatCutsALeafLosesNoAcknowledgedWrite() {
        int crashed = TableChangeCrashes.crashAtEveryWritingVerb(CONFIG, table -> table.upperInclusive(0),
                () -> new TableChangeCrashes.Change() {
                    long inside;

                    @Override
                    public PartitionTable plan(DexEngine engine) {
                        long fence = engine.splitBoundary(0, engine.partitions().upperInclusive(0) / 2);
                        NodeView leaf = leafOf(engine.memory, fence);
                        inside = leaf.key(leaf.count() / 2);
                        return engine.partitions().split(0, inside, 4);
                    }

                    @Override
                    public void run(DexEngine engine) {
                        engine.split(0, inside);
                    }
                });
        assertTrue(crashed >= 8, "the split's writing verbs, the cut's three among them, were each a crash point: " + crashed);
    }
}
