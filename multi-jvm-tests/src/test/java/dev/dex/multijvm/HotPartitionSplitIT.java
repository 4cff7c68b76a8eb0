package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.ComputeNode;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.RemoteMemory;

/**
 * A hot range across processes (docs/partition-splits.md): two compute nodes, 16 partitions, and a mix that sends 90% of
 * its operations to the first 1/64 of the keys, all in partition 0, with every read checked against the writes
 * acknowledged before it ({@link WriteMix}). The owner of partition 0 splits it by load ({@code dex.compute.split} at
 * its usual rate factor, 4); sharding places the new partitions, and a piece of the hot range comes to be served, and
 * busy, on the other compute node. No acknowledged write is lost and none is read out of order while the keys move.
 * (A kill among the splits is {@code CrashDuringPartitionSplitsIT}'s.)
 */
class HotPartitionSplitIT {
    @RegisterExtension
    final ClusterHarness cluster = new ClusterHarness("dex.tree.partitions=16", "dex.compute.load-window=1s",
            "dex.compute.split.interval=1s", "dex.compute.split.rate-factor=4", "dex.compute.split.min-rate=50");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void theHotPartitionSplitsAndAPieceOfItIsServedByTheOtherNodeWithNothingLost() throws Exception {
        cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, CrashIT.KEYS);
        cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);
        PartitionTable formatted = PartitionTable.load(memory);
        long hotKeys = CrashIT.KEYS / 64;
        long hottest = ClusterHarness.key(hotKeys);
        assertTrue(hottest <= formatted.upperInclusive(0), "the hot keys lie in partition 0: " + formatted);
        Map<String, List<Integer>> placed = cluster.awaitPartitions("placed",
                map -> map.values().stream().mapToInt(List::size).sum() == formatted.count(), Duration.ofSeconds(60));
        String owner = placed.entrySet().stream().filter(e -> e.getValue().contains(0)).findFirst().orElseThrow().getKey();
        cluster.log("partition 0 (keys up to " + formatted.upperInclusive(0) + ", the hot ones up to " + hottest + ") is on " + owner);

        WriteMix mix = cluster.closeAfter(new WriteMix(client, CrashIT.KEYS, 50, 64).hot(hotKeys, 90));
        mix.start(23);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        String moved = null;
        while (moved == null) {
            assertTrue(System.nanoTime() < deadline, "no piece of the hot range was served, busy, off " + owner + " within 90 s: "
                    + PartitionTable.load(memory) + " " + cluster.partitionMap(cluster.statuses()));
            Thread.sleep(500);
            PartitionTable table = PartitionTable.load(memory);
            for (ComputeNode.Status status : cluster.statuses()) {
                String name = cluster.nodeAt(status.address()).name();
                for (int i = 0; i < status.partitionsHeld().size() && !name.equals(owner); i++) {
                    int id = status.partitionsHeld().get(i);
                    double rate = status.partitionRates().isEmpty() ? 0 : status.partitionRates().get(i);
                    // A partition a split made (an id beyond the formatted ones) over hot keys, taking the mix's operations.
                    if (id >= formatted.count() && table.exists(id) && table.lowerExclusive(id) < hottest && rate >= 50) {
                        moved = String.format("partition %d (%d, %d] on %s at %.0f operations/s", id, table.lowerExclusive(id),
                                table.upperInclusive(id), name, rate);
                    }
                }
            }
        }
        cluster.log("a piece of the hot range moved: " + moved);
        mix.awaitMore(50_000, Duration.ofSeconds(60)); // more splits, and their keys moving, under the checked mix
        mix.stop();
        cluster.log("mix: " + mix.summary());
        cluster.log("verified: " + mix.assertNothingLost(CrashIT.KEYS));
        PartitionTable table = PartitionTable.load(memory);
        assertTrue(table.count() > formatted.count(), "the stored table has the partitions the splits added: " + table);
        assertTrue(table.upperInclusive(0) < formatted.upperInclusive(0), "partition 0 was narrowed: " + table);
        cluster.log("the table after the splits: " + table.count() + " partitions; by node: " + cluster.partitionMap(cluster.statuses()));
    }
}
