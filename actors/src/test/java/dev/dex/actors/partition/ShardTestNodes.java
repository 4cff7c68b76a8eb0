package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.IntFunction;
import java.util.function.LongPredicate;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.ShardingMessageExtractor;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;

/**
 * What the sharding tests with real nodes in one JVM share: one entity per shard, a ping, waiting for the shards to
 * spread, and stopping every node.
 */
final class ShardTestNodes {
    private ShardTestNodes() {
    }

    /** Entity id = shard id: each shard holds one entity, so a test moves entities by moving shards. */
    static <M> ShardingMessageExtractor<ShardingEnvelope<M>, M> shardPerEntity() {
        return new ShardingMessageExtractor<>() {
            @Override
            public String entityId(ShardingEnvelope<M> envelope) {
                return envelope.entityId();
            }

            @Override
            public String shardId(String entityId) {
                return entityId;
            }

            @Override
            public M unwrapMessage(ShardingEnvelope<M> envelope) {
                return envelope.message();
            }
        };
    }

    /** The address of the node whose entity of {@code shard} answers {@code ping} within {@code timeout}, or null. */
    static <M> String ping(ActorSystem<?> from, EntityTypeKey<M> key, int shard, Function<ActorRef<String>, M> ping,
                           Duration timeout) {
        try {
            return ClusterSharding.get(from).entityRefFor(key, Integer.toString(shard)).<String>ask(ping::apply, timeout)
                    .toCompletableFuture().get(timeout.toMillis() + 1_000, TimeUnit.MILLISECONDS);
        } catch (Exception noAnswer) {
            return null;
        }
    }

    /**
     * Asks every one of {@code shards} shards where it is ({@code hostOf}: a node's address, or null without an answer)
     * until every shard answers and the number of them on {@code node} is {@code enough}, for up to 40 s; the node of
     * each shard.
     */
    static Map<Integer, String> awaitSpread(int shards, IntFunction<String> hostOf, String node, LongPredicate enough)
            throws InterruptedException {
        Map<Integer, String> hosts = new TreeMap<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
        while (hosts.size() < shards || !enough.test(hosts.values().stream().filter(node::equals).count())) {
            assertTrue(System.nanoTime() < deadline, "the shards did not spread over the nodes: " + hosts);
            hosts.clear();
            for (int shard = 0; shard < shards; shard++) {
                String host = hostOf.apply(shard);
                if (host != null) {
                    hosts.put(shard, host);
                }
            }
            Thread.sleep(200);
        }
        return hosts;
    }

    /** Stops every system as the whole cluster ({@link LeaveDrain#CLUSTER_STOP}: nothing drains) and waits for each (up to 60 s). */
    static void stopAll(List<ActorSystem<?>> systems) throws Exception {
        for (ActorSystem<?> system : systems) {
            org.apache.pekko.actor.CoordinatedShutdown.get(org.apache.pekko.actor.typed.javadsl.Adapter.toClassic(system))
                    .runAll(LeaveDrain.CLUSTER_STOP);
        }
        for (ActorSystem<?> system : systems) {
            system.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
        }
    }
}
