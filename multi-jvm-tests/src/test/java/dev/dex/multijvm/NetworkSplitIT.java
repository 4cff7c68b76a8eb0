package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.rdma.RemoteMemory;

/**
 * Network partitions and the downing strategy (docs/replication.md, "Downing"), on emulated hosts: the memory node and
 * two compute nodes each in a network namespace of their own, the client on the bridge between them, over tcp. A
 * host's port of the bridge is taken down to cut it off and brought up again to heal the cut. Memory and compute nodes
 * (not clients) count for the split-brain resolver's majority.
 *
 * <ul>
 *   <li>The memory node cut off from the compute nodes: the compute nodes down it and stay members; it downs itself,
 *       keeps serving its region and, once the cut heals, rejoins with a new actor system. The index serves again with
 *       nothing acknowledged lost.</li>
 *   <li>A compute node cut off from the others: the memory node and the other compute node are the majority of the
 *       voters. The cut node is downed and fenced at the memory node; the other takes its partitions over and replays
 *       their logs. Nothing acknowledged is lost.</li>
 * </ul>
 */
class NetworkSplitIT {
    static final long KEYS = 10_000;

    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcpOnHosts(3, "dex.tree.partitions=16",
            "pekko.cluster.split-brain-resolver.stable-after=2s");

    /**
     * One cluster, two cuts: first the memory node's (healed), then a compute node's. Nothing acknowledged is lost
     * through either.
     */
    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES)
    void aCutOffMemoryNodeRejoinsAndACutOffComputeNodeIsDownedAndNothingIsLost() throws Exception {
        NodeProcess memoryNode = cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, KEYS);
        List<NodeProcess> computes = cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        NodeProcess survivor = computes.get(0);
        NodeProcess isolated = computes.get(1);
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);
        WriteMix mix = cluster.closeAfter(new WriteMix(client, KEYS, 50, 32));
        mix.start(31);
        mix.awaitMore(3_000, Duration.ofSeconds(60));

        // The memory node cut off from the compute nodes and the client.
        cluster.cut(memoryNode);
        long cut = System.nanoTime();
        memoryNode.awaitLog("the cluster downed memory node 0", Duration.ofSeconds(60));
        cluster.awaitNotMember(memoryNode, Duration.ofSeconds(30));
        cluster.log(String.format("the memory node downed itself and was removed %.1f s after the cut", (System.nanoTime() - cut) / 1e9));
        for (NodeProcess compute : computes) {
            assertTrue(compute.isAlive() && cluster.isMember(compute), compute + " stays a member while the memory node is cut off");
        }
        assertTrue(memoryNode.isAlive(), "the memory node's process keeps its region while its actor system is downed");
        cluster.heal(memoryNode);
        long healed = System.nanoTime();
        long served = cluster.awaitServing(Duration.ofSeconds(90));
        cluster.log(String.format("the index serves again %.1f s after the cut healed", (served - healed) / 1e9));
        cluster.awaitMembersUp(4);
        memoryNode.awaitLog("rejoins the cluster through", Duration.ofSeconds(5));
        cluster.awaitAllBack(Duration.ofSeconds(10));
        for (NodeProcess compute : computes) {
            assertFalse(compute.logText().contains("including myself"), compute + " was never downed");
        }
        mix.awaitMore(3_000, Duration.ofSeconds(90));

        // A compute node cut off: the memory node and the other compute node are the majority of the voters.
        Map<String, List<Integer>> before = cluster.awaitPartitions("before the second cut", ClusterHarness.settledOver(2),
                Duration.ofSeconds(60));
        assertFalse(before.get(isolated.name()).isEmpty(), "the node to cut off holds partitions: " + before);
        cluster.cut(isolated);
        cut = System.nanoTime();
        cluster.awaitNotMember(isolated, Duration.ofSeconds(60));
        served = cluster.awaitServing(Duration.ofSeconds(90));
        cluster.log(String.format("every partition serves again %.1f s after the compute node's cut", (served - cut) / 1e9));
        memoryNode.awaitLog("was downed: its fabric connections are closed", Duration.ofSeconds(10));
        assertTrue(survivor.isAlive() && cluster.isMember(survivor), "the majority side stays");
        Map<String, List<Integer>> after = cluster.awaitPartitions("after the cut", ClusterHarness.balancedOver(1), Duration.ofSeconds(60));
        assertEquals(ClusterHarness.PARTITIONS, after.get(survivor.name()).size(), "the survivor holds every partition: " + after);
        cluster.heal(isolated);
        mix.awaitMore(5_000, Duration.ofSeconds(90));
        mix.stop();
        cluster.log("mix: " + mix.summary() + "; e.g. " + mix.failures());
        assertFalse(cluster.isMember(isolated), "the cut compute node does not come back by itself: it was downed");
        cluster.log("verified: " + mix.assertNoAcknowledgedWriteLost(KEYS));
    }
}
