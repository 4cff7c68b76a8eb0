package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * The partition table carries a version: a compute node that read the table before it was rewritten (a bulk
 * load storing bounds at the loaded leaves' fences, say) would treat ranges that now belong to other
 * partitions as its own; it refuses to acquire a partition instead, while a node that opens afterwards serves.
 */
class PartitionTableVersionTest {
    private static DexEngine open(RemoteMemory memory) {
        return DexEngine.open(memory, new DexEngineSettings("no-offload", 256L * FrameHeaderDescriptor.FRAME_LENGTH,
                DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, RedoLogSettings.ON);
    }

    @Test
    void aNodeThatReadAnOlderTableRefusesToServeAndANewOneServes() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 16L << 20, 64 * 1024);
            RemoteMemory memory = fabric.connect(0);
            Superblock.format(memory, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            PartitionTable.store(memory, PartitionTable.equalWidth(4, 0, 4000));
            assertEquals(2, PartitionTable.storedVersion(memory), "even: one table written");

            DexEngine early = open(memory);
            early.acquire(0);
            PartitionTable.store(memory, PartitionTable.equalWidth(2, 0, 4000));
            assertEquals(4, PartitionTable.storedVersion(memory));

            IllegalStateException refused = assertThrows(IllegalStateException.class, () -> early.acquire(1));
            assertTrue(refused.getMessage().contains("partition table was rewritten (version 2 -> 4)"), refused.getMessage());

            DexEngine late = open(memory);
            assertEquals(2, late.partitions().count(), "a node opened afterwards reads the new table");
            late.acquire(1);
            try (var session = late.newSession()) {
                session.put(3999, 1);
                assertTrue(session.lookup(3999));
            }
        }
    }

    @Test
    void aWriterThatDiesHoldingTheLockLeavesTheOldTableReadableAndIsRolledBack() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 16L << 20, 64 * 1024);
            RemoteMemory memory = fabric.connect(0);
            Superblock.format(memory, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            PartitionTable table = PartitionTable.equalWidth(4, 0, 4000);
            PartitionTable.store(memory, table);
            // A writer that locked version 2 and died half-way through writing the slot of version 4.
            assertEquals(2, memory.compareAndSwap(dev.dex.core.tree.SuperblockDescriptor.TABLE_VERSION_ADDRESS, 2, 3));
            PartitionTable.Versioned read = PartitionTable.loadVersioned(memory);
            assertEquals(new PartitionTable.Versioned(table, 2), read, "readers take the table below the lock");
            DexEngine engine = open(memory);
            engine.acquire(1);
            assertTrue(engine.holds(1), "and engines serve it");

            long start = System.nanoTime();
            PartitionTable split = table.split(1, 1500, 4);
            assertFalse(PartitionTable.commit(memory, 2, split), "the next writer rolls the stale lock back, then reads again");
            assertTrue(System.nanoTime() - start >= PartitionTable.STALE_LOCK_NANOS, "only after the lock went stale");
            PartitionTable.Versioned rolledBack = PartitionTable.loadVersioned(memory);
            assertEquals(new PartitionTable.Versioned(table, 6), rolledBack, "to the old table, under a version of its own");
            assertEquals(6, memory.compareAndSwap(dev.dex.core.tree.SuperblockDescriptor.TABLE_VERSION_ADDRESS, 3, 4),
                    "the dead writer's commit, should it come after all, cannot land");
            assertTrue(PartitionTable.commit(memory, 6, split));
            assertEquals(new PartitionTable.Versioned(split, 8), PartitionTable.loadVersioned(memory));
        }
    }
}
