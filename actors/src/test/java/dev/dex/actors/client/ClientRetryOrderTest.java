package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.actors.TestCluster;
import dev.dex.actors.partition.LocalTree;
import dev.dex.actors.partition.Ops;

/**
 * A retry never overtakes: a client's put to a key is lost on its way to the partition (held by the stand-in's gate
 * for good), and the client puts the key again without waiting. The first put goes again after its batch
 * timeout, and must land before the later one, which the client received after it: the later value stands. Before,
 * the later put went out as soon as the first batch timed out (or, sent behind it in a second batch, was applied at
 * once), and the first one's retry then overwrote it.
 */
@ExtendWith(LogCapturingExtension.class)
class ClientRetryOrderTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final Duration BATCH_TIMEOUT = Duration.ofMillis(400);
    private static final Duration WAIT = Duration.ofSeconds(30);

    private final List<ActorSystem<?>> systems = new ArrayList<>();
    private final GatedComputeNode gate = new GatedComputeNode();

    @AfterEach
    void stop() {
        TestCluster.terminateAll(systems);
    }

    private DexClientApi client(LocalTree tree) throws InterruptedException {
        return gate.startWithClient(tree, BATCH_TIMEOUT, WAIT, systems);
    }

    /** Puts {@code value} into {@code key} and waits until the gate holds its batch: the put is lost on its way. */
    private CompletableFuture<Boolean> putLost(DexClientApi client, long key, long value) throws InterruptedException {
        gate.holdNextWrite.set(true);
        CompletableFuture<Boolean> lost = client.put(key, value).toCompletableFuture();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (gate.held.get() == null) {
            assertTrue(System.nanoTime() < deadline, "the gate held the put");
            Thread.sleep(5);
        }
        return lost;
    }

    /** The position among the delivered batches of the first that puts {@code value} into {@code key}. */
    private int firstCarrying(long key, long value) {
        for (int i = 0; i < gate.delivered.size(); i++) {
            if (gate.delivered.get(i).ops().stream().anyMatch(op -> op.kind() == Ops.PUT && op.first() == key && op.value() == value)) {
                return i;
            }
        }
        return Integer.MAX_VALUE;
    }

    @Test
    void aPutSentAgainAfterNoAnswerLandsBeforeTheClientsLaterPutOfTheKey() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            DexClientApi client = client(tree);
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(2) + 10);
            assertTrue(client.put(key, 1).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS), "the key was loaded");

            CompletableFuture<Boolean> first = putLost(client, key, 2);
            CompletableFuture<Boolean> later = client.put(key, 3).toCompletableFuture();

            assertTrue(first.get(WAIT.toSeconds(), TimeUnit.SECONDS), "the lost put went again and was acknowledged");
            assertTrue(later.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertEquals(OptionalLong.of(3), client.get(key).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS),
                    "the put the client received later stands");
            client.close();
        }
    }

    @Test
    void aBatchSentBehindALostOneIsRefusedAndGoesAgainAfterIt() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            DexClientApi client = client(tree);
            TreeMap<Long, Long> loaded = LocalTree.loadedModel(LOADED);
            long key = loaded.higherKey(tree.table.lowerExclusive(2) + 10);
            assertTrue(client.put(key, 1).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS), "the key was loaded");

            CompletableFuture<Boolean> first = putLost(client, key, 2);
            // Enough operations for a second batch while the first is in flight, the key's later put among them.
            Map<Long, Long> behind = new LinkedHashMap<>();
            behind.put(key, 3L);
            for (long other = loaded.higherKey(key); behind.size() < DexClient.PIPELINED_BATCH + 6; other = loaded.higherKey(other)) {
                assertEquals(2, tree.table.partitionOf(other), "every key in the lost put's partition");
                behind.put(other, -other);
            }
            CompletableFuture<Void> later = client.putAll(behind).toCompletableFuture();

            assertTrue(first.get(WAIT.toSeconds(), TimeUnit.SECONDS), "the lost put went again and was acknowledged");
            later.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            Map<Long, Long> read = client.getAll(behind.keySet()).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(3L, read.get(key), "the put of the key the client received later stands");
            assertEquals(behind, read, "and so do the other later puts");
            assertTrue(firstCarrying(key, 3) < firstCarrying(key, 2),
                    "the later put reached the partition, sent behind the lost one, before the lost one went again");
            client.close();
        }
    }
}
