package dev.dex.core.partition;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

class PartitionTableTest {

    @Test
    void everyKeyBelongsToExactlyThePartitionWhoseRangeHoldsIt() {
        PartitionTable table = PartitionTable.ofUpperBounds(10, 20, 30);
        assertEquals(4, table.count());
        assertEquals(0, table.partitionOf(Long.MIN_VALUE + 1));
        assertEquals(0, table.partitionOf(10), "upper bounds are inclusive");
        assertEquals(1, table.partitionOf(11));
        assertEquals(2, table.partitionOf(30));
        assertEquals(3, table.partitionOf(31));
        assertEquals(3, table.partitionOf(Long.MAX_VALUE));
        assertEquals(Long.MIN_VALUE, table.lowerExclusive(0));
        assertEquals(20, table.lowerExclusive(2));
        assertEquals(Long.MAX_VALUE, table.upperInclusive(3));
        assertArrayEquals(new long[] {10, 20, 30}, table.upperBounds());
    }

    @Test
    void aNodeIsOwnedOnlyWhenItsFenceRangeLiesInOnePartition() {
        PartitionTable table = PartitionTable.ofUpperBounds(10, 20, 30);
        assertEquals(1, table.ownerOf(10, 20), "(10, 20] is partition 1");
        assertEquals(1, table.ownerOf(12, 15));
        assertEquals(-1, table.ownerOf(9, 20), "(9, 20] holds key 10 of partition 0");
        assertEquals(-1, table.ownerOf(10, 21));
        assertEquals(-1, table.ownerOf(Long.MIN_VALUE, Long.MAX_VALUE), "the root is shared");
        assertEquals(0, PartitionTable.ofUpperBounds().ownerOf(Long.MIN_VALUE, Long.MAX_VALUE),
                "with one partition every node is owned");
        assertEquals(3, table.ownerOf(30, Long.MAX_VALUE));
    }

    @Test
    void equalWidthSplitsTheRangeEvenly() {
        PartitionTable table = PartitionTable.equalWidth(4, 1, 400);
        assertArrayEquals(new long[] {100, 200, 300}, table.upperBounds());
        assertEquals(1, PartitionTable.equalWidth(1, 0, 0).count());
    }

