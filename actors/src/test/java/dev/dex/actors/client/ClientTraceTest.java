package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

import com.typesafe.config.ConfigFactory;

import dev.dex.actors.TestCluster;
import dev.dex.core.partition.PartitionTable;

/**
 * Traced operations ({@link DexClientApi#trace}) through a cluster of a memory node, two compute nodes and a client, each
 * its own actor system: every hop stamps its slot, in order, and tracing changes no answer. The tests' verification
 * that every message serializes is off here, as in a deployment: it would serialize messages between actors of one
 * system too, which stamps the wire's slots out of their order.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(LogCapturingExtension.class)
class ClientTraceTest {
    private static final long WAIT_SECONDS = 60;
    private static final PartitionTable TABLE = PartitionTable.equalWidth(TestCluster.PARTITIONS, 0, TestCluster.KEY_RANGE);

    private TestCluster cluster;
    private DexClientApi client;

    @BeforeAll
    void startCluster() throws Exception {
        cluster = new TestCluster(ConfigFactory.parseString("pekko.actor.serialize-messages = off"));
        cluster.memoryNode();
        cluster.computeNode(4L << 20);
        cluster.computeNode(4L << 20);
        client = cluster.client();
        cluster.awaitUp(Duration.ofSeconds(30));
    }

    @AfterAll
    void stopCluster() {
        cluster.close();
    }

    @Test
    void aTracedOperationPassesEveryHopAndItsAnswerIsUnchanged() throws Exception {
        List<Long> keys = new ArrayList<>();
        for (int p = 0; p < TABLE.count(); p++) {
            keys.add(Math.max(TABLE.lowerExclusive(p), -1_000) + 3);
        }
        for (long key : keys) {
            await(client.put(key, key * 3));
        }
        // Until the client knows each partition's node, its batches go through the sharding proxy (no router); a round
        // of traces then shows the router's hops too.
        HopTable table = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (System.nanoTime() < deadline && (table == null || table.passed(dev.dex.actors.partition.HopTrace.ROUTER) < keys.size())) {
            table = new HopTable();
            client.trace(1, table);
            try {
                for (long key : keys) {
                    assertEquals(OptionalLong.of(key * 3), await(client.get(key)), "a traced get answers as any other");
                }
            } finally {
                client.trace(0, null);
            }
        }
        assertEquals(keys.size(), table.count(), "every operation was traced (one in 1)");
        for (int hop = dev.dex.actors.partition.HopTrace.DRAIN; hop < dev.dex.actors.partition.HopTrace.STAMPS; hop++) {
            assertEquals(keys.size(), table.passed(hop), "every traced get passed " + dev.dex.actors.partition.HopTrace.hopName(hop));
        }
        await(client.get(keys.get(0)));
        assertEquals(keys.size(), table.count(), "nothing is traced once tracing stops");
    }

    private static <T> T await(CompletionStage<T> stage) throws Exception {
        return stage.toCompletableFuture().get(WAIT_SECONDS, TimeUnit.SECONDS);
    }
}
