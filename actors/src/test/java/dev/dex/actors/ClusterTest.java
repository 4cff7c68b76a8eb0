package dev.dex.actors;

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
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.partition.PartitionRouter;

/** A cluster of actor systems in one JVM: memory node, compute nodes, client. */
@ExtendWith(LogCapturingExtension.class)
class ClusterTest {

    @Test
    void dataSurvivesAComputeNodeJoiningAndTakingPartitions() throws Exception {
        try (TestCluster cluster = new TestCluster()) {
            cluster.memoryNode();
            ActorSystem<Void> first = cluster.computeNode(4L << 20);
            DexClientApi client = cluster.client();
            cluster.awaitUp(Duration.ofSeconds(30));

            TreeMap<Long, Long> model = new TreeMap<>();
            SplittableRandom random = new SplittableRandom(3);
            List<CompletableFuture<Boolean>> writes = new ArrayList<>();
            for (int i = 0; i < 3_000; i++) {
                long key = random.nextLong(1, TestCluster.KEY_RANGE);
                long value = random.nextLong();
                model.put(key, value);
                writes.add(client.put(key, value).toCompletableFuture());
            }
            CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
            TestCluster.verify(client, model);

            ActorSystem<Void> second = cluster.computeNode(4L << 20);
            cluster.awaitUp(Duration.ofSeconds(30));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            List<Integer> moved = List.of();
            while (System.nanoTime() < deadline) {
                // Sharding starts a moved partition's entity on its first message: keep traffic going.
                for (int p = 0; p < TestCluster.PARTITIONS; p++) {
                    client.get(p * (TestCluster.KEY_RANGE / TestCluster.PARTITIONS) + 1).toCompletableFuture().get(30, TimeUnit.SECONDS);
                }
                moved = held(second);
                if (!moved.isEmpty() && held(first).size() + moved.size() == TestCluster.PARTITIONS) {
                    break;
                }
                Thread.sleep(200);
            }
            assertTrue(!moved.isEmpty(), "partitions moved to the joining compute node");
            for (int p : moved) {
                assertTrue(!held(first).contains(p), "partition " + p + " is held by one compute node only");
            }
            for (int i = 0; i < 500; i++) {
                long key = random.nextLong(1, TestCluster.KEY_RANGE);
                model.put(key, (long) i);
                client.put(key, i).toCompletableFuture().get(30, TimeUnit.SECONDS);
            }
            TestCluster.verify(client, model);
            // The joining node's router reaches the client through the Receptionist's gossip: give it that time.
            long routedBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (routed(second) == 0 && System.nanoTime() < routedBy) {
                for (int p : moved) {
                    client.get(p * (TestCluster.KEY_RANGE / TestCluster.PARTITIONS) + 1).toCompletableFuture().get(30, TimeUnit.SECONDS);
                }
            }
            assertTrue(routed(first) > 0 && routed(second) > 0,
                    "once a partition answered, its batches go bundled through its compute node's router: " + routed(first)
                            + " and " + routed(second) + " batches");
        }
    }

    /** Batches the router of the compute node of {@code system} has taken. */
    private static long routed(ActorSystem<Void> system) throws Exception {
        org.apache.pekko.actor.typed.ActorRef<PartitionRouter.Command> router = findLocal(system, PartitionRouter.KEY);
        if (router == null) {
            return 0;
        }
        return AskPattern.<PartitionRouter.Command, PartitionRouter.Stats>ask(router, PartitionRouter.GetStats::new,
                Duration.ofSeconds(5), system.scheduler()).toCompletableFuture().get(10, TimeUnit.SECONDS).batches();
    }

    /** Partitions the compute node of {@code system} holds; empty until it has registered. */
    private static List<Integer> held(ActorSystem<Void> system) throws Exception {
        org.apache.pekko.actor.typed.ActorRef<ComputeNode.Command> node = findComputeNode(system);
        if (node == null) {
            return List.of();
        }
        ComputeNode.Status status = AskPattern.<ComputeNode.Command, ComputeNode.Status>ask(node, ComputeNode.GetStatus::new,
                Duration.ofSeconds(5), system.scheduler()).toCompletableFuture().get(10, TimeUnit.SECONDS);
        return status.partitionsHeld();
    }

    private static org.apache.pekko.actor.typed.ActorRef<ComputeNode.Command> findComputeNode(ActorSystem<Void> system) throws Exception {
        return findLocal(system, ComputeNode.KEY);
    }

    /** The service {@code key} registered by {@code system} itself; null until it has registered. */
    private static <T> org.apache.pekko.actor.typed.ActorRef<T> findLocal(ActorSystem<Void> system,
            org.apache.pekko.actor.typed.receptionist.ServiceKey<T> key) throws Exception {
        var listing = AskPattern.<org.apache.pekko.actor.typed.receptionist.Receptionist.Command,
                        org.apache.pekko.actor.typed.receptionist.Receptionist.Listing>ask(system.receptionist(),
                        r -> org.apache.pekko.actor.typed.receptionist.Receptionist.find(key, r),
                        Duration.ofSeconds(5), system.scheduler())
                .toCompletableFuture().get(10, TimeUnit.SECONDS);
        String self = system.address().toString();
        return listing.getServiceInstances(key).stream()
                .filter(ref -> ref.path().address().hasLocalScope() || ref.path().address().toString().equals(self))
                .findFirst().orElse(null);
    }
}
