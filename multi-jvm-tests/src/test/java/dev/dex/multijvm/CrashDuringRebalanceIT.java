package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.RemoteMemory;

/**
 * A compute node is killed while partitions move to a third one that joined, so sharding's next rebalance rounds
 * would move partitions away from a node that is dead but not yet known to be (a rebalance moves one partition
 * per round here, as it moves at most 32 per round in a large cluster): before {@code dev.dex.actors.partition.ProbedRebalance}, such a
 * move waited for the coordinator's handoff-timeout (60 s) and its partitions served nothing that long
 * (docs/durability.md, "A crash during a handoff"), and a move between two live nodes waited for the dead node's
 * removal. The live nodes' partitions must keep serving while the dead node is not yet known to be dead, every
 * partition of the killed node must serve again within the usual takeover time, and no acknowledged write is lost.
 */
class CrashDuringRebalanceIT {
    private static final long KEYS = 20_000;
    /**
     * Well under the 60 s handoff-timeout a stalled move waits for, well over a takeover here (the 10 s
     * heartbeat pause, the downing's stable-after, the removal: 15-20 s).
     */
    private static final Duration SERVES_AGAIN_WITHIN = Duration.ofSeconds(40);
    /** Well under the failure detector's 10 s pause here. */
    private static final Duration SURVIVORS_SERVE_WITHIN = Duration.ofSeconds(4);

