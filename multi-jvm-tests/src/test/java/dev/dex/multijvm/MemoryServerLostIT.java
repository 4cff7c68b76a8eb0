package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.ComputeNode;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;

/**
 * A memory server lost for good, with one replica (docs/replication.md): two memory nodes over tcp without a region
 * directory, the tree's level-1 subtrees dealt to both, and memory node 1 killed. Its part of the index is gone. What
 * must hold: no operation hangs, every one that fails says which memory server it needed, none returns a value its key
 * never had, the keys of held partitions whose nodes live on memory server 0 (or in the caches) keep serving, those
 * whose redo log is there too take writes, and every compute node reports server 1 out (not ready).
 * {@link ReplicaGroupLostIT} does the same with replica groups.
 */
class MemoryServerLostIT {
    static final long KEYS = 20_000;

    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcp("dex.tree.partitions=16", "dex.tree.subtree-level=1",
            "pekko.cluster.split-brain-resolver.stable-after=2s");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void keysOfTheLostServerFailWithAClearErrorAndTheOthersKeepServing() throws Exception {
        cluster.startMemoryNode(0);
        NodeProcess lost = cluster.startMemoryNode(1);
        RemoteMemory memory = cluster.awaitFormatted(0, 1);
        cluster.bulkLoad(memory, KEYS, 1.0);
        assertEquals(Set.of(0, 1), TreeValidator.validate(memory).nodesPerServer().keySet(), "nodes on both servers");
        cluster.startComputeNodes(List.of("compute-0", "compute-1"), "--memory-nodes", "2");
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(5);
        cluster.awaitComputeNodes(2);
        // Every partition held before the loss: acquiring one registers its owner epoch on every memory server, which
        // cannot be done once one is lost (docs/replication.md, "A memory server is lost").
        cluster.awaitPartitions("before the loss", ClusterHarness.balancedOver(2), Duration.ofSeconds(60));

        lost.kill();
        cluster.log(lost + " killed: memory server 1 is lost");
        cluster.awaitNotMember(lost, Duration.ofSeconds(60));
        assertOutAndTheOthersServe(cluster, client, 1, "memory server 1 is lost: its only replica");
    }

    /**
     * Waits until every compute node reports memory server {@code lost} out (and, when {@code lostSays} is given, lost with
     * a reason that starts with it), then reads every seventh loaded key and writes those it read: each operation is
     * answered, a failure names server {@code lost} (some of them saying {@code lostSays}), a read returns the loaded value, and some of each kind succeed (keys
     * whose tree nodes and redo log live on the other server), a write then read back with its new value.
     */
    static void assertOutAndTheOthersServe(ClusterHarness cluster, DexClientApi client, int lost, String lostSays)
            throws Exception {
        String named = "memory server " + lost;
        List<ComputeNode.Status> statuses = cluster.statuses();
        long waitUntil = System.nanoTime() + Duration.ofSeconds(5).toNanos(); // health ticks run every second
        while (!statuses.stream().allMatch(s -> s.memoryServersOut().equals(List.of(lost))
                && (lostSays == null || s.memoryServersLost().size() == 1)) && System.nanoTime() < waitUntil) {
            Thread.sleep(200);
            statuses = cluster.statuses();
        }
        assertEquals(2, statuses.size());
        for (ComputeNode.Status status : statuses) {
            assertEquals(List.of(lost), status.memoryServersOut(), named + " reported out: " + status);
            if (lostSays != null) {
                assertEquals(1, status.memoryServersLost().size(), named + " reported lost: " + status);
                assertTrue(status.memoryServersLost().get(0).startsWith(lostSays), status.memoryServersLost().get(0));
            }
        }

        long started = System.nanoTime();
        List<CompletableFuture<OptionalLong>> gets = new ArrayList<>();
        List<Long> keys = new ArrayList<>();
        for (long i = 1; i <= KEYS; i += 7) {
            keys.add(ClusterHarness.key(i));
            gets.add(client.get(ClusterHarness.key(i)).toCompletableFuture());
        }
        List<Long> read = new ArrayList<>();
        int failed = 0;
        int saying = 0;
        List<String> unclear = new ArrayList<>();
        for (int i = 0; i < gets.size(); i++) {
            try {
                OptionalLong value = gets.get(i).get(90, TimeUnit.SECONDS);
                assertEquals(OptionalLong.of(ClusterHarness.loadedValue(keys.get(i))), value, "key " + keys.get(i));
                read.add(keys.get(i));
            } catch (ExecutionException e) {
                failed++;
                String message = String.valueOf(e.getCause().getMessage());
                saying += lostSays != null && message.contains(lostSays) ? 1 : 0;
                if (!message.contains(named) && unclear.size() < 5) {
                    unclear.add("get " + keys.get(i) + ": " + message);
                }
            }
        }
        cluster.log(String.format("%d gets after the loss: %d served with their value, %d failed, all answered within %.1f s",
                gets.size(), read.size(), failed, (System.nanoTime() - started) / 1e9));
        assertTrue(unclear.isEmpty(), "every failure names the memory server it needed: " + unclear);
        assertTrue(read.size() > 0, "keys whose nodes are on the other memory server keep serving");
        assertTrue(failed > 0, "keys whose nodes are on the lost server fail");
        assertTrue(lostSays == null || saying > 0, failed + " gets failed, none saying '" + lostSays + "'");

        started = System.nanoTime();
        List<CompletableFuture<?>> puts = new ArrayList<>();
        for (long key : read) {
            puts.add(client.put(key, ClusterHarness.loadedValue(key) + 1).toCompletableFuture());
        }
        List<Long> written = new ArrayList<>();
        int refused = 0;
        for (int i = 0; i < puts.size(); i++) {
            try {
                puts.get(i).get(90, TimeUnit.SECONDS);
                written.add(read.get(i));
            } catch (ExecutionException e) {
                refused++;
                String message = String.valueOf(e.getCause().getMessage());
                if (!message.contains(named) && unclear.size() < 5) {
                    unclear.add("put " + read.get(i) + ": " + message);
                }
            }
        }
        cluster.log(String.format("%d puts of keys read: %d written, %d failed (their redo log is on the lost server), all"
                + " answered within %.1f s", puts.size(), written.size(), refused, (System.nanoTime() - started) / 1e9));
        assertTrue(unclear.isEmpty(), "every failure names the memory server it needed: " + unclear);
        assertTrue(written.size() > 0, "keys whose nodes and redo log are on the other memory server take writes");
        for (long key : written) {
            assertEquals(OptionalLong.of(ClusterHarness.loadedValue(key) + 1), client.get(key).toCompletableFuture().get(90, TimeUnit.SECONDS), "key " + key);
        }
    }
}
