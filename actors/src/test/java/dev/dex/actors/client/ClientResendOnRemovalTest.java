package dev.dex.actors.client;

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

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Down;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.TestCluster;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;
import dev.dex.actors.partition.PartitionRouter;
import dev.dex.core.partition.PartitionTable;

/**
 * A batch in flight to a compute node that stops answering and is then downed and removed is sent again as
 * soon as the client learns of the removal, and answered by the node its partition moves to, long before the
 * client's ask timeout (60 s here); and an operation nobody answers fails at the Java API's timeout. The compute
 * nodes are stand-ins: each hosts partition entities that answer
 * every operation with its own number as the value, or swallow every message once told to.
 */
@ExtendWith(LogCapturingExtension.class)
class ClientResendOnRemovalTest {
    private static final PartitionTable TABLE = PartitionTable.equalWidth(8, 0, 8_000);
    private static final Duration ASK_TIMEOUT = Duration.ofSeconds(60);

    /** Which stand-in node (1 or 2) started each partition's entity last. */
    private final Map<Integer, Long> hostOf = new ConcurrentHashMap<>();
    private final List<ActorSystem<?>> systems = new ArrayList<>();
    /** Each stand-in node's router, by the node's number. */
    private final Map<Long, org.apache.pekko.actor.typed.ActorRef<PartitionRouter.Command>> routers = new ConcurrentHashMap<>();

    private static Config config(String role) {
        return ConfigFactory.parseString("pekko.cluster.roles = [" + role + "]\n"
                        + "pekko.cluster.down-removal-margin = 500ms\n"
                        + "pekko.cluster.sharding.retry-interval = 500ms")
                .withFallback(ActorTestKit.applicationTestConfig());
    }

    /** Batches the stand-ins answer OVERLOADED before they answer normally again. */
    private final java.util.concurrent.atomic.AtomicInteger overloaded = new java.util.concurrent.atomic.AtomicInteger();

    /** A partition entity of stand-in node {@code node}: answers with the node's number, unless {@code mute}. */
    private Behavior<Partition.Command> entity(long node, int partition, AtomicBoolean mute) {
        hostOf.put(partition, node);
        return Behaviors.setup(context -> {
            String host = context.getSystem().address().toString();
            return Behaviors.receive(Partition.Command.class)
                    .onMessage(Partition.Execute.class, execute -> {
                        if (!mute.get()) {
                            boolean overload = overloaded.getAndUpdate(n -> Math.max(0, n - 1)) > 0;
                            List<Ops.Result> results = new ArrayList<>();
                            for (int i = 0; i < execute.ops().size(); i++) {
                                results.add(overload ? Ops.Result.error(Ops.OVERLOADED, "busy") : Ops.Result.of(true, node));
                            }
                            execute.replyTo().tell(new Ops.Results(execute.batch(), results, host));
                        }
                        return Behaviors.same();
                    })
                    // As a real partition, it stops when sharding hands it off: a rebalance would otherwise wait for the
                    // handoff timeout while the partition's batches are held.
                    .onMessage(Partition.Handoff.class, handoff -> Behaviors.stopped())
                    .build();
        });
    }

