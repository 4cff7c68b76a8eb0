package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;

/**
 * Two memory JVMs (servers 0 and 1) with M = 1: the bulk load deals level-1 subtrees to both servers round
 * robin, with every node full so that inserts split leaves and level-1 nodes at once, and each compute
 * node must place a split's new node on the server of its level-1 subtree. After a mixed workload and a
 * graceful stop of both compute nodes (their partitions' dirty pages written back), the tree in remote
 * memory, read by this JVM over the shm fabric, passes {@link TreeValidator} (placement included), holds
 * exactly the model's entries, and has nodes on both servers.
 */
class TwoMemoryNodesIT {
    private static final long KEYS = 50_000;

    @RegisterExtension
    final ClusterHarness cluster = new ClusterHarness("dex.tree.partitions=16", "dex.tree.subtree-level=1");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void subtreesStayOnTheirServerThroughSplitsAndTheTreeValidatesAfterAGracefulStop() throws Exception {
        cluster.startMemoryNode(0);
        cluster.startMemoryNode(1);
        RemoteMemory memory = cluster.awaitFormatted(0, 1);
        BulkLoader.Result loaded = cluster.bulkLoad(memory, KEYS, 1.0);
        TreeValidator.Report afterLoad = TreeValidator.validate(memory);
        cluster.log("after the load: nodes per server " + afterLoad.nodesPerServer());
        assertEquals(Set.of(0, 1), afterLoad.nodesPerServer().keySet(), "the load put level-1 subtrees on both servers");

        List<NodeProcess> computes = cluster.startComputeNodes(List.of("compute-0", "compute-1"), "--memory-nodes", "2");
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(5);
        cluster.awaitComputeNodes(2);

        ModelMix mix = new ModelMix(client, KEYS);
        ModelMix.Result result = mix.run(20_000, 64, 5_000, 17);
        cluster.log(String.format("20,000 operations: %,d gets, %,d puts, %,d deletes, %d scans returning %,d entries;"
                + " %d disagreed with the model", result.gets(), result.puts(), result.deletes(), result.scans(),
                result.scannedEntries(), result.mismatches()));
        assertEquals(0, result.mismatches(), "replies that disagree with the model: " + result.examples());
        Map<String, List<Integer>> held = cluster.awaitPartitions("before the stop", ClusterHarness.balancedOver(2),
                Duration.ofSeconds(60));

        for (int i = computes.size() - 1; i >= 0; i--) {
            NodeProcess node = computes.get(i);
            int earlier = Handoffs.of(node).size();
            assertTrue(node.stopGracefully(Duration.ofSeconds(60)), node + " exits within 60 s of SIGTERM");
            Set<Integer> handedOff = new TreeSet<>();
            Handoffs.since(node, earlier).forEach(h -> handedOff.add(h.partition()));
            cluster.log(node + " stopped; handed off " + handedOff);
            assertTrue(handedOff.containsAll(held.get(node.name())), node + " wrote back every partition it held: held "
                    + held.get(node.name()) + ", handed off " + handedOff);
            cluster.awaitMembersUp(3 + i);
        }

        TreeMap<Long, Long> model = mix.model();
        Iterator<Map.Entry<Long, Long>> expected = model.entrySet().iterator();
        AtomicLong differences = new AtomicLong();
        StringBuilder first = new StringBuilder();
        TreeValidator.Report report = TreeValidator.validate(memory, (key, value) -> {
            Map.Entry<Long, Long> next = expected.hasNext() ? expected.next() : null;
            if (next == null || next.getKey() != key || next.getValue() != value) {
                if (differences.getAndIncrement() == 0) {
                    first.append("entry (").append(key).append(", ").append(value).append(") where the model has ").append(next);
                }
            }
        });
        cluster.log("after the stop: height " + report.height() + ", nodes per level " + Arrays.toString(report.nodesPerLevel())
                + ", nodes per server " + report.nodesPerServer() + ", " + report.entries() + " entries");
        assertEquals(0, differences.get(), "remote memory holds the model's entries; first difference: " + first);
        assertEquals(model.size(), report.entries(), "remote memory holds as many entries as the model");
        assertTrue(report.nodesPerLevel()[0] > loaded.leaves(), "inserts split leaves: " + loaded.leaves() + " leaves loaded, "
                + report.nodesPerLevel()[0] + " now");
        assertEquals(Set.of(0, 1), report.nodesPerServer().keySet(), "nodes on both memory servers");
    }
}
