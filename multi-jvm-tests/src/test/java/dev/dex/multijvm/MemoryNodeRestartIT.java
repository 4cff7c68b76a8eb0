package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.rdma.RemoteMemory;

/**
 * A memory node that restarts is not an outage (docs/replication.md, "A memory node restarts"). First the only memory
 * node is paused (SIGSTOP) until the compute nodes have downed it, then resumed: its process rejoins with a new actor
 * system on the same region. Then, over tcp with a region directory, it is killed with SIGKILL under writes and started again 8 s later with the same
 * arguments, as an operator would. The compute nodes are the majority of the split-brain resolver's voters (clients do
 * not vote), so they and the client stay members while it is away (they down it); the restarted node reattaches to its region, rejoins the
 * cluster it last saw (it was started without {@code --seed}: it was the first node), and advertises a new fabric port,
 * which the compute nodes move their connections to. No acknowledged write is lost; writes sent while the memory node
 * was away fail with an error (their outcome unknown) or complete after it is back.
 */
class MemoryNodeRestartIT {
    static final long KEYS = 20_000;
    /** The scenario: the memory node is started again this long after the kill. */
    static final Duration AWAY = Duration.ofSeconds(8);

    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcpKeepingRegions("dex.tree.partitions=16",
            "pekko.cluster.split-brain-resolver.stable-after=2s");

    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES)
    void computeNodesAndClientsSurviveAPauseAndARestartOfTheMemoryNodeAndNothingAcknowledgedIsLost() throws Exception {
        NodeProcess memoryNode = cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, KEYS);
        List<NodeProcess> computes = cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);

        WriteMix mix = cluster.closeAfter(new WriteMix(client, KEYS, 50, 64));
        mix.start(29);
        mix.awaitMore(5_000, Duration.ofSeconds(60));

        // First a pause (SIGSTOP) past the failure detector and stable-after: the compute nodes down the memory node;
        // resumed, its process must not end (a region in its memory would be lost) but rejoin with a new actor system.
        memoryNode.signal("STOP");
        cluster.log(memoryNode + " paused");
        cluster.awaitNotMember(memoryNode, Duration.ofSeconds(60)); // the paused memory node is downed and removed
        memoryNode.signal("CONT");
        long resumed = System.nanoTime();
        long servedAfterPause = cluster.awaitServing(Duration.ofSeconds(60));
        cluster.log(String.format("resumed after it was removed: the index serves again %.2f s later", (servedAfterPause - resumed) / 1e9));
        cluster.awaitMembersUp(4);
        cluster.awaitAllBack(Duration.ofSeconds(10));
        assertTrue(memoryNode.isAlive(), "the memory node's process did not end when its actor system was downed");
        String pausedLog = memoryNode.logText();
        assertTrue(pausedLog.contains("the cluster downed memory node 0") && pausedLog.contains("rejoins the cluster through"),
                "it learnt it was downed and rejoined; its log:\n" + memoryNode.logTail());
        mix.awaitMore(3_000, Duration.ofSeconds(60));

        // Then a crash, and a start with the same arguments 8 s later.
        long killed = System.nanoTime();
        memoryNode.kill();
        cluster.log(memoryNode + " killed under writes");
        Thread.sleep(AWAY.toMillis());
        for (NodeProcess compute : computes) {
            assertTrue(compute.isAlive() && cluster.isMember(compute), compute + " is still a member " + AWAY.toSeconds()
                    + " s after the memory node's kill");
        }
        assertFalse(cluster.isMember(memoryNode), "the compute nodes downed the unreachable memory node");
        List<dev.dex.actors.node.ComputeNode.Status> away = cluster.statuses();
        assertEquals(2, away.size());
        for (dev.dex.actors.node.ComputeNode.Status status : away) {
            assertEquals(List.of(0), status.memoryServersOut(), "each compute node says memory server 0 is out (and /ready is 503)");
        }
        long failedWhileAway = mix.failureCount();

        NodeProcess restarted = cluster.restart(memoryNode, "memory-0-restarted");
        long up = System.nanoTime();
        long served = cluster.awaitServing(Duration.ofSeconds(60));
        cluster.log(String.format("the index serves again %.2f s after the restarted memory node was up (%.1f s after the kill)",
                (served - up) / 1e9, (served - killed) / 1e9));
        assertTrue(served - up < Duration.ofSeconds(10).toNanos(), String.format("serving again %.1f s after the restart",
                (served - up) / 1e9));
        cluster.awaitMembersUp(4);
        cluster.awaitAllBack(Duration.ofSeconds(10));
        mix.awaitMore(10_000, Duration.ofSeconds(60));
        mix.stop();
        cluster.log("mix: " + mix.summary() + "; " + failedWhileAway + " failed while the memory node was away, e.g. "
                + mix.failures());

        for (NodeProcess compute : computes) {
            assertTrue(compute.isAlive() && cluster.isMember(compute), compute + " is a member after the restart");
            assertFalse(compute.logText().contains("including myself"), compute + " was never downed: " + compute.logText().lines()
                    .filter(line -> line.contains("including myself")).findFirst().orElse(""));
        }
        String log = restarted.logText();
        assertTrue(log.contains("restarted on its kept region: rejoining the cluster it last saw"), "rejoined; its log:\n" + restarted.logTail());
        assertTrue(computes.get(0).logText().contains("memory server 0 is back"), "the compute node learnt where the memory node is");
        WriteMix.Verification verification = mix.assertNoAcknowledgedWriteLost(KEYS);
        cluster.log("verified: " + verification);
    }

}
