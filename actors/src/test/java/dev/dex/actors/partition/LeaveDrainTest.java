package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.ShardCoordinator;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.typesafe.config.ConfigFactory;

import dev.dex.actors.CborSerializable;
import dev.dex.actors.TestCluster;

/**
 * A graceful leave hands the node's shards over a group per rebalance round ({@link LeaveDrain}, {@link ProbedRebalance}):
 * three real nodes in this JVM, with Pekko's sharding and coordinator; the youngest leaves (ActorSystem.terminate runs
 * its coordinated shutdown). Its shards stop in rounds of at most the group, each serves on the leaving node until its own
 * handoff and starts elsewhere only after it stopped there, and none is placed on the leaving node again. A coordinator
 * that never moves a draining node's shards (Pekko's own strategy, the fault) costs the drain's timeout, not a stuck
 * shutdown: the region's shutdown then hands the rest off together.
 */
@ExtendWith(LogCapturingExtension.class)
class LeaveDrainTest {
    private static final int SHARDS = 12;
    private static final int GROUP = 2;
    private static final EntityTypeKey<Message> KEY = EntityTypeKey.create(Message.class, "drained");

    /** What the test entities take. */
    public sealed interface Message extends CborSerializable permits Ping, Stop {
    }

    /** Answered with the address of the entity's node. */
    public record Ping(ActorRef<String> replyTo) implements Message {
    }

    /** The entities' stop message (a handoff). */
    public record Stop() implements Message {
    }

    /** When each shard's entity started and stopped, by node address and shard (nanoTime). */
    private static final Map<String, Long> STARTED = new ConcurrentHashMap<>();
    private static final Map<String, Long> STOPPED = new ConcurrentHashMap<>();

    @BeforeEach
    void forgetEarlierNodes() {
        STARTED.clear();
        STOPPED.clear();
    }

    private static Behavior<Message> entity(String shard) {
        return Behaviors.setup(context -> {
            String at = context.getSystem().address() + " " + shard;
            STARTED.put(at, System.nanoTime());
            return Behaviors.receive(Message.class)
                    .onMessage(Ping.class, ping -> {
                        ping.replyTo().tell(context.getSystem().address().toString());
                        return Behaviors.same();
                    })
                    .onMessage(Stop.class, stop -> Behaviors.stopped())
                    .onSignal(org.apache.pekko.actor.typed.PostStop.class, stopped -> {
                        STOPPED.put(at, System.nanoTime());
                        return Behaviors.same();
                    })
                    .build();
        });
    }

