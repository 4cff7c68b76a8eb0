package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.rdma.RemoteMemory;

/**
 * A cluster forms from separate JVMs: one memory node, a bulk load from this JVM over the shm fabric, two
 * compute nodes, and this JVM as the client. 50,000 mixed operations ({@link #operations()}: gets, puts that replace and insert,
 * deletes, scans) all agree with a model, and a final scan of everything equals the model.
 */
class FormationIT {
    private static final long KEYS = 20_000;

    @RegisterExtension
    final ClusterHarness cluster = newHarness("dex.tree.partitions=16");

    /** The cluster this scenario runs on; {@code FormationTlsIT} runs it on the tcp fabric with mutual TLS. */
    ClusterHarness newHarness(String... settings) {
        return new ClusterHarness(settings);
    }

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void twoComputeNodesServeMixedOperationsThatAllAgreeWithAModel() throws Exception {
        cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, KEYS);
        cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);

        ModelMix mix = new ModelMix(client, KEYS);
        long start = System.nanoTime();
        int operations = operations();
        ModelMix.Result result = mix.run(operations, 64, 2_500, 6);
        double seconds = (System.nanoTime() - start) / 1e9;
        cluster.log(String.format("%,d operations in %.1f s (%,.0f ops/s): %,d gets, %,d puts, %,d deletes, %d scans returning"
                + " %,d entries; %d disagreed with the model", operations, seconds, operations / seconds, result.gets(), result.puts(),
                result.deletes(), result.scans(), result.scannedEntries(), result.mismatches()));
        assertEquals(0, result.mismatches(), "replies that disagree with the model: " + result.examples());
        assertEquals(operations, result.gets() + result.puts() + result.deletes());

        int everything = mix.model().size();
        int scanned = mix.scan(Long.MIN_VALUE + 1, everything + 1).get(120, TimeUnit.SECONDS);
        assertEquals(everything, scanned, "a scan of everything returns every entry of the model");
        assertEquals(0, mix.mismatches(), "the scan of everything equals the model: " + mix.examples());
        cluster.log("a scan of all " + everything + " entries equals the model");

        Map<String, List<Integer>> map = cluster.awaitPartitions("partitions spread over both compute nodes",
                ClusterHarness.balancedOver(2), Duration.ofSeconds(60));
        for (List<Integer> held : map.values()) {
            assertFalse(held.isEmpty(), "each compute node holds partitions: " + map);
        }
        assertTrue(ClusterHarness.eachPartitionHeldOnce(map));
        afterFormation(client);
    }

    /** How many mixed operations the model checks. */
    int operations() {
        return 50_000;
    }

    /** More of a subclass's scenario on the formed cluster (4 members), so that it starts no cluster of its own. */
    void afterFormation(DexClientApi client) throws Exception {
    }
}
