package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

/**
 * The lost update of a re-sent batch, end to end: a client's put is held on its way to the partition until the
 * client times it out and sends it again; the second attempt is applied and acknowledged, then the client puts a
 * newer value, and only then does the first attempt arrive. It must not bring the older value back. The compute
 * node is a stand-in whose entities run the real {@link Partition} on a local tree, behind a gate that can hold
 * one batch of writes.
 */
@ExtendWith(LogCapturingExtension.class)
class ClientLateAttemptTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final Duration BATCH_TIMEOUT = Duration.ofMillis(400);

    private final List<ActorSystem<?>> systems = new ArrayList<>();
    /** The real entity behind each partition's gate. */
    private final Map<Integer, ActorRef<Partition.Command>> entities = new ConcurrentHashMap<>();
    /** While set, the next batch with a write is held instead of delivered. */
    private final AtomicBoolean holdNextWrite = new AtomicBoolean();
    private final AtomicReference<Partition.Execute> held = new AtomicReference<>();

    private static Config config(String role) {
        return ConfigFactory.parseString("pekko.cluster.roles = [" + role + "]").withFallback(ActorTestKit.applicationTestConfig());
    }

    private Behavior<Partition.Command> gate(int partition, EngineWorkers workers) {
        return Behaviors.setup(context -> {
            ActorRef<Partition.Command> entity = context.spawn(Partition.create(partition, workers), "partition");
            entities.put(partition, entity);
            return Behaviors.receive(Partition.Command.class)
                    .onMessage(Partition.Execute.class, execute -> {
                        if (execute.ops().stream().anyMatch(op -> op.kind() != Ops.GET) && holdNextWrite.compareAndSet(true, false)) {
                            held.set(execute);
                        } else {
                            entity.tell(execute);
                        }
                        return Behaviors.same();
                    })
                    .onMessage(Partition.Handoff.class, handoff -> Behaviors.stopped())
                    .build();
        });
    }

    private ActorSystem<Void> computeNode(LocalTree tree) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            ActorRef<Partition.Command> region = ClusterSharding.get(context.getSystem()).init(
                    Entity.of(Partition.TYPE_KEY, entity -> gate(Integer.parseInt(entity.getEntityId()), tree.workers))
                            .withMessageExtractor(new Partition.RangeExtractor(tree.table))
                            .withStopMessage(Partition.Handoff.INSTANCE)
                            .withRole("compute"));
            context.spawn(PartitionRouter.create(region), "partition-router");
            context.getSystem().receptionist().tell(Receptionist.register(ComputeNode.KEY,
                    context.spawn(Behaviors.receive(ComputeNode.Command.class)
                            .onMessage(ComputeNode.GetPartitionTable.class, get -> {
                                get.replyTo().tell(new ComputeNode.PartitionTableReply(tree.table.upperBounds()));
                                return Behaviors.same();
                            })
                            .build(), "compute")));
            return Behaviors.empty();
        }), "dex", config("compute"));
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(system).selfMember().address()));
        return system;
    }

    @Test
    void aFirstAttemptArrivingAfterTheClientsLaterPutIsRefused() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            ActorSystem<Void> node = computeNode(tree);
            ActorSystem<DexClient.Command> clientSystem = ActorSystem.create(DexClient.create(BATCH_TIMEOUT), "dex", config("client"));
            systems.add(clientSystem);
            Cluster.get(clientSystem).manager().tell(Join.create(Cluster.get(node).selfMember().address()));
            TestCluster.awaitMembersUp(node, 2);
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(2) + 10);
            int partition = tree.table.partitionOf(key);
            try (DexClientApi client = new DexClientApi(clientSystem, clientSystem, Duration.ofSeconds(30))) {
                assertTrue(client.put(key, 1).toCompletableFuture().get(30, TimeUnit.SECONDS), "the key was loaded");

                holdNextWrite.set(true);
                CompletableFuture<Boolean> second = client.put(key, 2).toCompletableFuture();
                assertTrue(second.get(30, TimeUnit.SECONDS), "acknowledged by the attempt sent after the timeout");
                Partition.Execute first = held.get();
                assertNotNull(first, "the first attempt was held");
                assertTrue(client.put(key, 3).toCompletableFuture().get(30, TimeUnit.SECONDS));

                // The first attempt arrives now, answered to a probe of the test instead of the client.
                TestProbe<Ops.Results> probe = TestProbe.create(node);
                entities.get(partition).tell(new Partition.Execute(first.routingKey(), first.batch(), first.client(), first.seq(),
                        first.epoch(), first.ops(), probe.getRef()));
                Ops.Result late = probe.receiveMessage(Duration.ofSeconds(10)).results().get(0);
                assertEquals(Ops.STALE, late.status(), late.toString());
                assertEquals(OptionalLong.of(3), client.get(key).toCompletableFuture().get(30, TimeUnit.SECONDS),
                        "the acknowledged later put stands");
                assertFalse(holdNextWrite.get());
            }
        } finally {
            TestCluster.terminateAll(systems);
        }
    }

}
