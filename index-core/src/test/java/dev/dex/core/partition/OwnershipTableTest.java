package dev.dex.core.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * The ownership table's registration rules on two memory servers: epochs only rise; epoch 0 (no redo log) is
 * taken whatever an earlier logged run left; and a table made for another tree (server 0 formatted anew while
 * server 1 kept its region) is replaced rather than held against the new tree's epochs.
 */
class OwnershipTableTest {
    private final LocalFabric fabric = new LocalFabric();
    private final ExportedRegion[] regions = {fabric.export(0, 4L << 20, 64 << 10), fabric.export(1, 4L << 20, 64 << 10)};
    private final RemoteMemory memory = fabric.connect(0, 1);

    @AfterEach
    void close() {
        memory.close();
        fabric.close();
    }

    private String refusal(int server, int partition, long epoch, long key) {
        return OwnershipTable.refusal(regions[server].region(), server, partition, epoch, key);
    }

    @Test
    void epochsOnlyRiseOnEveryServer() {
        OwnershipTable.register(memory, 8, 3, 5, 100, 200, 8);
        assertNull(refusal(0, 3, 5, 150));
        assertNull(refusal(1, 3, 5, 200));
        assertEquals("key 201 lies outside partition 3 (100, 200]", refusal(1, 3, 5, 201));
        IllegalStateException older = assertThrows(IllegalStateException.class, () -> OwnershipTable.register(memory, 8, 3, 4, 100, 200, 8));
        assertEquals("partition 3 was acquired at epoch 5 after this compute node took epoch 4 (memory server 0)", older.getMessage());
        OwnershipTable.register(memory, 8, 3, 6, 100, 200, 8);
        assertEquals("partition 3 is owned at epoch 6, not 5", refusal(1, 3, 5, 150));
    }

    /** Compute nodes started without the redo log after a logged run: their epoch-0 acquires must not fail forever. */
    @Test
    void withoutTheRedoLogEpochZeroIsTakenWhateverWasThere() {
        OwnershipTable.register(memory, 8, 3, 7, 100, 200, 8);
        OwnershipTable.register(memory, 8, 3, 0, 100, 200, 8);
        assertNull(refusal(0, 3, 0, 150));
        assertNull(refusal(1, 3, 0, 150));
        assertEquals("partition 3 is owned at epoch 0, not 7", refusal(1, 3, 7, 150));
    }

    /**
     * Server 0 formatted anew (a new tree: its redo logs count epochs from 1 again) while server 1 kept its region
     * and with it the old tree's table: the new tree's first owner registers epoch 1 and is not refused.
     */
    @Test
    void aTableOfAnotherTreeIsReplaced() {
        OwnershipTable.register(memory, 8, 3, 9, 100, 200, 8);
        long oldTable = regions[1].region().getLongVolatile(OwnershipTable.TABLE_POINTER_OFFSET);
        UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
        word.putLong(0, 0x5EED_0001L);
        memory.write(GlobalAddress.of(0, RegionHeaderDescriptor.INCARNATION_OFFSET), word, 0, Long.BYTES); // server 0 anew
        memory.write(GlobalAddress.of(0, OwnershipTable.TABLE_POINTER_OFFSET), new UnsafeBuffer(new byte[Long.BYTES]), 0, Long.BYTES);

        OwnershipTable.register(memory, 8, 3, 1, 100, 200, 8);
        assertNull(refusal(1, 3, 1, 150), "the new tree's owner offloads on the server that kept its region");
        assertEquals("partition 3 is owned at epoch 1, not 9", refusal(1, 3, 9, 150));
        assertEquals(false, oldTable == regions[1].region().getLongVolatile(OwnershipTable.TABLE_POINTER_OFFSET),
                "server 1 got a table of its own for the new tree");
        assertEquals("partition 4 has no owner", refusal(1, 4, 0, 150), "nothing of the old table came along");
    }

    /**
     * A table holds the tree's partitions and no more (a small region must not lose chunks to 256 entries): a
     * partition beyond it does not exist for the memory side.
     */
    @Test
    void aTableIsSizedForTheTreesPartitions() {
        OwnershipTable.register(memory, 8, 7, 0, 100, 200, 8);
        assertNull(refusal(0, 7, 0, 150));
        assertEquals("partition 8 does not exist", refusal(0, 8, 0, 150));
        long table = GlobalAddress.offset(regions[1].region().getLongVolatile(OwnershipTable.TABLE_POINTER_OFFSET));
        assertEquals(8, regions[1].region().getLongVolatile(table + OwnershipTable.ENTRIES_OFFSET));
    }
}
