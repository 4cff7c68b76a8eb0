package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.typesafe.config.ConfigFactory;

import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.Backoff;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.partition.LeaveDrain;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.RemoteMemory;

/**
 * Partitions split by load in a cluster (docs/partition-splits.md): a client's skewed writes make partition 0 hot; its
 * owner splits it ({@code dex.compute.split}) while the client keeps writing; the client, answered {@code MOVED}, reads
 * the new table and sends the keys where they lie now; sharding places the new partitions; every acknowledged write is
 * where the model says, and the table in remote memory has more partitions than it started with.
 */
@ExtendWith(LogCapturingExtension.class)
class SplitClusterTest {
    /** Partition 0 of 16 over a million keys holds 1 to 62,499. */
    private static final long HOT = 60_000;

    @Test
    void aHotPartitionSplitsUnderWritesAndNothingAcknowledgedIsLost() throws Exception {
        try (TestCluster cluster = new TestCluster(ConfigFactory.parseString(
                "dex.compute.split { interval = 1s, rate-factor = 2, min-rate = 200 }\ndex.compute.load-window = 1s"))) {
            cluster.memoryNode();
            ComputeNode.Settings settings = new ComputeNode.Settings(1, DexEngineSettings.dex(8L << 20), 2, Duration.ofSeconds(2),
                    Duration.ofSeconds(5), Backoff.DEFAULTS, RedoLogSettings.ON, Duration.ofSeconds(5), Duration.ofMillis(400),
                    Duration.ofSeconds(10), 1, LeaveDrain.Settings.DEFAULTS, Duration.ZERO);
            List<ActorSystem<Void>> computes = List.of(cluster.computeNode(settings, cluster.fabric),
                    cluster.computeNode(settings, cluster.fabric));
            DexClientApi client = cluster.client();
            cluster.awaitUp(Duration.ofSeconds(30));
            TreeMap<Long, Long> model = new TreeMap<>();
            SplittableRandom random = new SplittableRandom(7);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            // Rounds of 400 puts, 9 in 10 to keys of partition 0: on until two splits were made, and 20 rounds after.
            int after = -1;
            for (int rounds = 0; after != 0; rounds++) {
                assertTrue(System.nanoTime() < deadline, "partition 0 split twice within 60 s: " + counter(computes, SPLITS) + " splits");
                round(client, random, 400, rounds, model);
                if (after < 0 && counter(computes, SPLITS) >= 2) {
                    after = 20;
                } else if (after > 0) {
                    after--;
                }
            }
            TestCluster.verify(client, model);
            RemoteMemory admin = cluster.fabric.connect(0);
            PartitionTable table = PartitionTable.load(admin);
            assertTrue(table.count() >= TestCluster.PARTITIONS + 2, "the stored table has the new partitions: " + table);
            assertTrue(table.upperInclusive(0) < HOT, "partition 0 was narrowed: " + table);
            int holders = 0;
            for (ActorSystem<Void> compute : computes) {
                holders += served(compute, table) > 0 ? 1 : 0;
            }
            assertEquals(2, holders, "both compute nodes serve partitions of the new table");
        }
    }

