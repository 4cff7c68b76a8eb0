package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.Backoff;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.partition.LeaveDrain;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.log.RedoLogSettings;

/**
 * A compute node sweeps a partition by itself once a client's deletes in it stopped ({@code dex.compute.merge-sweep}),
 * counted on {@code /metrics}, and every key stays as the client left it; with the sweep off, nothing is swept.
 */
@ExtendWith(LogCapturingExtension.class)
class MergeSweepClusterTest {
    private static final int KEYS = 4_000;

    @ParameterizedTest(name = "merge-sweep {0}")
    @CsvSource({"300ms", "off"})
    void aComputeNodeSweepsAPartitionOnceTheClientsDeletesInItStopped(String sweep) throws Exception {
        Duration quiet = sweep.equals("off") ? Duration.ZERO : Duration.ofMillis(300);
        try (TestCluster cluster = new TestCluster()) {
            cluster.memoryNode();
            ComputeNode.Settings settings = new ComputeNode.Settings(1, DexEngineSettings.dex(4L << 20), 2, Duration.ofSeconds(2),
                    Duration.ofSeconds(5), Backoff.DEFAULTS, RedoLogSettings.ON, Duration.ofSeconds(5), Duration.ofMillis(400),
                    Duration.ofSeconds(10), 1, LeaveDrain.Settings.DEFAULTS, quiet);
            ActorSystem<Void> compute = cluster.computeNode(settings, cluster.fabric);
            DexClientApi client = cluster.client();
            cluster.awaitUp(Duration.ofSeconds(30));
            // Keys 1..4,000 all lie in partition 0 (of 16 over a million keys); half of them are deleted: 2,000 deletes.
            TreeMap<Long, Long> model = new TreeMap<>();
            List<CompletableFuture<Boolean>> writes = new ArrayList<>();
            for (long key = 1; key <= KEYS; key++) {
                model.put(key, key * 7);
                writes.add(client.put(key, key * 7).toCompletableFuture());
            }
            CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
            writes.clear();
            for (long key = 2; key <= KEYS; key += 2) {
                model.remove(key);
                writes.add(client.delete(key).toCompletableFuture());
            }
            CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
            if (sweep.equals("off")) {
                Thread.sleep(3_000); // ten quiet times of the other case, three health ticks
                assertEquals(0, sweeps(compute), "nothing swept with the sweep off");
            } else {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (sweeps(compute) == 0) {
                    assertTrue(System.nanoTime() < deadline, "partition 0 swept within 20 s of its last delete");
                    Thread.sleep(100);
                }
            }
            TestCluster.verify(client, model);
            for (long key = 2; key <= KEYS; key += 2) {
                assertTrue(client.get(key).toCompletableFuture().get(30, TimeUnit.SECONDS).isEmpty(), "deleted " + key);
            }
        }
    }

    /** {@code dex_merge_sweeps_total} of the compute node's scrape. */
    private static double sweeps(ActorSystem<?> compute) {
        for (String line : DexMetrics.get(compute).scrape().split("\n")) {
            if (line.startsWith("dex_merge_sweeps_total ")) {
                return Double.parseDouble(line.substring(line.indexOf(' ') + 1).trim());
            }
        }
        throw new AssertionError("no dex_merge_sweeps_total in the scrape");
    }
}
