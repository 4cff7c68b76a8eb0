package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;

/**
 * All nodes start at once on a busy machine, in the awkward order: over tcp, a compute node first (the seed,
 * it waits for memory nodes), then the memory node and the second compute node together, while two threads
 * of this JVM keep about a core busy, and with a describe timeout of 1 s so that slow answers are likely.
 * Every compute node must become ready (its handshakes retry, never give up; the log line says how often
 * they did) and the cluster must then serve writes and reads.
 */
class StartUnderLoadIT {
    private static final Pattern RETRIES = Pattern.compile("did not describe itself \\(attempt|cannot be opened yet \\(attempt");

    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcp("dex.tree.partitions=8", "dex.compute.handshake.describe-timeout=1s");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void computeNodesStartedAtOnceUnderLoadAllBecomeReady() throws Exception {
        AtomicBoolean busy = new AtomicBoolean(true);
        List<Thread> burners = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Thread burner = new Thread(() -> {
                while (busy.get()) {
                    long until = System.nanoTime() + 5_000_000;
                    while (System.nanoTime() < until) {
                        Thread.onSpinWait();
                    }
                    try {
                        Thread.sleep(5);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "cpu-burner-" + i);
            burner.setDaemon(true);
            burners.add(burner);
            burner.start();
        }
        List<NodeProcess> computeNodes;
        DexClientApi client;
        try {
            NodeProcess first = cluster.startSeedComputeNode("compute-0");
            NodeProcess memory = cluster.startMemoryNodeAsync(0);
            NodeProcess second = cluster.startComputeNode("compute-1");
            memory.awaitPort(ClusterHarness.NODE_START);
            computeNodes = List.of(first, second);
            client = cluster.startClient();
            cluster.awaitMembersUp(4);
            cluster.awaitComputeNodes(2);
        } finally {
            busy.set(false);
            for (Thread burner : burners) {
                burner.join();
            }
        }
        int retries = 0;
        for (NodeProcess node : computeNodes) {
            Matcher retry = RETRIES.matcher(node.logText());
            while (retry.find()) {
                retries++;
            }
        }
        cluster.log("both compute nodes ready; handshake attempts retried: " + retries);

        for (long k = 1; k <= 200; k++) {
            client.put(k * 1_000, k).toCompletableFuture().get(60, TimeUnit.SECONDS);
        }
        for (long k = 1; k <= 200; k++) {
            OptionalLong value = client.get(k * 1_000).toCompletableFuture().get(60, TimeUnit.SECONDS);
            assertTrue(value.isPresent(), "key " + k * 1_000);
            assertEquals(k, value.getAsLong());
        }
        assertEquals(2, cluster.statuses().size(), "both compute nodes still serving");
    }
}
