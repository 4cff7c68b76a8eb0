package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;

/**
 * {@link MemoryServerLostIT} with replica groups (docs/replication.md, "Every replica lost"): two memory servers over tcp,
 * each held by two memory nodes, the tree's level-1 subtrees dealt to both servers. Both replicas of server 1 are killed,
 * its backup first and its primary once the backup is out of the group's view and of the cluster (killed together they
 * would be two of the six voters, and the four left a majority; one at a time the group's own path is the one taken).
 * The groups form before the load (their coordinator runs on a compute node that serves nothing and leaves before the
 * compute nodes that serve start on the loaded tree), so every backup holds the loaded tree through its stream.
 * What must hold, as with one replica: every compute node reports server 1 lost naming its replicas, no operation hangs,
 * every failure names server 1, and the keys whose tree nodes (and, for writes, redo log) live on server 0 keep serving
 * from server 0's group, which lost nothing.
 */
class ReplicaGroupLostIT {
    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcp("dex.memory.replicas=2", "dex.tree.partitions=16",
            "dex.tree.subtree-level=1", "pekko.cluster.split-brain-resolver.stable-after=2s");

    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES)
    void everyReplicaOfOneServerLostFailsItsKeysClearlyAndTheOtherGroupServes() throws Exception {
        NodeProcess first0 = cluster.startMemoryNode("memory-0-a", 0);
        List<NodeProcess> others = List.of(cluster.startMemoryNodeAsync("memory-0-b", 0),
                cluster.startMemoryNodeAsync("memory-1-a", 1), cluster.startMemoryNodeAsync("memory-1-b", 1));
        // The replica groups' coordinator runs on compute nodes, and a compute node's engine must open on the loaded
        // tree's partition table: a compute node that serves nothing forms the groups for the load, then leaves. Its JVM
        // starts while the other memory nodes' do (it needs only the seed to join).
        NodeProcess former = cluster.startComputeNodeAsync("compute-forms-groups", "--memory-nodes", "2");
        for (NodeProcess node : others) {
            node.awaitPort(ClusterHarness.NODE_START);
        }
        former.awaitPort(ClusterHarness.NODE_START);
        NodeProcess primary0 = ClusterHarness.awaitPrimary(List.of(first0, others.get(0)), 1);
        NodeProcess primary1 = ClusterHarness.awaitPrimary(others.subList(1, 3), 1);
        NodeProcess backup0 = primary0 == first0 ? others.get(0) : first0;
        NodeProcess backup1 = primary1 == others.get(1) ? others.get(2) : others.get(1);
        backup0.awaitLog("copy complete", Duration.ofSeconds(60));
        backup1.awaitLog("copy complete", Duration.ofSeconds(60));
        cluster.log("groups formed: server 0 " + primary0 + " + " + backup0 + ", server 1 " + primary1 + " + " + backup1);

        // Loaded through the primaries, which send every change on to their complete backups.
        RemoteMemory memory = cluster.awaitFormattedOn(primary0, primary1);
        cluster.bulkLoad(memory, MemoryServerLostIT.KEYS, 1.0);
        assertEquals(Set.of(0, 1), TreeValidator.validate(memory).nodesPerServer().keySet(), "nodes on both servers");
        assertTrue(former.stopGracefully(Duration.ofSeconds(60)), former + " left the cluster and exited");
        cluster.startComputeNodes(List.of("compute-0", "compute-1"), "--memory-nodes", "2");
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(7);
        cluster.awaitComputeNodes(2);
        cluster.awaitPartitions("before the loss", ClusterHarness.balancedOver(2), Duration.ofSeconds(60));

        backup1.kill();
        long view = ClusterHarness.awaitViewWithoutBackups(primary1, 3, Duration.ofSeconds(60)); // 1 formed, 2 backup joined
        cluster.awaitNotMember(backup1, Duration.ofSeconds(60));
        cluster.log(backup1 + " (server 1's backup) killed: dropped from the group in view " + view + " and from the cluster");
        primary1.kill();
        cluster.log(primary1 + " (server 1's primary) killed: memory server 1 has no replica left");
        cluster.awaitNotMember(primary1, Duration.ofSeconds(60));
        MemoryServerLostIT.assertOutAndTheOthersServe(cluster, client, 1, "memory server 1 is lost: every replica");
    }
}
