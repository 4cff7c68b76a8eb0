package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.RemoteMemory;

/**
 * Partitions that split by load (docs/partition-splits.md) across processes, and a compute node killed among its splits:
 * two compute nodes split their busiest partition every second ({@code dex.compute.split} with a rate factor of 1, so the
 * busiest one always qualifies) under a mix of puts and reads whose every read is checked against the writes
 * acknowledged before it ({@link WriteMix}); the client re-routes the keys each split moves. One node is killed at a
 * random moment among its splits. The survivor takes its partitions over, new ones included, and no acknowledged write
 * is lost, none read out of order; the stored table has more partitions than the tree was formatted with. (A kill at
 * each writing verb of a split is {@code PartitionSplitTest}'s, in one process.)
 */
class CrashDuringPartitionSplitsIT {
    @RegisterExtension
    final ClusterHarness cluster = new ClusterHarness("dex.tree.partitions=16",
            "pekko.cluster.split-brain-resolver.stable-after=2s", "dex.compute.load-window=1s",
            "dex.compute.split.interval=1s", "dex.compute.split.rate-factor=1", "dex.compute.split.min-rate=20");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aNodeKilledAmongItsSplitsLosesNoAcknowledgedWrite() throws Exception {
        cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, CrashIT.KEYS);
        List<NodeProcess> computes = cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);
        WriteMix mix = cluster.closeAfter(new WriteMix(client, CrashIT.KEYS, 50, 64));
        mix.start(17);
        mix.awaitMore(5_000, Duration.ofSeconds(60));

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        NodeProcess crashing = null;
        while (crashing == null) {
            for (NodeProcess node : computes) {
                if (node.logText().split("keys above it are partition", -1).length > 2) {
                    crashing = node; // it split twice: it splits on every second now
                }
            }
            assertTrue(System.nanoTime() < deadline, "no compute node split twice within 90 s");
            Thread.sleep(100);
        }
        Thread.sleep(ThreadLocalRandom.current().nextLong(0, 1_000)); // anywhere in its next second of splits
        NodeProcess survivor = computes.get(0) == crashing ? computes.get(1) : computes.get(0);
        long killed = System.nanoTime();
        crashing.kill();
        cluster.log(crashing + " splits partitions: killed now");

        mix.awaitMore(5_000, Duration.ofSeconds(90));
        cluster.log(String.format("the mix goes on %.1f s after the kill", (System.nanoTime() - killed) / 1e9));
        mix.stop();
        cluster.log("mix: " + mix.summary());
        WriteMix.Verification verification = mix.assertNothingLost(CrashIT.KEYS);
        cluster.log("verified: " + verification);
        PartitionTable table = PartitionTable.load(memory);
        assertTrue(table.count() > 16, "the stored table has the partitions the splits added: " + table);
        cluster.log("the table after the splits: " + table.count() + " partitions; " + survivor + " serves on");
    }
}
