package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.actors.TestCluster;
import dev.dex.actors.partition.LocalTree;
import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;

/**
 * The lost update of a re-sent batch, end to end: a client's put is held on its way to the partition until the
 * client times it out and sends it again; the second attempt is applied and acknowledged, then the client puts a
 * newer value, and only then does the first attempt arrive. It must not bring the older value back. The compute
 * node is a stand-in whose entities run the real {@link Partition} on a local tree, behind a gate that can hold
 * one batch of writes ({@link GatedComputeNode}).
 */
@ExtendWith(LogCapturingExtension.class)
class ClientLateAttemptTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final Duration BATCH_TIMEOUT = Duration.ofMillis(400);

    private final List<ActorSystem<?>> systems = new ArrayList<>();
    private final GatedComputeNode gate = new GatedComputeNode();

    @Test
    void aFirstAttemptArrivingAfterTheClientsLaterPutIsRefused() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            ActorSystem<Void> node = gate.start(tree);
            systems.add(node);
            ActorSystem<DexClient.Command> clientSystem = ActorSystem.create(DexClient.create(BATCH_TIMEOUT), "dex",
                    GatedComputeNode.config("client"));
            systems.add(clientSystem);
            Cluster.get(clientSystem).manager().tell(Join.create(Cluster.get(node).selfMember().address()));
            TestCluster.awaitMembersUp(node, 2);
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(2) + 10);
            int partition = tree.table.partitionOf(key);
            try (DexClientApi client = new DexClientApi(clientSystem, clientSystem, Duration.ofSeconds(30))) {
                assertTrue(client.put(key, 1).toCompletableFuture().get(30, TimeUnit.SECONDS), "the key was loaded");

                gate.holdNextWrite.set(true);
                CompletableFuture<Boolean> second = client.put(key, 2).toCompletableFuture();
                assertTrue(second.get(30, TimeUnit.SECONDS), "acknowledged by the attempt sent after the timeout");
                Partition.Execute first = gate.held.get();
                assertNotNull(first, "the first attempt was held");
                assertTrue(client.put(key, 3).toCompletableFuture().get(30, TimeUnit.SECONDS));

                // The first attempt arrives now, answered to a probe of the test instead of the client.
                TestProbe<Ops.Results> probe = TestProbe.create(node);
                gate.entities.get(partition).tell(new Partition.Execute(first.partition(), first.batch(), first.client(), first.seq(),
                        first.epoch(), first.follows(), first.ops(), probe.getRef()));
                Ops.Result late = probe.receiveMessage(Duration.ofSeconds(10)).results().get(0);
                assertEquals(Ops.STALE, late.status(), late.toString());
                assertEquals(OptionalLong.of(3), client.get(key).toCompletableFuture().get(30, TimeUnit.SECONDS),
                        "the acknowledged later put stands");
                assertFalse(gate.holdNextWrite.get());
            }
        } finally {
            TestCluster.terminateAll(systems);
        }
    }

}
