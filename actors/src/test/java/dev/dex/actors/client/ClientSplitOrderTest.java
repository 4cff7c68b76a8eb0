package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
import dev.dex.core.cache.DexEngine;

/**
 * A client's operations on a key keep their order across a split of the key's partition (docs/cluster.md, "The
 * partition lifecycle"): a put whose batch is held on its way while the partition splits comes back {@code MOVED}; the
 * client reads the newer table, and that put reaches the new partition before the client's later puts of the same key,
 * which waited behind it, and before a put the client received after it adopted the table.
 */
@ExtendWith(LogCapturingExtension.class)
class ClientSplitOrderTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final Duration WAIT = Duration.ofSeconds(30);

    private final List<ActorSystem<?>> systems = new ArrayList<>();
    private final GatedComputeNode gate = new GatedComputeNode();

    @AfterEach
    void stop() {
        TestCluster.terminateAll(systems);
    }

    /**
     * Where the first put of {@code value} into {@code key} delivered to {@code partition} is: its batch's position among
     * the delivered batches times 10,000 plus its own position in the batch; {@code Long.MAX_VALUE} for none.
     */
    private long firstCarrying(long partition, long key, long value) {
        for (int i = 0; i < gate.delivered.size(); i++) {
            List<Ops.Op> ops = gate.delivered.get(i).ops();
            for (int j = 0; j < ops.size() && gate.delivered.get(i).partition() == partition; j++) {
                if (ops.get(j).kind() == Ops.PUT && ops.get(j).first() == key && ops.get(j).value() == value) {
                    return i * 10_000L + j;
                }
            }
        }
        return Long.MAX_VALUE;
    }

    @Test
    void aPutMovedBySplitLandsInTheNewPartitionBeforeTheClientsLaterPutsOfTheKey() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            DexClientApi client = gate.startWithClient(tree, Duration.ofSeconds(5), WAIT, systems);

            TreeMap<Long, Long> loaded = LocalTree.loadedModel(LOADED);
            long low = tree.table.lowerExclusive(2);
            long high = tree.table.upperInclusive(2);
            long boundary = tree.engine.splitBoundary(2, low + (high - low) / 2);
            long key = loaded.higherKey(boundary + 4);
            assertTrue(key <= high, "a key above the boundary, in partition 2");
            assertTrue(client.put(key, 1).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS), "the key was loaded");

            // Held on its way to partition 2; behind it, the client's next put of the key waits in the partition's queue.
            gate.holdNextWrite.set(true);
            CompletableFuture<Boolean> first = client.put(key, 2).toCompletableFuture();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (gate.held.get() == null) {
                assertTrue(System.nanoTime() < deadline, "the gate held the put");
                Thread.sleep(5);
            }
            CompletableFuture<Boolean> second = client.put(key, 3).toCompletableFuture();
            DexEngine.SplitReport split = tree.engine.split(2, boundary);
            gate.entities.get(2).tell(gate.held.get()); // delivered late: partition 2 no longer holds the key
            gate.delivered.add(gate.held.get());

            assertTrue(first.get(WAIT.toSeconds(), TimeUnit.SECONDS), "the moved put was sent again and acknowledged");
            assertTrue(second.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            assertTrue(client.put(key, 4).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS), "a put after the split");
            assertEquals(OptionalLong.of(4), client.get(key).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS),
                    "the client's last put stands");
            long again = firstCarrying(split.added(), key, 2);
            long later = firstCarrying(split.added(), key, 3);
            assertTrue(again < Long.MAX_VALUE, "the moved put went to the new partition");
            assertTrue(later < Long.MAX_VALUE, "and so did the later put, moved too or sent there");
            assertTrue(again < later, "the moved put reached the new partition before the later one: " + gate.delivered);
            assertEquals(Long.MAX_VALUE, firstCarrying(2, key, 4), "the put after the split went to the new partition only");
            client.close();
        }
    }
}