    /**
     * Partitions split, then merged back once cold, on one compute node (so that neighbours share an owner): the table
     * returns to min-partitions while the client writes on; the ids merged away are taken again by the next splits, and
     * the entities left behind for them let the new partitions be acquired. Every acknowledged write is where the model
     * says throughout.
     */
    @Test
    void coldPartitionsMergeBackUnderWritesAndSplitsTakeTheirIdsAgain() throws Exception {
        try (TestCluster cluster = new TestCluster(ConfigFactory.parseString("dex.compute.split { interval = 1s, rate-factor = 2,"
                + " min-rate = 200, merge-below = 0.5, min-partitions = " + TestCluster.PARTITIONS + " }\ndex.compute.load-window = 1s"))) {
            cluster.memoryNode();
            ComputeNode.Settings settings = new ComputeNode.Settings(1, DexEngineSettings.dex(8L << 20), 2, Duration.ofSeconds(2),
                    Duration.ofSeconds(5), Backoff.DEFAULTS, RedoLogSettings.ON, Duration.ofSeconds(5), Duration.ofMillis(400),
                    Duration.ofSeconds(10), 1, LeaveDrain.Settings.DEFAULTS, Duration.ZERO);
            List<ActorSystem<Void>> computes = List.of(cluster.computeNode(settings, cluster.fabric));
            DexClientApi client = cluster.client();
            cluster.awaitUp(Duration.ofSeconds(30));
            RemoteMemory admin = cluster.fabric.connect(0);
            TreeMap<Long, Long> model = new TreeMap<>();
            SplittableRandom random = new SplittableRandom(11);
            int rounds = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (counter(computes, SPLITS) < 2) {
                assertTrue(System.nanoTime() < deadline, "partition 0 split twice within 60 s");
                round(client, random, 400, rounds++, model);
            }
            int most = PartitionTable.load(admin).count();
            assertTrue(most >= TestCluster.PARTITIONS + 2, "split: " + most);
            // Quiet: 20 puts every 100 ms, some 200 a second over 18 partitions, every pair below 100 (0.5 of min-rate).
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (PartitionTable.load(admin).count() > TestCluster.PARTITIONS) {
                assertTrue(System.nanoTime() < deadline, "merged back to " + TestCluster.PARTITIONS + " within 60 s: "
                        + PartitionTable.load(admin));
                round(client, random, 20, rounds++, model);
                Thread.sleep(100);
            }
            assertTrue(counter(computes, MERGES) >= most - TestCluster.PARTITIONS, "merges counted on /metrics");
            for (int i = 0; i < 20; i++) {
                round(client, random, 20, rounds++, model);
                Thread.sleep(100);
            }
            assertEquals(TestCluster.PARTITIONS, PartitionTable.load(admin).count(), "no merge below min-partitions");
            TestCluster.verify(client, model);
            // Hot again: the next split takes the lowest free id, one merged away, and its new partition is served.
            PartitionTable merged = PartitionTable.load(admin);
            int reused = merged.freeId();
            assertTrue(reused < most, "an id merged away is free: " + merged);
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!PartitionTable.load(admin).exists(reused)) {
                assertTrue(System.nanoTime() < deadline, "split again within 60 s");
                round(client, random, 400, rounds++, model);
            }
            for (int i = 0; i < 10; i++) {
                round(client, random, 400, rounds++, model);
            }
            TestCluster.verify(client, model);
        }
    }

    /**
     * One round of {@code puts} puts, 9 in 10 to keys of partition 0, the rest anywhere; it waits for their answers, so
     * {@code model} holds every key's last acknowledged value (within a round a key's later put was sent later).
     */
    private static void round(DexClientApi client, SplittableRandom random, int puts, int round, TreeMap<Long, Long> model)
            throws Exception {
        List<CompletableFuture<Boolean>> writes = new ArrayList<>();
        TreeMap<Long, Long> sent = new TreeMap<>();
        for (int i = 0; i < puts; i++) {
            long key = random.nextInt(10) < 9 ? random.nextLong(1, HOT) : random.nextLong(1, TestCluster.KEY_RANGE);
            long value = (long) round * 1_000 + i;
            sent.put(key, value);
            writes.add(client.put(key, value).toCompletableFuture());
        }
        CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        model.putAll(sent);
    }

    private static final String SPLITS = "dex_partition_splits_total ";
    private static final String MERGES = "dex_partition_merges_total ";

    /** A counter summed over the compute nodes' scrapes. */
    private static double counter(List<ActorSystem<Void>> computes, String name) {
        double sum = 0;
        for (ActorSystem<Void> compute : computes) {
            for (String line : DexMetrics.get(compute).scrape().split("\n")) {
                if (line.startsWith(name)) {
                    sum += Double.parseDouble(line.substring(line.indexOf(' ') + 1));
                }
            }
        }
        return sum;
    }

    /** {@code dex_partitions_held} of a compute node's scrape. */
    private static double served(ActorSystem<Void> compute, PartitionTable table) {
        for (String line : DexMetrics.get(compute).scrape().split("\n")) {
            if (line.startsWith("dex_partitions_held ")) {
                return Double.parseDouble(line.substring(line.indexOf(' ') + 1));
            }
        }
        return 0;
    }
}
