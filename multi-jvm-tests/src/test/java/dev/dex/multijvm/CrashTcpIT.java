package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.rdma.RemoteMemory;

/**
 * {@link CrashIT} on the tcp fabric, where a crashed compute node is also fenced (docs/durability.md): the memory
 * node, finding it unreachable, closes its fabric connections, refuses it and then downs it without waiting for the
 * split-brain resolver's stable-after ("Fence, then down"), and the survivor, finding that
 * the crashed node never gave its partitions up, fences it again on every memory node before it replays their
 * logs. No acknowledged write is lost, as on shm.
 */
class CrashTcpIT {
    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcp("dex.tree.partitions=16", "pekko.cluster.split-brain-resolver.stable-after=2s");

    /** A loose bound (the takeover's target, 2 s, is a benchmark's: docs/durability.md, "Where the floor is"). */
    private static final java.time.Duration SERVE_AGAIN_WITHIN = java.time.Duration.ofSeconds(10);

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aCrashedNodeIsFencedAndNoAcknowledgedWriteIsLost() throws Exception {
        NodeProcess memoryNode = cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, CrashIT.KEYS);

        // First a pause (SIGSTOP) of 1 s, as a long collection: under the failure detector's pause, so the node is never
        // found unreachable, not fenced and not downed, and keeps its partitions.
        List<NodeProcess> computes = CrashIT.crashUnderLoad(cluster, cluster.table(), false, crashing -> {
            crashing.signal("STOP");
            Thread.sleep(1_000);
            crashing.signal("CONT");
            Thread.sleep(4_000);
            assertTrue(cluster.isMember(crashing), crashing + " is still a member after a pause of 1 s");
            assertFalse(memoryNode.logText().contains("is fenced before its downing"),
                    "a pause of 1 s fenced the node; the memory node's log:\n" + memoryNode.logTail());
            cluster.log(crashing + " paused for 1 s: still a member, not fenced");
        }, SERVE_AGAIN_WITHIN);

        String memoryLog = memoryNode.logText();
        // Fence, then down (on by default over tcp): the memory node fenced the unreachable node before it downed it.
        assertTrue(memoryLog.contains("is fenced before its downing; its fabric connections are closed"),
                "the memory node fenced the unreachable compute node; its log:\n" + memoryNode.logTail());
        assertTrue(memoryLog.contains("downed without waiting for stable-after"),
                "the memory node downed it once fenced; its log:\n" + memoryNode.logTail());
        // A killed process's sockets close at once: the memory node acted on that, not on the failure detector's verdict.
        assertTrue(memoryLog.contains("hung up its fabric connections to this memory node and does not answer"),
                "the memory node found the killed node by its hung-up fabric connections; its log:\n" + memoryNode.logTail());
        String survivorLog = computes.get(1).logText();
        assertTrue(survivorLog.contains("had not given it up; it is fenced on every memory node"),
                "the survivor found the crashed owner in the partitions' logs and fenced it; its log:\n" + computes.get(1).logTail());
    }
}