    @Test
    void badTablesAreRejectedWithAReason() {
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.ofUpperBounds(5, 5));
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.ofUpperBounds(7, 3));
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.ofUpperBounds(Long.MIN_VALUE));
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.ofUpperBounds(Long.MAX_VALUE));
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.equalWidth(0, 1, 100));
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.equalWidth(PartitionTable.MAX_PARTITIONS + 1, 0, 1 << 20));
        IllegalArgumentException narrow = assertThrows(IllegalArgumentException.class, () -> PartitionTable.equalWidth(10, 1, 5));
        assertTrue(narrow.getMessage().contains("too narrow"), narrow.getMessage());
    }

    @Test
    void leafFencePartitionsOwnEveryLeafAndRoundTripThroughTheSuperblock() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 32L << 20, 64 << 10);
            fabric.export(1, 32L << 20, 64 << 10);
            RemoteMemory memory = fabric.connect(0, 1);
            int n = 50_000;
            long[] keys = new long[n];
            for (int i = 0; i < n; i++) {
                keys[i] = 3L * i + 1;
            }
            BulkLoader.formatAndLoad(memory, TreeSettings.defaults().withSubtreeLevel(1), SortedEntries.of(keys, keys), x -> { });
            IllegalStateException none = assertThrows(IllegalStateException.class, () -> PartitionTable.load(memory));
            assertTrue(none.getMessage().contains("no partition table"), none.getMessage());

            PartitionTable table = Partitioning.fromLeafFences(memory, 16);
            assertEquals(16, table.count());
            PartitionTable.store(memory, table);
            assertEquals(table, PartitionTable.load(memory));

            List<long[]> leafRanges = new ArrayList<>();
            long[] previous = {Long.MIN_VALUE};
            long[] perPartition = new long[16];
            TreeValidator.validate(memory, (k, v) -> perPartition[table.partitionOf(k)]++);
            // Every bound is a leaf fence: the leaf holding a bound key ends exactly there.
            for (long bound : table.upperBounds()) {
                assertEquals(0, Math.floorMod(bound - 1, 3L), "bound " + bound + " is a loaded key (a leaf's last key)");
                leafRanges.add(new long[] {previous[0], bound});
                previous[0] = bound;
            }
            for (long count : perPartition) {
                assertTrue(count > n / 16 / 2 && count < n / 16 * 2, "partitions are balanced: " + java.util.Arrays.toString(perPartition));
            }
            assertEquals(15, leafRanges.size());
        }
    }

    @Test
    void wideKeysGetBoundsFromTheFirstWordsOfTheirSeparators() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 8L << 20, 64 << 10);
            RemoteMemory memory = fabric.connect(0);
            // 16-byte keys: 1000 whose first 8 bytes are zero (first word Long.MIN_VALUE, no bound can be that), then 200
            // in groups of 40 sharing a first word.
            long[] keys = new long[1_200];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = i;
            }
            SortedEntries entries = SortedEntries.withWords(SortedEntries.of(keys, keys), (n, words) -> {
                words[0] = n < 1000 ? Long.MIN_VALUE : Long.MIN_VALUE + 1 + (n - 1000) / 40;
                words[1] = n;
            });
            BulkLoader.formatAndLoad(memory, TreeSettings.defaults().withKeyBytes(16), entries, x -> { });
            PartitionTable table = Partitioning.fromLeafFences(memory, 4);
            assertEquals(4, table.count());
            long previous = Long.MIN_VALUE;
            for (long bound : table.upperBounds()) {
                assertTrue(bound > previous && bound <= Long.MIN_VALUE + 5, "a first word of a separator: " + bound);
                previous = bound;
            }
            assertEquals(0, table.partitionOf(new long[] {Long.MIN_VALUE, 5}), "keys whose first word is minimal: partition 0");
        }
    }

    @Test
    void aTreeWithFewerLeavesThanPartitionsIsRejected() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 4L << 20, 64 << 10);
            RemoteMemory memory = fabric.connect(0);
            long[] keys = new long[100];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = i + 1;
            }
            BulkLoader.formatAndLoad(memory, TreeSettings.defaults(), SortedEntries.of(keys, keys), x -> { });
            assertEquals(3, Partitioning.fromLeafFences(memory, 3).count(), "100 keys at 47 per leaf make 3 leaves");
            IllegalArgumentException tooMany = assertThrows(IllegalArgumentException.class,
                    () -> Partitioning.fromLeafFences(memory, 4));
            assertTrue(tooMany.getMessage().contains("too few"), tooMany.getMessage());
        }
    }

    @Test
    void aSplitNarrowsOnePartitionAndGivesTheRestOfItsRangeToANewId() {
        PartitionTable table = PartitionTable.ofUpperBounds(10, 20, 30);
        assertTrue(table.idsInKeyOrder());
        assertEquals(4, table.freeId());
        PartitionTable split = table.split(1, 15, 4);
        assertEquals(5, split.count());
        assertEquals(5, split.idLimit());
        assertArrayEquals(new long[] {10, 15, 20, 30}, split.upperBounds());
        assertArrayEquals(new int[] {0, 1, 4, 2, 3}, split.ids(), "the new id sits in key order after the one it split from");
        assertEquals(1, split.partitionOf(15));
        assertEquals(4, split.partitionOf(16));
        assertEquals(4, split.partitionOf(20));
        assertEquals(2, split.partitionOf(21));
        assertEquals(15, split.lowerExclusive(4));
        assertEquals(20, split.upperInclusive(4));
        assertEquals(10, split.lowerExclusive(1));
        assertEquals(15, split.upperInclusive(1));
        assertEquals(20, split.lowerExclusive(2), "the partitions after it keep their ranges");
        assertEquals(4, split.ownerOf(15, 20), "(15, 20] lies in the new partition");
        assertEquals(-1, split.ownerOf(12, 18), "a node across the boundary is shared now");
        assertEquals(1, table.ownerOf(12, 18), "and was owned before");
        assertFalse(split.idsInKeyOrder());
        assertTrue(split.toString().contains("ids [0, 1, 4, 2, 3]"), split.toString());

        PartitionTable last = split.split(3, 1_000, 5);
        assertEquals(5, last.partitionOf(Long.MAX_VALUE), "the last partition splits too");
        assertEquals(3, last.partitionOf(1_000));

        assertEquals(table, split.merge(1, 4), "a merge undoes the split");
        PartitionTable merged = split.merge(4, 2);
        assertArrayEquals(new int[] {0, 1, 4, 3}, merged.ids());
        assertEquals(4, merged.partitionOf(30));
        assertFalse(merged.exists(2));
        assertEquals(2, merged.freeId(), "the id a merge freed is the next split's");
        IllegalArgumentException gone = assertThrows(IllegalArgumentException.class, () -> merged.upperInclusive(2));
        assertTrue(gone.getMessage().contains("partition 2 is not in the partition table"), gone.getMessage());
    }

    @Test
    void badSplitsAndMergesAreRefusedWithAReason() {
        PartitionTable table = PartitionTable.ofUpperBounds(10, 20, 30);
        IllegalArgumentException outside = assertThrows(IllegalArgumentException.class, () -> table.split(1, 20, 4));
        assertTrue(outside.getMessage().contains("not inside partition 1 (10, 20]"), outside.getMessage());
        assertThrows(IllegalArgumentException.class, () -> table.split(1, 10, 4), "the lower bound is not inside");
        IllegalArgumentException used = assertThrows(IllegalArgumentException.class, () -> table.split(1, 15, 2));
        assertTrue(used.getMessage().contains("in use"), used.getMessage());
        assertThrows(IllegalArgumentException.class, () -> table.split(1, 15, PartitionTable.MAX_PARTITIONS));
        assertThrows(IllegalArgumentException.class, () -> table.split(7, 15, 4), "no partition 7");
        IllegalArgumentException notNeighbours = assertThrows(IllegalArgumentException.class, () -> table.merge(0, 2));
        assertTrue(notNeighbours.getMessage().contains("not the right neighbour"), notNeighbours.getMessage());
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.of(new long[] {10}, new int[] {0, 0}), "one id twice");
        assertThrows(IllegalArgumentException.class, () -> PartitionTable.of(new long[] {10}, new int[] {0}), "an id per range");
    }

    /** Memory server 0 on {@code fabric}, 64 KiB chunks, with a formatted superblock and no table yet. */
    private static RemoteMemory formatted(LocalFabric fabric) {
        fabric.export(0, 8L << 20, 64 << 10);
        RemoteMemory memory = fabric.connect(0);
        dev.dex.core.tree.Superblock.format(memory, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
        return memory;
    }

    @Test
    void aSplitTableRoundTripsThroughBothSlotsAndACommitLosesARaceCleanly() {
        try (LocalFabric fabric = new LocalFabric()) {
            RemoteMemory memory = formatted(fabric);
            PartitionTable table = PartitionTable.equalWidth(4, 0, 4000);
            PartitionTable.store(memory, table);
            PartitionTable.Versioned first = PartitionTable.loadVersioned(memory);
            assertEquals(new PartitionTable.Versioned(table, 2), first);

            PartitionTable split = table.split(2, 2500, 4);
            assertTrue(PartitionTable.commit(memory, 2, split), "slot 1");
            assertEquals(new PartitionTable.Versioned(split, 4), PartitionTable.loadVersioned(memory));
            assertFalse(PartitionTable.commit(memory, 2, table.split(0, 500, 4)), "a commit from an old version loses");
            assertEquals(split, PartitionTable.load(memory), "and changes nothing");

            PartitionTable again = split.split(4, 2700, 5);
            assertTrue(PartitionTable.commit(memory, 4, again), "slot 0 again, with its ids");
            assertEquals(new PartitionTable.Versioned(again, 6), PartitionTable.loadVersioned(memory));
            PartitionTable merged = again.merge(2, 4).merge(2, 5);
            assertTrue(PartitionTable.commit(memory, 6, merged));
            assertEquals(table, PartitionTable.load(memory), "merged back: ids in key order again");
            assertThrows(IllegalArgumentException.class, () -> PartitionTable.commit(memory, 7, table), "an odd version is a lock");
        }
    }

    @Test
    void chunksWithoutRoomForASecondTableStoreOneAndRefuseToChangeIt() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 8L << 20, 4096);
            RemoteMemory memory = fabric.connect(0);
            dev.dex.core.tree.Superblock.format(memory, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            PartitionTable table = PartitionTable.equalWidth(400, 0, 400_000);
            PartitionTable.store(memory, table);
            assertEquals(table, PartitionTable.load(memory));
            IllegalStateException noRoom = assertThrows(IllegalStateException.class,
                    () -> PartitionTable.commit(memory, 2, table.split(0, 500, 400)));
            assertTrue(noRoom.getMessage().contains("no room for a second partition table"), noRoom.getMessage());
            assertEquals(new PartitionTable.Versioned(table, 2), PartitionTable.loadVersioned(memory), "unchanged, unlocked");
            PartitionTable loaders = PartitionTable.equalWidth(300, 0, 400_000);
            PartitionTable.store(memory, loaders); // a loader's table over the memory node's, in place
            assertEquals(new PartitionTable.Versioned(loaders, 6), PartitionTable.loadVersioned(memory));
        }
    }

    @Test
    void aTreeStoredTwiceBeforeSlotsExistedIsReadFromSlotZero() {
        try (LocalFabric fabric = new LocalFabric()) {
            RemoteMemory memory = formatted(fabric);
            PartitionTable table = PartitionTable.equalWidth(8, 0, 8000);
            PartitionTable.store(memory, table);
            // Each store of the first layout added 2 and wrote slot 0: two stores left version 4 over slot 0.
            assertEquals(2, memory.compareAndSwap(dev.dex.core.tree.SuperblockDescriptor.TABLE_VERSION_ADDRESS, 2, 4));
            assertEquals(new PartitionTable.Versioned(table, 6), PartitionTable.loadVersioned(memory),
                    "moved to the next version, which names slot 0");
            PartitionTable split = table.split(3, 3500, 8);
            assertTrue(PartitionTable.commit(memory, 6, split));
            assertEquals(new PartitionTable.Versioned(split, 8), PartitionTable.loadVersioned(memory));
        }
    }
}
