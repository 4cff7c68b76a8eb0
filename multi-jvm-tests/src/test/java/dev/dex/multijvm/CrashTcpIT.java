package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.rdma.RemoteMemory;

/**
 * {@link CrashIT} on the tcp fabric, where a crashed compute node is also fenced (docs/durability.md): the memory
 * node closes its fabric connections and refuses it once the cluster downs it, and the survivor, finding that
 * the crashed node never gave its partitions up, fences it again on every memory node before it replays their
 * logs. No acknowledged write is lost, as on shm.
 */
class CrashTcpIT {
    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcp("dex.tree.partitions=16", "pekko.cluster.split-brain-resolver.stable-after=2s");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aCrashedNodeIsFencedAndNoAcknowledgedWriteIsLost() throws Exception {
        NodeProcess memoryNode = cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, CrashIT.KEYS);

        List<NodeProcess> computes = CrashIT.crashUnderLoad(cluster, cluster.table(), false);

        String memoryLog = memoryNode.logText();
        assertTrue(memoryLog.contains("was downed: its fabric connections are closed and it is refused from now on"),
                "the memory node fenced the downed compute node; its log:\n" + memoryNode.logTail());
        String survivorLog = computes.get(1).logText();
        assertTrue(survivorLog.contains("had not given it up; it is fenced on every memory node"),
                "the survivor found the crashed owner in the partitions' logs and fenced it; its log:\n" + computes.get(1).logTail());
    }
}