    /**
     * A node with a region of {@link #KEY} (entity id = shard id) and the leave's drain; {@code probed}: the coordinator's
     * strategy is {@link ProbedRebalance}, else Pekko's least-shard strategy, which knows nothing of drains.
     */
    private static ActorSystem<Void> node(boolean probed, Duration drainTimeout, List<ActorSystem<?>> systems, ActorSystem<?> seed) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            Entity<Message, ShardingEnvelope<Message>> entity = Entity.of(KEY, e -> entity(e.getEntityId()))
                    .withMessageExtractor(ShardTestNodes.<Message>shardPerEntity())
                    .withStopMessage(new Stop())
                    .withRole("compute");
            ClusterSharding.get(context.getSystem()).init(probed
                    ? entity.withAllocationStrategy(new ProbedRebalance(Duration.ofMillis(300),
                            ProbedRebalance.coordinatorPath(context.getSystem(), KEY.name()), GROUP))
                    : entity.withAllocationStrategy(ShardCoordinator.leastShardAllocationStrategy(20, 0.5)));
            LeaveDrain.onShutdown(context.getSystem(), KEY, new LeaveDrain.Settings(GROUP, drainTimeout), null,
                    () -> CompletableFuture.completedFuture(Done.getInstance()));
            return Behaviors.empty();
        }), "dex", ConfigFactory.parseString("""
                pekko.cluster.roles = [compute]
                pekko.cluster.sharding.rebalance-interval = 1s
                pekko.cluster.sharding.least-shard-allocation-strategy.rebalance-absolute-limit = 20
                pekko.coordinated-shutdown.phases.before-service-unbind.timeout = 30s
                """).withFallback(ActorTestKit.applicationTestConfig()));
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(seed == null ? system : seed).selfMember().address()));
        return system;
    }

    private static String ping(ActorSystem<?> from, int shard, Duration timeout) {
        return ShardTestNodes.ping(from, KEY, shard, Ping::new, timeout);
    }

    /** Every shard's node once each answers and the leaving node holds at least a third of them. */
    private static Map<Integer, String> awaitSpread(ActorSystem<?> from, String leaving) throws InterruptedException {
        return ShardTestNodes.awaitSpread(SHARDS, shard -> ping(from, shard, Duration.ofSeconds(5)), leaving,
                onLeaving -> onLeaving >= SHARDS / 3);
    }

    private static List<Integer> held(Map<Integer, String> hosts, String node) {
        List<Integer> held = new ArrayList<>();
        hosts.forEach((shard, host) -> {
            if (host.equals(node)) {
                held.add(shard);
            }
        });
        return held;
    }

    @Test
    void aLeavingNodeHandsItsShardsOverAGroupPerRoundEachServingThereUntilItsOwnHandoff() throws Exception {
        List<ActorSystem<?>> systems = new ArrayList<>();
        try {
            ActorSystem<Void> oldest = node(true, Duration.ofSeconds(20), systems, null);
            node(true, Duration.ofSeconds(20), systems, oldest);
            ActorSystem<Void> leaving = node(true, Duration.ofSeconds(20), systems, oldest);
            TestCluster.awaitMembersUp(oldest, 3);
            String leavingAddress = leaving.address().toString();
            List<Integer> itsShards = held(awaitSpread(oldest, leavingAddress), leavingAddress);

            long left = System.nanoTime();
            leaving.terminate();
            // While the first group moves, a shard of the leaving node that is not in it still answers from there; and a
            // shard handed off is placed again at once (asked for), never on the leaving node, the region with fewest.
            boolean servedThereMeanwhile = false;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!servedThereMeanwhile && System.nanoTime() < deadline) {
                List<Integer> stopped = itsShards.stream().filter(s -> STOPPED.containsKey(leavingAddress + " " + s)).toList();
                for (int moved : stopped) {
                    ping(oldest, moved, Duration.ofMillis(500));
                }
                if (!stopped.isEmpty() && stopped.size() < itsShards.size()) {
                    int notYet = itsShards.stream().filter(s -> !stopped.contains(s)).findFirst().orElseThrow();
                    servedThereMeanwhile = leavingAddress.equals(ping(oldest, notYet, Duration.ofMillis(500)));
                }
                Thread.sleep(20);
            }
            assertTrue(servedThereMeanwhile, "a shard of the leaving node answered from it after the first handoff");
            leaving.getWhenTerminated().toCompletableFuture().get(40, TimeUnit.SECONDS);
            System.out.printf("the leaving node stopped %.1f s after its shutdown began%n", (System.nanoTime() - left) / 1e9);

            for (int shard : itsShards) {
                String host = null;
                while (host == null && System.nanoTime() - left < TimeUnit.SECONDS.toNanos(60)) {
                    host = ping(oldest, shard, Duration.ofSeconds(1));
                }
                assertFalse(host == null, "shard " + shard + " answers after the leave");
                assertNotEquals(leavingAddress, host, "shard " + shard + " answered from the node that left");
                Long stoppedThere = STOPPED.get(leavingAddress + " " + shard);
                Long startedHere = STARTED.get(host + " " + shard);
                assertFalse(stoppedThere == null || startedHere == null, "shard " + shard + ": stopped " + stoppedThere
                        + ", started again " + startedHere);
                assertTrue(startedHere > stoppedThere, "shard " + shard + " started on " + host + " before its entity on the"
                        + " leaving node stopped");
                assertTrue(STARTED.get(leavingAddress + " " + shard) < left, "shard " + shard + " was placed on the leaving node"
                        + " again");
            }
            // The stops come in rounds a rebalance interval (1 s) apart: never more than the group within 250 ms (all at
            // once, they stop within a few ms of each other), and the first and the last at least a round apart.
            List<Long> stops = itsShards.stream().map(s -> STOPPED.get(leavingAddress + " " + s)).sorted().toList();
            List<Long> offsets = stops.stream().map(stop -> (stop - stops.get(0)) / 1_000_000).toList();
            System.out.println("the leaving node's shards stopped at (ms after the first): " + offsets);
            for (int i = 0; i + GROUP < stops.size(); i++) {
                assertTrue(stops.get(i + GROUP) - stops.get(i) > TimeUnit.MILLISECONDS.toNanos(250), "more than " + GROUP
                        + " shards stopped within 250 ms: " + offsets);
            }
            assertTrue(stops.get(stops.size() - 1) - stops.get(0) > TimeUnit.MILLISECONDS.toNanos(700), "one round: " + offsets);
        } finally {
            stopAll(systems);
        }
    }

    @Test
    void aDrainThatNeverProgressesEndsAtItsTimeoutAndTheRegionsShutdownHandsTheRestOff() throws Exception {
        List<ActorSystem<?>> systems = new ArrayList<>();
        try {
            // Pekko's own strategy on the coordinator (the oldest node): it never moves a draining node's shards.
            ActorSystem<Void> oldest = node(false, Duration.ofSeconds(2), systems, null);
            ActorSystem<Void> leaving = node(false, Duration.ofSeconds(2), systems, oldest);
            TestCluster.awaitMembersUp(oldest, 2);
            String leavingAddress = leaving.address().toString();
            List<Integer> itsShards = held(awaitSpread(oldest, leavingAddress), leavingAddress);

            long left = System.nanoTime();
            leaving.terminate();
            leaving.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
            double seconds = (System.nanoTime() - left) / 1e9;
            long firstStop = itsShards.stream().mapToLong(s -> STOPPED.get(leavingAddress + " " + s)).min().orElseThrow();
            assertTrue(firstStop - left >= TimeUnit.SECONDS.toNanos(2), "nothing moved before the drain's 2 s timeout: the"
                    + " first stop came " + (firstStop - left) / 1_000_000 + " ms in");
            System.out.printf("the leaving node stopped %.1f s after its shutdown began (a drain timeout of 2 s)%n", seconds);
            for (int shard : itsShards) {
                String host = null;
                while (host == null && System.nanoTime() - left < TimeUnit.SECONDS.toNanos(40)) {
                    host = ping(oldest, shard, Duration.ofSeconds(1));
                }
                assertEquals(oldest.address().toString(), host, "shard " + shard + " answers from the node that stays");
            }
        } finally {
            stopAll(systems);
        }
    }

    @Test
    void theDrainIsSkippedWhenTheWholeClusterStopsWhenTheGroupIsZeroAndWhenNoOtherNodeCanTakeThePartitions() throws Exception {
        List<ActorSystem<?>> systems = new ArrayList<>();
        try {
            ActorSystem<Void> alone = node(true, Duration.ofSeconds(20), systems, null);
            TestCluster.awaitMembersUp(alone, 1);
            LeaveDrain.Settings settings = new LeaveDrain.Settings(GROUP, Duration.ofSeconds(20));
            assertEquals(Optional.of("no other compute node is up and not leaving"), LeaveDrain.skipped(alone, settings, Optional.empty()));
            ActorSystem<Void> other = node(true, Duration.ofSeconds(20), systems, alone);
            TestCluster.awaitMembersUp(alone, 2);
            TestCluster.awaitMembersUp(other, 2);
            assertEquals(Optional.empty(), LeaveDrain.skipped(alone, settings, Optional.empty()), "the other node can take them");
            assertEquals(Optional.of("the whole cluster stops"), LeaveDrain.skipped(alone, settings,
                    Optional.of(LeaveDrain.CLUSTER_STOP)));
            assertEquals(Optional.of("dex.compute.leave.handoff-group is 0"), LeaveDrain.skipped(alone,
                    new LeaveDrain.Settings(0, Duration.ofSeconds(20)), Optional.empty()));
            // A node that drains itself takes nothing: once the other lists itself draining, nowhere is left.
            LeaveDrain.drain(other, KEY, settings, null, Optional.empty());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (LeaveDrain.skipped(alone, settings, Optional.empty()).isEmpty()) {
                assertTrue(System.nanoTime() < deadline, "the other node's drain was not listed: " + LeaveDrain.draining(alone));
                Thread.sleep(50);
            }
            assertEquals(java.util.Set.of(other.address()), LeaveDrain.draining(alone));
            // And the whole cluster's stop ends at once (the demo's end): no drain waits.
            long stop = System.nanoTime();
            CoordinatedShutdown.get(alone).runAll(LeaveDrain.CLUSTER_STOP);
            alone.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
            assertTrue(System.nanoTime() - stop < TimeUnit.SECONDS.toNanos(15), "the stop did not wait for a drain");
        } finally {
            stopAll(systems);
        }
    }

    private static void stopAll(List<ActorSystem<?>> systems) throws Exception {
        ShardTestNodes.stopAll(systems);
    }
}