    private ActorSystem<Void> standIn(long node, AtomicBoolean mute, ActorSystem<?> seed) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            org.apache.pekko.actor.typed.ActorRef<Partition.Command> region = ClusterSharding.get(context.getSystem()).init(
                    Entity.of(Partition.TYPE_KEY, entity -> entity(node, Integer.parseInt(entity.getEntityId()), mute))
                            .withMessageExtractor(new Partition.IdExtractor())
                            .withStopMessage(Partition.Handoff.INSTANCE)
                            .withRole("compute"));
            // As a real compute node: the client bundles a partition's batches for this router once it answered.
            routers.put(node, context.spawn(PartitionRouter.create(region), "partition-router"));
            context.getSystem().receptionist().tell(Receptionist.register(ComputeNode.KEY,
                    context.spawn(Behaviors.receive(ComputeNode.Command.class)
                            .onMessage(ComputeNode.GetPartitionTable.class, get -> {
                                get.replyTo().tell(new ComputeNode.PartitionTableReply(TABLE.upperBounds(), null, 2));
                                return Behaviors.same();
                            })
                            .build(), "compute")));
            return Behaviors.empty();
        }), "dex", config("compute"));
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(seed == null ? system : seed).selfMember().address()));
        return system;
    }

    @Test
    void aBatchToADownedNodeIsSentAgainOnItsRemovalNotAfterTheAskTimeout() throws Exception {
        AtomicBoolean muteFirst = new AtomicBoolean();
        try {
            // The survivor starts first: it is the oldest and keeps the shard coordinator.
            ActorSystem<Void> survivor = standIn(2, new AtomicBoolean(), null);
            ActorSystem<Void> doomed = standIn(1, muteFirst, survivor);
            ActorSystem<DexClient.Command> clientSystem = ActorSystem.create(DexClient.create(ASK_TIMEOUT), "dex", config("client"));
            systems.add(clientSystem);
            Cluster.get(clientSystem).manager().tell(Join.create(Cluster.get(survivor).selfMember().address()));
            DexClientApi client = new DexClientApi(clientSystem, clientSystem, ASK_TIMEOUT.multipliedBy(2));
            TestCluster.awaitMembersUp(survivor, 3);

            // Every partition answers, so the client knows who served it, until one lands on the doomed node: its shard
            // region may register with the coordinator after the first allocations, and get shards by a rebalance.
            int partition = -1;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
            while (partition < 0 && System.nanoTime() < deadline) {
                for (int p = 0; p < TABLE.count(); p++) {
                    client.get(TABLE.upperInclusive(p)).toCompletableFuture().get(30, TimeUnit.SECONDS);
                }
                for (int p = 0; p < TABLE.count() && partition < 0; p++) {
                    if (hostOf.get(p) == 1) {
                        partition = p;
                    }
                }
                if (partition < 0) {
                    Thread.sleep(500);
                }
            }
            assertTrue(partition >= 0, "least-shard allocation gave the second node some partitions: " + hostOf);

            // Once more, so that the partition's batches now go through the doomed node's router.
            client.get(TABLE.upperInclusive(partition)).toCompletableFuture().get(30, TimeUnit.SECONDS);
            muteFirst.set(true);
            CompletableFuture<OptionalLong> lost = client.get(TABLE.upperInclusive(partition)).toCompletableFuture();
            // And enough more for a second batch in flight (a batch follows one in flight at 64 waiting).
            List<Long> more = new ArrayList<>();
            for (int i = 1; i <= DexClient.PIPELINED_BATCH + 6; i++) {
                more.add(TABLE.upperInclusive(partition) - i);
            }
            CompletableFuture<Map<Long, Long>> alsoLost = client.getAll(more).toCompletableFuture();
            Thread.sleep(500);
            assertFalse(lost.isDone(), "the muted node does not answer");
            long downed = System.nanoTime();
            Cluster.get(survivor).manager().tell(new Down(Cluster.get(doomed).selfMember().address()));

            OptionalLong answer = lost.get(30, TimeUnit.SECONDS);
            Map<Long, Long> others = alsoLost.get(30, TimeUnit.SECONDS);
            double seconds = (System.nanoTime() - downed) / 1e9;
            assertEquals(OptionalLong.of(2), answer, "the batch was answered by the node the partition moved to");
            assertEquals(more.size(), others.size());
            assertTrue(others.values().stream().allMatch(value -> value == 2), "every batch in flight went again to the survivor");
            assertTrue(seconds < ASK_TIMEOUT.toSeconds() / 4.0,
                    "answered " + seconds + " s after the downing, well before the " + ASK_TIMEOUT + " ask timeout");
            assertEquals(2L, hostOf.get(partition), "the partition's entity runs on the survivor");
        } finally {
            TestCluster.terminateAll(systems);
        }
    }

    /**
     * A leaving node's router answers a batch NOT_HELD without asking any partition: the client sends it again at once
     * through its sharding proxy, and its partition's next batches go that way too, until a partition answers from
     * where it is now. So the router refuses exactly one bundle; were the refusal taken like a moving partition's, the
     * client would send the batch back to that router every 100 ms until the Receptionist's listing dropped it.
     */
    @Test
    void aBatchRefusedByALeavingNodesRouterGoesAgainThroughShardingAtOnce() throws Exception {
        try {
            ActorSystem<Void> node = standIn(2, new AtomicBoolean(), null);
            ActorSystem<DexClient.Command> clientSystem = ActorSystem.create(DexClient.create(ASK_TIMEOUT), "dex", config("client"));
            systems.add(clientSystem);
            Cluster.get(clientSystem).manager().tell(Join.create(Cluster.get(node).selfMember().address()));
            DexClientApi client = new DexClientApi(clientSystem, clientSystem, ASK_TIMEOUT.multipliedBy(2));
            TestCluster.awaitMembersUp(node, 2);
            long key = TABLE.upperInclusive(3);
            // The first answer names the node; the second batch goes through its router.
            assertEquals(OptionalLong.of(2), client.get(key).toCompletableFuture().get(30, TimeUnit.SECONDS));
            assertEquals(OptionalLong.of(2), client.get(key).toCompletableFuture().get(30, TimeUnit.SECONDS));
            org.apache.pekko.actor.typed.ActorRef<PartitionRouter.Command> router = routers.get(2L);
            PartitionRouter.Stats before = routerStats(clientSystem, router);
            assertEquals(1, before.batches(), "the second batch went through the router");

            org.apache.pekko.actor.typed.javadsl.AskPattern.<PartitionRouter.Command, org.apache.pekko.Done>ask(router,
                    PartitionRouter.Leaving::new, Duration.ofSeconds(10), clientSystem.scheduler()).toCompletableFuture()
                    .get(10, TimeUnit.SECONDS);
            for (int i = 0; i < 5; i++) {
                assertEquals(OptionalLong.of(2), client.get(key).toCompletableFuture().get(30, TimeUnit.SECONDS),
                        "answered by the partition, reached through sharding");
            }
            PartitionRouter.Stats after = routerStats(clientSystem, router);
            assertEquals(before.bundles() + 1, after.bundles(), "the router refused one bundle; the rest went through sharding");
        } finally {
            TestCluster.terminateAll(systems);
        }
    }

    private static PartitionRouter.Stats routerStats(ActorSystem<?> system,
            org.apache.pekko.actor.typed.ActorRef<PartitionRouter.Command> router) throws Exception {
        return org.apache.pekko.actor.typed.javadsl.AskPattern.<PartitionRouter.Command, PartitionRouter.Stats>ask(router,
                PartitionRouter.GetStats::new, Duration.ofSeconds(10), system.scheduler()).toCompletableFuture().get(10, TimeUnit.SECONDS);
    }

    @Test
    void anOperationNoPartitionAnswersFailsAtItsTimeoutNotAfterEveryRetry() throws Exception {
        AtomicBoolean mute = new AtomicBoolean();
        Duration timeout = Duration.ofMillis(1_500);
        Duration batchTimeout = Duration.ofMillis(300);
        try {
            ActorSystem<Void> node = standIn(1, mute, null);
            ActorSystem<DexClient.Command> clientSystem = ActorSystem.create(DexClient.create(batchTimeout), "dex", config("client"));
            systems.add(clientSystem);
            Cluster.get(clientSystem).manager().tell(Join.create(Cluster.get(node).selfMember().address()));
            TestCluster.awaitMembersUp(node, 2);
            try (DexClientApi client = new DexClientApi(clientSystem, clientSystem, timeout)) {
                assertEquals(OptionalLong.of(1), client.get(5).toCompletableFuture().get(30, TimeUnit.SECONDS));
                overloaded.set(3);
                assertEquals(OptionalLong.of(1), client.get(6).toCompletableFuture().get(30, TimeUnit.SECONDS),
                        "an OVERLOADED answer is retried, not reported");
                assertEquals(0, overloaded.get(), "the partition answered OVERLOADED three times first");

                mute.set(true);
                long start = System.nanoTime();
                java.util.concurrent.ExecutionException failed = org.junit.jupiter.api.Assertions.assertThrows(
                        java.util.concurrent.ExecutionException.class, () -> client.get(5).toCompletableFuture().get(30, TimeUnit.SECONDS));
                double seconds = (System.nanoTime() - start) / 1e9;
                DexException cause = org.junit.jupiter.api.Assertions.assertInstanceOf(DexException.class, failed.getCause());
                assertTrue(cause.getMessage().contains("no answer within the request timeout")
                        && cause.getMessage().contains("no answer from partition"), cause.getMessage());
                assertTrue(seconds >= timeout.toMillis() / 1000.0 && seconds < timeout.plus(batchTimeout).toMillis() / 1000.0 + 2,
                        "failed " + seconds + " s after it was sent: at its timeout plus at most a batch timeout and a retry");

                // The client's actor system stops with an operation in flight: it fails, and so does any later one.
                CompletableFuture<OptionalLong> pending = client.get(7).toCompletableFuture();
                Thread.sleep(200);
                clientSystem.terminate();
                clientSystem.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
                for (CompletableFuture<OptionalLong> stopped : List.of(pending, client.get(8).toCompletableFuture())) {
                    java.util.concurrent.ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(
                            java.util.concurrent.ExecutionException.class, () -> stopped.get(5, TimeUnit.SECONDS));
                    assertTrue(e.getCause().getMessage().contains("the client actor stopped"), e.getCause().toString());
                }
            }
        } finally {
            TestCluster.terminateAll(systems);
        }
    }

}
