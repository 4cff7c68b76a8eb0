package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Down;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.CborSerializable;
import dev.dex.actors.TestCluster;

/**
 * A rebalance that moves a shard away from a region that is dead but not yet known to be (here: alive in the
 * cluster, its sharding stalled, so it never acknowledges the move; the probe, which would see that, is off) does
 * not wait for sharding's handoff timeout once the node is removed. Pekko 1.7's worker counts the removal as the
 * missing acknowledgement, hands the shard off to the dead region and waits for the termination it has just
 * consumed; {@link ProbedRebalance} tells the coordinator the region stopped at its next round, and the shard is
 * placed elsewhere within a rebalance interval (1 s here) instead of the handoff timeout (40 s here).
 * The cluster is real: three actor systems in this JVM, with Pekko's sharding and coordinator.
 */
@ExtendWith(LogCapturingExtension.class)
class MoveFromADeadRegionTest {
    private static final int SHARDS = 6;
    private static final Duration HANDOFF_TIMEOUT = Duration.ofSeconds(40);
    /**
     * Well under the handoff timeout; well over the removal (about 5 s: the downed node, in this JVM, shuts down and
     * is removed once unreachable), the removal margin and two rebalance intervals.
     */
    private static final Duration SERVES_AGAIN_WITHIN = Duration.ofSeconds(15);
    private static final EntityTypeKey<Message> KEY = EntityTypeKey.create(Message.class, "moved");

    /** What the test entities take: a ping, or sharding's stop. */
    public sealed interface Message extends CborSerializable permits Ping, Stop, Halt {
    }

    /** Answered with the address of the entity's node. */
    public record Ping(ActorRef<String> replyTo) implements Message {
    }

    /** The entities' stop message: they stop at once on a handoff, or after their node's stop delay. */
    public record Stop() implements Message {
    }

    /** An entity's own message: its delayed stop is due. */
    public record Halt() implements Message {
    }

    /** When each shard's entity started, by node address and shard (nanoTime). */
    private static final Map<String, Long> STARTED = new java.util.concurrent.ConcurrentHashMap<>();
    /** When each shard's entity stopped, by node address and shard (nanoTime). */
    private static final Map<String, Long> STOPPED = new java.util.concurrent.ConcurrentHashMap<>();
    /** How long an entity of a node takes to stop after its handoff's stop message, by node address and shard. */
    private static final Map<String, Duration> STOP_DELAY = new java.util.concurrent.ConcurrentHashMap<>();

    @org.junit.jupiter.api.BeforeEach
    void forgetEarlierNodes() {
        STARTED.clear();
        STOPPED.clear();
        STOP_DELAY.clear();
    }

    private static Config config(String extra) {
        return ConfigFactory.parseString("""
                pekko.cluster.roles = [compute]
                pekko.cluster.down-removal-margin = 200ms
                pekko.cluster.sharding.handoff-timeout = %d s
                pekko.cluster.sharding.least-shard-allocation-strategy.rebalance-absolute-limit = 20
                stalled-sharding {
                  type = Dispatcher
                  executor = thread-pool-executor
                  thread-pool-executor.fixed-pool-size = 1
                }
                %s
                """.formatted(HANDOFF_TIMEOUT.toSeconds(), extra)).withFallback(ActorTestKit.applicationTestConfig());
    }

    private static Behavior<Message> entity(String shard) {
        return Behaviors.setup(context -> Behaviors.withTimers(timers -> {
            String at = context.getSystem().address() + " " + shard;
            STARTED.put(at, System.nanoTime());
            return Behaviors.receive(Message.class)
                    .onMessage(Ping.class, ping -> {
                        ping.replyTo().tell(context.getSystem().address().toString());
                        return Behaviors.same();
                    })
                    .onMessage(Stop.class, stop -> {
                        Duration delay = STOP_DELAY.get(at);
                        if (delay == null) {
                            return Behaviors.stopped();
                        }
                        timers.startSingleTimer(new Halt(), delay); // as a partition that writes its pages back
                        return Behaviors.same();
                    })
                    .onMessage(Halt.class, halt -> Behaviors.stopped())
                    .onSignal(org.apache.pekko.actor.typed.PostStop.class, stopped -> {
                        STOPPED.put(at, System.nanoTime());
                        return Behaviors.same();
                    })
                    .build();
        }));
    }

