package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.core.cache.FreeLeaves;
import dev.dex.rdma.RemoteMemory;

/**
 * {@link CrashIT} under deletes: 70% of the mix's writes are deletes over a bulk-loaded tree, so leaves go sparse and
 * the compute node merges them all the time (docs/merges.md), and it is killed once its first merge pass is in its log,
 * among the passes that follow. The survivor must find a tree it can follow (every write of a pass leaves a valid
 * tree) and every acknowledged write, deletes included (replayed from the crashed node's redo logs). The free-leaf
 * chains the two left in remote memory are checked after ({@link FreeLeaves#validate}).
 */
class CrashDuringMergesIT {
    @RegisterExtension
    final ClusterHarness cluster = new ClusterHarness("dex.tree.partitions=16",
            "pekko.cluster.split-brain-resolver.stable-after=2s");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aNodeKilledAmongMergesLosesNoAcknowledgedWrite() throws Exception {
        cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, CrashIT.KEYS);
        CrashIT.crashUnderLoad(cluster, cluster.table(), false, crashing -> {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (!crashing.logText().contains("leaf merges begin")) {
                assertTrue(System.nanoTime() < deadline, crashing + " merged no leaf under the deletes; its log:\n"
                        + crashing.logTail());
                Thread.sleep(100);
            }
            Thread.sleep(ThreadLocalRandom.current().nextLong(200, 1_000)); // among the passes that follow
            cluster.log(crashing + " merges leaves: killed now");
        }, CrashIT.SERVE_AGAIN_WITHIN, 70);
        // The free leaves the killed node's passes put on chains, and those the survivor took or added: each one dead,
        // on one chain, and reachable from no node of the tree.
        long onChains = java.util.Arrays.stream(FreeLeaves.validate(memory)).sum();
        cluster.log("free leaves on chains after the crash: " + onChains);
    }
}
