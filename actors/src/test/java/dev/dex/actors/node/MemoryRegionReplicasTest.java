package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.local.LocalReplicaRegion;
import dev.dex.rdma.shm.ShmFabric;

/**
 * Which fabrics a memory node opens a replica of its server on (docs/replication.md): {@code local} gives each node a
 * replica of its own, which waits for the coordinator's word; {@code shm} refuses, saying why, and leaves nothing behind.
 */
class MemoryRegionReplicasTest {
    private static MemoryNode.Settings settings(int replicas) {
        return new MemoryNode.Settings(0, 4L << 20, 64 << 10, 1, 16, PartitionTable.equalWidth(4, 0, 1000), 3, false, 8, replicas);
    }

    @Test
    void eachMemoryNodeOfALocalServerOpensAReplicaOfItsOwnThatWaitsForItsPart() {
        try (LocalFabric fabric = new LocalFabric();
             MemoryRegion first = MemoryRegion.open(settings(2), fabric);
             MemoryRegion second = MemoryRegion.open(settings(2), fabric)) {
            assertTrue(first.region() instanceof LocalReplicaRegion && second.region() instanceof LocalReplicaRegion);
            assertNotEquals(first.region().endpoint(), second.region().endpoint(), "each replica is named by an endpoint of its own");
            MemoryNode.Replica replica = ReplicaControl.status(fabric, first.region(), 0);
            assertEquals(List.of(MemoryNode.Replica.SOLE_ROLE, 0L, true), List.of(replica.role(), replica.view(), replica.complete()),
                    "a fresh replica is whole and has no part until the coordinator gives it one");
            ReplicaControl.apply(fabric, second.region(), 0, new MemoryNode.Replicate(MemoryNode.Replicate.BECOME_BACKUP, 2, List.of(), null));
            MemoryNode.Replica backup = ReplicaControl.status(fabric, second.region(), 0);
            assertEquals(List.of(MemoryNode.Replica.BACKUP_ROLE, 2L, false), List.of(backup.role(), backup.view(), backup.complete()));
            assertThrows(IllegalStateException.class, () -> ReplicaControl.apply(fabric, second.region(), 0,
                    new MemoryNode.Replicate(MemoryNode.Replicate.BECOME_PRIMARY, 3, List.of(), null)), "an incomplete backup never serves");
            first.close();
            assertEquals(MemoryNode.Replica.DEMOTED_ROLE, ReplicaControl.status(fabric, first.region(), 0).role(),
                    "a replica whose memory node stopped serves nothing");
        }
    }

    @Test
    void anShmMemoryNodeRefusesReplicasSayingWhyAndKeepsNoRegionOpen(@TempDir Path directory) {
        try (ShmFabric fabric = new ShmFabric(directory, 0)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MemoryRegion.open(settings(2), fabric));
            assertEquals("dex.memory.replicas = 2 needs the tcp, disni or local fabric; this memory node uses shm, whose region outlives its"
                    + " memory node already and dies only with its host, with every replica on it (docs/replication.md)", e.getMessage());
            // The refused open released the server id: a node of one replica opens it.
            try (MemoryRegion single = MemoryRegion.open(settings(1), fabric)) {
                assertEquals(0, single.region().serverId());
            }
        }
    }
}