    /**
     * One partition per round, and rounds 2 s apart (the default is 1 s), so that the kill, 1 s after a move is seen,
     * lands well away from the next round's probe (see below).
     */
    @RegisterExtension
    final ClusterHarness cluster = new ClusterHarness("dex.tree.partitions=16",
            "pekko.cluster.failure-detector.acceptable-heartbeat-pause=10s",
            "dex.compute.rebalance-round-minimum=1", "dex.compute.rebalance-round-maximum=1",
            "pekko.cluster.sharding.rebalance-interval=2s");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aNodeKilledAsAnotherJoinsLeavesNoPartitionWaitingForTheHandoffTimeout() throws Exception {
        cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, KEYS);
        // compute-0 first, so it is the oldest and hosts the shard coordinator; compute-1 is the one killed.
        NodeProcess coordinator = cluster.startComputeNode("compute-0");
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(3); // compute-0 is Up, hence the oldest compute node, before compute-1 starts
        NodeProcess crashing = cluster.startComputeNode("compute-1");
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);
        PartitionTable table = cluster.table();

        WriteMix mix = cluster.closeAfter(new WriteMix(client, KEYS, 50, 64));
        mix.start(17);
        mix.awaitMore(3_000, Duration.ofSeconds(60));
        cluster.awaitPartitions("before the join", ClusterHarness.settledOver(2), Duration.ofSeconds(90));

        // compute-2 joins; sharding moves one partition per round (every 2 s here) to it, from whichever old node holds
        // more. Once the first has moved, compute-1 is killed: the rounds that follow, while the failure detector (a
        // 10 s pause here, to make the window wide) still counts compute-1 alive, pick partitions of compute-1 too.
        cluster.startComputeNode("compute-2");
        Map<String, List<Integer>> before = cluster.awaitPartitions("compute-2 took a partition",
                map -> map.getOrDefault("compute-2", List.of()).size() >= 1 && ClusterHarness.eachPartitionHeldOnce(map),
                Duration.ofSeconds(90));
        Set<Integer> crashed = new TreeSet<>(before.get(crashing.name()));
        assertFalse(crashed.isEmpty(), "the crashing node holds partitions: " + before);
        // Away from the round that just moved a partition (rounds run every 2 s here): a kill in the milliseconds between a
        // round's probe and compute-1's acknowledgement, which no probe can see, would hold a move between the live
        // nodes until compute-1's removal (a move away from compute-1 would end then too: MoveFromADeadRegionTest).
        // So the kill waits for 1 s after the last handoff the old owners logged, halfway to the next round; seeing the
        // move in the map can take a second itself, which once put the kill on the next round.
        awaitHalfwayBetweenRounds(List.of(coordinator, crashing));
        long killed = System.nanoTime();
        crashing.kill();
        cluster.log(crashing + " killed while partitions move to compute-2; it held partitions " + crashed);

        // The live nodes' partitions keep serving while compute-1 is dead but not yet unreachable: no round starts a
        // move that would wait for compute-1's acknowledgement until its removal.
        for (int partition = 0; partition < table.count(); partition++) {
            if (!crashed.contains(partition)) {
                long left = SURVIVORS_SERVE_WITHIN.toNanos() - (System.nanoTime() - killed);
                client.get(table.lowerExclusive(partition) + 1).toCompletableFuture().get(Math.max(left, 1), TimeUnit.NANOSECONDS);
            }
        }
        cluster.log(String.format("every partition of the live nodes answered %.1f s after the kill", (System.nanoTime() - killed) / 1e9));
        // Past the next rounds, still within the failure detector's pause.
        Thread.sleep(4_000);
        for (int partition = 0; partition < table.count(); partition++) {
            if (!crashed.contains(partition)) {
                client.get(table.lowerExclusive(partition) + 1).toCompletableFuture().get(2, TimeUnit.SECONDS);
            }
        }
        cluster.log(String.format("and again %.1f s after the kill, rounds later", (System.nanoTime() - killed) / 1e9));
        // And that is because rounds were held back, not because none was due: the coordinator (on compute-0) said so.
        assertTrue(coordinator.logText().contains("postponed"), "compute-0 logged no postponed rebalance round");

        for (int partition : crashed) {
            long key = 0;
            for (long i = 1; i <= KEYS && key == 0; i++) {
                if (table.partitionOf(ClusterHarness.key(i)) == partition) {
                    key = ClusterHarness.key(i);
                }
            }
            long left = SERVES_AGAIN_WITHIN.toNanos() - (System.nanoTime() - killed);
            client.get(key).toCompletableFuture().get(Math.max(left, 1), TimeUnit.NANOSECONDS);
            cluster.log(String.format("partition %d serves again %.1f s after the kill", partition,
                    (System.nanoTime() - killed) / 1e9));
        }
        Map<String, List<Integer>> after = cluster.awaitPartitions("after the crash", ClusterHarness.settledOver(2),
                Duration.ofSeconds(90));
        cluster.log(String.format("partitions settled over the two survivors %.1f s after the kill: %s",
                (System.nanoTime() - killed) / 1e9, after));
        mix.awaitMore(3_000, Duration.ofSeconds(60));
        mix.stop();
        cluster.log("mix: " + mix.summary());

        cluster.log("verified: " + mix.assertNothingLost(KEYS));
    }

    private static final java.util.regex.Pattern HANDED_OFF = java.util.regex.Pattern.compile(
            "(?m)^(\\d\\d:\\d\\d:\\d\\d\\.\\d{3}) .*handed off in");

    /**
     * Returns 1 s after the last handoff the {@code owners} logged, as long as that is at most 1.3 s ago; otherwise
     * waits for the next round's handoff (up to 10 s) and returns 1 s after it. The nodes' logs carry this host's time.
     */
    private static void awaitHalfwayBetweenRounds(List<NodeProcess> owners) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            java.time.LocalTime last = null;
            for (NodeProcess owner : owners) {
                java.util.regex.Matcher m = HANDED_OFF.matcher(owner.logText());
                while (m.find()) {
                    java.time.LocalTime at = java.time.LocalTime.parse(m.group(1));
                    last = last == null || at.isAfter(last) ? at : last;
                }
            }
            assertTrue(last != null, "an old owner logged a handoff");
            long sinceMillis = java.time.Duration.between(last, java.time.LocalTime.now()).toMillis();
            if (sinceMillis <= 1_300) {
                Thread.sleep(Math.max(0, 1_000 - sinceMillis));
                return;
            }
            assertTrue(System.nanoTime() < deadline, "no rebalance round moved a partition for 10 s");
            Thread.sleep(50);
        }
    }
}
