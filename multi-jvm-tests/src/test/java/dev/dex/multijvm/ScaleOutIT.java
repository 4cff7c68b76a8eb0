package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.rdma.RemoteMemory;

/**
 * Scale-out under load: while the client runs a write-intensive mix, a third compute JVM joins and
 * sharding moves partitions to it; each moved partition writes its dirty pages back on the old node
 * (logged, with its handoff time) and starts cold on the new one. No operation fails for good (the client
 * retries {@code NOT_HELD} and timed-out batches, as documented in {@code DexClient}), every read during the
 * mix returns a value the key may hold, and afterwards every key holds its last acknowledged value.
 */
class ScaleOutIT {
    private static final long KEYS = 20_000;

    @RegisterExtension
    // On tcp, the fabric across hosts: the memory node serves its region over loopback TCP, and no node JVM shares memory
    // with another. A join on shm is exercised by CrashDuringRebalanceIT, and in-process by the demo (DexCliTest).
    final ClusterHarness cluster = ClusterHarness.tcp("dex.tree.partitions=16");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aJoiningComputeNodeTakesPartitionsUnderWritesWithoutLosingAny() throws Exception {
        cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, KEYS);
        List<NodeProcess> first = cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);

        WriteMix mix = cluster.closeAfter(new WriteMix(client, KEYS, 50, 64));
        mix.start(7);
        mix.awaitMore(5_000, Duration.ofSeconds(60));
        cluster.awaitPartitions("before the join", ClusterHarness.balancedOver(2), Duration.ofSeconds(60));

        // Handoffs of the first rebalance (sharding may give every partition to one node first) do not count.
        int[] earlier = {Handoffs.of(first.get(0)).size(), Handoffs.of(first.get(1)).size()};
        long joined = System.nanoTime();
        cluster.startComputeNode("compute-2");
        cluster.awaitMembersUp(5);
        cluster.awaitComputeNodes(3);
        Map<String, List<Integer>> after = cluster.awaitPartitions("after the join", ClusterHarness.balancedOver(3),
                Duration.ofSeconds(90));
        cluster.log(String.format("compute-2 holds %d partitions %.1f s after it was started", after.get("compute-2").size(),
                (System.nanoTime() - joined) / 1e9));
        mix.awaitMore(5_000, Duration.ofSeconds(60));
        mix.stop();
        cluster.log("mix: " + mix.summary());

        List<Handoffs.Handoff> handoffs = new ArrayList<>();
        for (int i = 0; i < first.size(); i++) {
            handoffs.addAll(Handoffs.since(first.get(i), earlier[i]));
        }
        handoffs.forEach(h -> cluster.log("handoff " + h));
        Set<Integer> handedOff = new TreeSet<>();
        handoffs.forEach(h -> handedOff.add(h.partition()));
        assertTrue(handedOff.containsAll(after.get("compute-2")),
                "every partition compute-2 holds was handed off by compute-0 or compute-1: " + handedOff + " vs " + after);

        cluster.log("verified: " + mix.assertNothingLost(KEYS));
    }
}