    /** A node of the cluster with a region of {@link #KEY}: entity id = shard id, the probe off. */
    private static ActorSystem<Void> node(String extra, List<ActorSystem<?>> systems, ActorSystem<?> seed) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            ClusterSharding.get(context.getSystem()).init(Entity.of(KEY, entity -> entity(entity.getEntityId()))
                    .withMessageExtractor(ShardTestNodes.<Message>shardPerEntity())
                    .withStopMessage(new Stop())
                    .withAllocationStrategy(new ProbedRebalance(Duration.ZERO,
                            ProbedRebalance.coordinatorPath(context.getSystem(), KEY.name())))
                    .withRole("compute"));
            return Behaviors.empty();
        }), "dex", config(extra));
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(seed == null ? system : seed).selfMember().address()));
        return system;
    }

    /** The address of the node that answers shard {@code shard}'s ping within {@code timeout}, or null. */
    private static String ping(ActorSystem<?> from, int shard, Duration timeout) {
        return ShardTestNodes.ping(from, KEY, shard, Ping::new, timeout);
    }

    /**
     * A node that leaves gracefully hands each shard off in its own time; none of its shards starts on another node
     * before its entity there stopped, also when one of them stops long before the others (its new home is then
     * allocated while the others still hand off: the coordinator leaves the leaving region out of that allocation,
     * which must not pass for its departure).
     */
    @Test
    void aGracefulLeaveIsNotCutShortWhenOneOfItsShardsStopsFirst() throws Exception {
        List<ActorSystem<?>> systems = new ArrayList<>();
        try {
            ActorSystem<Void> oldest = node("", systems, null);
            ActorSystem<Void> leaving = node("", systems, oldest);
            TestCluster.awaitMembersUp(oldest, 2);
            String leavingAddress = leaving.address().toString();
            List<Integer> itsShards = new ArrayList<>();
            awaitSpread(oldest, leavingAddress).forEach((shard, host) -> {
                if (host.equals(leavingAddress)) {
                    itsShards.add(shard);
                }
            });
            // The first of its shards stops at once, the others 3 s after their stop message.
            for (int shard : itsShards.subList(1, itsShards.size())) {
                STOP_DELAY.put(leavingAddress + " " + shard, Duration.ofSeconds(3));
            }
            long left = System.nanoTime();
            leaving.terminate(); // coordinated shutdown: the region hands every shard off, then the node leaves
            // Ask for every one of its shards meanwhile, so that each is placed as soon as the coordinator would.
            // Until its handoff, a shard answers from the leaving node.
            for (int shard : itsShards) {
                String host = null;
                while (!oldest.address().toString().equals(host) && System.nanoTime() - left < TimeUnit.SECONDS.toNanos(20)) {
                    host = ping(oldest, shard, Duration.ofMillis(500));
                }
                assertEquals(oldest.address().toString(), host, "shard " + shard + " answered from the node that stays");
            }
            for (int shard : itsShards) {
                Long stoppedThere = STOPPED.get(leavingAddress + " " + shard);
                Long startedHere = STARTED.get(oldest.address() + " " + shard);
                assertFalse(stoppedThere == null || startedHere == null, "shard " + shard + ": stopped " + stoppedThere
                        + ", started again " + startedHere);
                assertTrue(startedHere > stoppedThere, "shard " + shard + " started on the staying node "
                        + (stoppedThere - startedHere) / 1_000_000 + " ms before its entity on the leaving node stopped");
            }
        } finally {
            stopAll(systems);
        }
    }

    @Test
    void aMoveAwayFromARemovedRegionIsDoneAtTheNextRoundNotAtTheHandoffTimeout() throws Exception {
        List<ActorSystem<?>> systems = new ArrayList<>();
        CountDownLatch release = new CountDownLatch(1);
        try {
            // The oldest node holds the coordinator; the doomed one's shard region runs on a dispatcher of one thread.
            ActorSystem<Void> oldest = node("", systems, null);
            ActorSystem<Void> doomed = node("pekko.cluster.sharding.use-dispatcher = stalled-sharding", systems, oldest);
            TestCluster.awaitMembersUp(oldest, 2);
            String doomedAddress = doomed.address().toString();

            Map<Integer, String> hosts = awaitSpread(oldest, doomedAddress);

            // The doomed node's sharding stops: its region will acknowledge no move, as a crashed node's would not.
            Executor sharding = doomed.dispatchers().lookup(DispatcherSelector.fromConfig("stalled-sharding"));
            sharding.execute(() -> {
                try {
                    release.await();
                } catch (InterruptedException stop) {
                    Thread.currentThread().interrupt();
                }
            });
            // A third node joins: the next round (1 s) moves a shard of each old node to it. The move of the oldest
            // node's shard waits for the doomed region's acknowledgement: that shard stops answering.
            node("", systems, oldest);
            TestCluster.awaitMembersUp(oldest, 3);
            int held = -1;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (held < 0) {
                assertTrue(System.nanoTime() < deadline, "no move began after the join");
                for (int shard = 0; shard < SHARDS && held < 0; shard++) {
                    if (!doomedAddress.equals(hosts.get(shard)) && ping(oldest, shard, Duration.ofMillis(500)) == null) {
                        held = shard;
                    }
                }
            }

            // The doomed node is removed. Its other shards start elsewhere; the one being moved away from it waits for
            // the termination the coordinator's worker has already consumed, unless the strategy tells it again.
            long downed = System.nanoTime();
            Cluster.get(oldest).manager().tell(new Down(doomed.address()));
            for (int shard = 0; shard < SHARDS; shard++) {
                // A ping buffered for a shard being handed off may be dropped (sharding keeps order so): ask again.
                String host = null;
                while (host == null && System.nanoTime() - downed < SERVES_AGAIN_WITHIN.toNanos()) {
                    host = ping(oldest, shard, Duration.ofSeconds(1));
                }
                assertFalse(host == null, "shard " + shard + " (on " + hosts.get(shard) + " before; a move was under way, shard " + held
                        + " of the oldest node waiting for it) did not answer within " + SERVES_AGAIN_WITHIN.toSeconds()
                        + " s of the downing: a move waits for the handoff timeout");
                assertNotEquals(doomedAddress, host, "shard " + shard + " answered from the removed node");
            }
            System.out.printf("every shard answered %.1f s after the downing (a move was under way: shard %d waited for it)%n",
                    (System.nanoTime() - downed) / 1e9, held);
        } finally {
            release.countDown();
            stopAll(systems);
        }
    }

    /**
     * Waits until every shard answers, half of them from the node at {@code second} (allocation and rebalancing even
     * them out); the node that answered each shard, by shard.
     */
    private static Map<Integer, String> awaitSpread(ActorSystem<?> from, String second) throws InterruptedException {
        return ShardTestNodes.awaitSpread(SHARDS, shard -> ping(from, shard, Duration.ofSeconds(5)), second,
                onSecond -> onSecond == SHARDS / 2);
    }

    private static void stopAll(List<ActorSystem<?>> systems) throws Exception {
        ShardTestNodes.stopAll(systems);
    }
}
