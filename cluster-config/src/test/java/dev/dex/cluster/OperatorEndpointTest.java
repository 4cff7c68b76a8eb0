package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;

/**
 * The operator's view of a running cluster (a memory node, a compute node and a client in this JVM, each with its
 * endpoint on loopback): the members and the partitions' shard region through Pekko Management, readiness, and
 * Prometheus metrics whose counters move with the load the client puts on the cluster.
 */
class OperatorEndpointTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private final List<ActorSystem<?>> systems = new ArrayList<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @AfterEach
    void stop() throws Exception {
        for (ActorSystem<?> system : systems) {
            system.terminate();
        }
        for (ActorSystem<?> system : systems) {
            system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }

    private static Config config(String role, String fabric, int managementPort, List<String> seeds) {
        Config overrides = ConfigFactory.parseString("""
                dex.fabric.transport = local
                dex.fabric.local-name = "%s"
                dex.memory.region-size = 64MiB
                dex.tree.partitions = 4
                dex.compute.cache-size = 8MiB
                dex.compute.load-window = 1s
                dex.management.port = %d
                """.formatted(fabric, managementPort));
        return DexNodes.nodeConfig(DexNodes.config(overrides), role, "127.0.0.1", 0, seeds);
    }

    private HttpResponse<String> get(int port, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(10)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    /** The value of the sample {@code name} (with its labels, e.g. {@code dex_verbs_total{kind="read"}}), or -1. */
    private static double sample(String metrics, String name) {
        Matcher m = Pattern.compile("(?m)^" + Pattern.quote(name) + " ([0-9.eE+-]+)$").matcher(metrics);
        return m.find() ? Double.parseDouble(m.group(1)) : -1;
    }

    private double waitFor(int port, String name, java.util.function.DoublePredicate until) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        double value;
        do {
            value = sample(get(port, "/metrics").body(), name);
            if (until.test(value)) {
                return value;
            }
            Thread.sleep(100);
        } while (System.nanoTime() < deadline);
        return value;
    }

    @Test
    void membersShardsReadinessAndMetricsThatMoveWithLoad() throws Exception {
        String fabric = "operator-" + UUID.randomUUID();
        int memoryPort = dev.dex.rdma.testing.LoopbackPorts.free();
        int computePort = dev.dex.rdma.testing.LoopbackPorts.free();
        int clientPort = dev.dex.rdma.testing.LoopbackPorts.free();
        Config memory = config("memory", fabric, memoryPort, List.of());
        ActorSystem<Void> memorySystem = DexNodes.memoryNode(memory, DexSettings.from(memory));
        systems.add(memorySystem);
        String seed = DexNodes.hostPort(memorySystem);
        Config compute = config("compute", fabric, computePort, List.of(seed));
        systems.add(DexNodes.computeNode(compute, DexSettings.from(compute)));
        Config clientConfig = config("client", fabric, clientPort, List.of(seed));
        ActorSystem<DexClient.Command> clientSystem = DexNodes.client(clientConfig, DexSettings.from(clientConfig));
        systems.add(clientSystem);
        ClusterMember.awaitSelfUp(clientSystem, WAIT);

        long deadline = System.nanoTime() + WAIT.toNanos();
        HttpResponse<String> ready;
        while ((ready = get(computePort, "/ready")).statusCode() != 200 && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        assertEquals(200, ready.statusCode(), "the compute node is ready: " + ready.body());
        assertEquals(200, get(computePort, "/alive").statusCode());
        String members = get(memoryPort, "/cluster/members").body();
        assertEquals(3, members.split("\"status\":\"Up\"", -1).length - 1, "three members up: " + members);
        assertTrue(members.contains("compute") && members.contains("memory"), "with their roles: " + members);

        java.io.StringWriter status = new java.io.StringWriter();
        long listed = System.nanoTime() + WAIT.toNanos();
        while (ClusterMember.memoryDescriptions(clientSystem).isEmpty() && System.nanoTime() < listed) {
            Thread.sleep(100); // the Receptionist's listing reaches a new member shortly after it is Up
        }
        DexCli.printStatus(clientSystem, new java.io.PrintWriter(status));
        assertTrue(status.toString().contains("memory servers:\n  0      " + memorySystem.address()), "dex status lists memory server 0 at"
                + " its node: " + status);
        assertFalse(status.toString().contains("NOT READY"), "every memory server is a member: " + status);

        assertEquals(0, sample(get(computePort, "/metrics").body(), "dex_partitions_held"), 0.0,
                "partitions start on their first operation");

        String before = get(computePort, "/metrics").body();
        double reads = sample(before, "dex_verbs_total{kind=\"read\"}");
        double writes = sample(before, "dex_verbs_total{kind=\"write\"}");
        double hits = sample(before, "dex_cache_hits_total");
        assertTrue(reads >= 0 && writes >= 0 && hits >= 0, "the engine's counters are exported: " + before);

        try (DexClientApi client = new DexClientApi(clientSystem, clientSystem, WAIT)) {
            for (long k = 1; k <= 500; k++) {
                client.blocking().put(k * 7, k);
            }
            for (long k = 1; k <= 500; k++) {
                assertEquals(k, client.blocking().get(k * 7).orElseThrow());
            }
        }
        // The keys lie in partition 0 (4 partitions of equal width over every long): its start was one acquire.
        assertEquals(1, waitFor(computePort, "dex_partitions_held", v -> v == 1), 0.0, "the compute node holds partition 0");
        String after = get(computePort, "/metrics").body();
        assertEquals(1, sample(after, "dex_partition_handoffs_total{event=\"acquired\"}"), 0.0, after);
        HttpResponse<String> shards = get(computePort, "/cluster/shards/dex-partition");
        assertEquals(200, shards.statusCode(), shards.body());
        assertTrue(shards.body().contains("\"shardId\""), "the partitions' shard region lists its shards: " + shards.body());
        assertTrue(sample(after, "dex_verbs_total{kind=\"write\"}") > writes, "writes reached remote memory: " + after);
        assertTrue(sample(after, "dex_verbs_total{kind=\"read\"}") > reads, "reads too");
        assertTrue(sample(after, "dex_cache_hits_total") > hits + 500, "the gets hit the cache");
        double ratio = sample(after, "dex_cache_hit_ratio");
        assertTrue(ratio > 0 && ratio <= 1, "a hit ratio: " + ratio);
        assertEquals(dev.dex.core.cache.DexEngineSettings.DEFAULT_LEAF_ADMISSION, sample(after, "dex_leaf_admission"), 1e-9,
                "P_A, fixed at its default: " + after);
        assertTrue(after.contains("# HELP dex_cache_evictions_total") && after.contains("dex_offloads_total"), after);
        // The compute node counted each operation against its partition, and none against the partitions it never ran.
        // (at least: a batch the client sent again after its batch timeout counts again)
        assertTrue(sample(after, "dex_partition_operations_total{partition=\"0\"}") >= 1_000, after);
        assertFalse(after.contains("dex_partition_operations_total{partition=\"1\"}"), after);
        // Its status carries the load of its last window (1 s here), which dex status prints.
        long measured = System.nanoTime() + WAIT.toNanos();
        dev.dex.actors.node.ComputeNode.Status loaded;
        do {
            Thread.sleep(100);
            loaded = ClusterMember.computeStatuses(clientSystem).get(0);
        } while (loaded.loadWindowSeconds() == 0 && System.nanoTime() < measured);
        assertTrue(loaded.loadWindowSeconds() >= 1.0, "a window of at least 1 s closed: " + loaded);
        assertEquals(List.of(0), loaded.partitionsHeld());
        assertTrue(loaded.partitionRates().get(0) >= 0 && loaded.partitionRates().get(0) <= 1_000, loaded.toString());
        java.io.StringWriter withLoad = new java.io.StringWriter();
        DexCli.printStatus(clientSystem, new java.io.PrintWriter(withLoad));
        assertTrue(withLoad.toString().contains("partitions (1) [0]") && withLoad.toString().contains("load: ")
                && withLoad.toString().contains(" s; busiest: 0 at "), withLoad.toString());
        assertTrue(withLoad.toString().contains("balance: 1 to 1 partitions per compute node; load from "), withLoad.toString());

        String clientMetrics = get(clientPort, "/metrics").body();
        assertEquals(500, sample(clientMetrics, "dex_client_request_seconds_count{op=\"put\"}"), 0.0, clientMetrics);
        assertEquals(500, sample(clientMetrics, "dex_client_request_seconds_count{op=\"get\"}"), 0.0);
        assertTrue(sample(clientMetrics, "dex_client_request_seconds_sum{op=\"get\"}") > 0, "latencies were recorded");
        assertFalse(clientMetrics.contains("dex_client_request_seconds_count{op=\"delete\"}"), "no series for a kind never requested");
        assertEquals(404, get(computePort, "/no-such-route").statusCode());
    }
}
