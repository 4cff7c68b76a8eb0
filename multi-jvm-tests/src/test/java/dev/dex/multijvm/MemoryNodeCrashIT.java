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

/**
 * A memory server held by a replica group of two memory nodes over tcp (docs/replication.md): the primary's memory node
 * is killed with SIGKILL under writes and inserts. The backup reports its stream closed, the coordinator makes it primary
 * of a new view, the compute nodes move their connections to it and rerun the reads and redo log writes in flight, and
 * the index serves again; no compute node or client is downed, and every acknowledged write is on the new primary. Then a third memory
 * node of the server joins as a backup and is copied from the new primary while the index serves (re-replication).
 * Then the primary is paused (SIGSTOP) until the replacement has taken over, and resumed: the stale primary learns from
 * the new primary's refusal of its stream that it was replaced, and changes nothing. Then both replicas left are killed:
 * the server is lost, and its operations fail naming it. Last, both restart on their kept regions: the coordinator makes
 * the one whose region holds every change of the group's last view primary, and nothing acknowledged is lost.
 */
class MemoryNodeCrashIT {
    static final long KEYS = 20_000;

    @RegisterExtension
    final ClusterHarness cluster = ClusterHarness.tcpKeepingRegionsPerNode("dex.memory.replicas=2", "dex.tree.partitions=16",
            "pekko.cluster.split-brain-resolver.stable-after=2s");

    @Test
    @Timeout(value = 15, unit = TimeUnit.MINUTES) // a hang guard for -Ddex.it.kills=10; one round takes about 45 s
    void killingThePrimaryLosesNothingAndTheBackupServesThenAReplacementIsCopied() throws Exception {
        NodeProcess first = cluster.startMemoryNode("memory-0-a", 0);
        // The backup's JVM starts while the compute nodes' do: it joins a view that is formed, whenever it comes.
        NodeProcess second = cluster.startMemoryNodeAsync("memory-0-b", 0);
        List<NodeProcess> computes = cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        second.awaitPort(ClusterHarness.NODE_START);
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(5);
        NodeProcess primary = ClusterHarness.awaitPrimary(List.of(first, second), 1);
        NodeProcess backup = primary == first ? second : first;
        cluster.awaitFormattedOn(primary);
        backup.awaitLog("copy complete", Duration.ofSeconds(60));
        cluster.awaitComputeNodes(2);

        WriteMix mix = cluster.closeAfter(new WriteMix(client, KEYS, 60, 64, true));
        mix.start(41);
        mix.awaitMore(8_000, Duration.ofSeconds(90));

        // Each round kills the primary (SIGKILL) under the mix, waits until every partition serves again, and starts a
        // replacement that is copied from the new primary while the index serves. One round in the suite;
        // -Ddex.it.kills=10 measures the failover's p50 and max (docs/replication.md).
        int kills = Integer.getInteger("dex.it.kills", 1);
        List<Double> failovers = new java.util.ArrayList<>();
        NodeProcess replacement = null;
        List<NodeProcess> killedPrimaries = new java.util.ArrayList<>();
        for (int round = 0; round < kills; round++) {
            long view = 3 + 2L * round; // 1: formed, 2: the backup joined; then a failover and a join per round
            long killed = System.nanoTime();
            primary.kill();
            killedPrimaries.add(primary);
            cluster.log(primary + " (the primary of memory server 0) killed under writes");
            long served = cluster.awaitServing(Duration.ofSeconds(60));
            double seconds = (served - killed) / 1e9;
            failovers.add(seconds);
            cluster.log(String.format("the index serves again %.2f s after the primary's kill (round %d of %d)", seconds,
                    round + 1, kills));
            assertTrue(served - killed < Duration.ofSeconds(10).toNanos(), String.format("serving again %.1f s after the kill",
                    seconds));
            assertTrue(backup.logText().contains("this replica is primary of view " + view), "the backup took over in view "
                    + view + "; its log:\n" + backup.logTail());
            assertTrue(backup.logText().contains("closed; asking the coordinator to fail over"), "the backup reported its"
                    + " primary's stream closed (the group's own detector, not the cluster's); its log:\n" + backup.logTail());
            mix.awaitMore(2_000, Duration.ofSeconds(60));

            // A replacement joins the group and is copied while the index serves.
            replacement = cluster.startMemoryNode("memory-0-r" + round, 0);
            replacement.awaitLog("copy complete", Duration.ofSeconds(90));
            cluster.log(replacement + " is a complete backup of memory server 0");
            mix.awaitMore(2_000, Duration.ofSeconds(60));
            primary = backup;
            backup = replacement;
        }
        List<Double> sorted = failovers.stream().sorted().toList();
        cluster.log(String.format("failover over %d kill(s): p50 %.2f s, max %.2f s, each %s", kills,
                sorted.get((sorted.size() - 1) / 2), sorted.get(sorted.size() - 1), failovers));

        // A stale primary: the primary is paused (SIGSTOP) past the failure detector, the replacement takes over, then the
        // paused one resumes. It was replaced without knowing: what it still had in flight is refused by the new view.
        NodeProcess stale = primary;
        // The killed primaries are out of the cluster first: a second node unreachable while the first one's
        // unreachability is still fresh reads as instability to the split-brain resolver, which then downs every node.
        long killedRemovedBy = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        for (NodeProcess killedPrimary : killedPrimaries) {
            while (cluster.isMember(killedPrimary)) {
                assertTrue(System.nanoTime() < killedRemovedBy, killedPrimary + " still a member 60 s on");
                Thread.sleep(100);
            }
        }
        stale.signal("STOP");
        long paused = System.nanoTime();
        cluster.log(stale + " (the primary) paused");
        replacement.awaitLog("this replica is primary of view " + (3 + 2L * kills), Duration.ofSeconds(60));
        long servedAgain = cluster.awaitServing(Duration.ofSeconds(60));
        cluster.log(String.format("the index serves again %.2f s after the primary was paused", (servedAgain - paused) / 1e9));
        int staleCopies = occurrences(stale.logText(), "copy complete");
        stale.signal("CONT");
        stale.awaitLog("this replica stops serving", Duration.ofSeconds(60));
        cluster.log(stale + " resumed and learnt that it was replaced");
        awaitOccurrences(stale, "copy complete", staleCopies + 1, Duration.ofSeconds(90));
        cluster.log(stale + " is a complete backup again (copied from the new primary)");
        mix.awaitMore(5_000, Duration.ofSeconds(60));
        mix.stop();
        cluster.log("mix: " + mix.summary() + "; failures e.g. " + mix.failures());

        for (NodeProcess compute : computes) {
            assertTrue(compute.isAlive() && cluster.isMember(compute), compute + " is a member after the failover");
            assertFalse(compute.logText().contains("including myself"), compute + " was never downed");
        }
        WriteMix.Verification verification = mix.assertNoAcknowledgedWriteLost(KEYS);
        cluster.log("verified: " + verification);
        assertEquals(0, mix.violationCount(), "no read returned a value its key never had: " + mix.violations());

        // Every replica lost: the two memory nodes of server 0 that are left are killed, the backup first, then the
        // primary once the backup is out of the group's view and of the cluster (killed together, they would be half of
        // the voters: a tie, which the split-brain resolver gives to the side of the lowest address, docs/replication.md).
        // Every compute node reports the server lost, naming its replicas (not ready), and operations that need it fail
        // with that error, none hangs.
        long backupKilled = System.nanoTime();
        stale.kill();
        // At least view 3 + 2 * kills + 2: the pause's failover, the stale primary back as a backup, then dropped.
        long lastView = ClusterHarness.awaitViewWithoutBackups(replacement, 3 + 2L * kills + 2, Duration.ofSeconds(60));
        long dropped = System.nanoTime();
        long servedWithoutIt = cluster.awaitServing(Duration.ofSeconds(60));
        cluster.log(String.format("the backup %s killed: dropped from the group in view %d %.2f s later, the index serves %.2f s"
                + " after the kill", stale, lastView, (dropped - backupKilled) / 1e9, (servedWithoutIt - backupKilled) / 1e9));
        assertTrue(replacement.logText().contains("asking the coordinator to drop them"), "the primary reported the broken link"
                + " (the group's own detector, not the cluster's); its log:\n" + replacement.logTail());
        long removedBy = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (cluster.isMember(stale)) { // downed and removed: the voters left are three
            assertTrue(System.nanoTime() < removedBy, stale + " is removed from the cluster");
            Thread.sleep(100);
        }
        replacement.kill();
        cluster.log("the primary " + replacement + " killed: memory server 0 has no replica left");
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        List<dev.dex.actors.node.ComputeNode.Status> statuses = cluster.statuses();
        while (!statuses.stream().allMatch(status -> status.memoryServersLost().size() == 1) && System.nanoTime() < deadline) {
            Thread.sleep(200);
            statuses = cluster.statuses();
        }
        for (dev.dex.actors.node.ComputeNode.Status status : statuses) {
            assertEquals(List.of(0), status.memoryServersOut(), status.toString());
            assertEquals(1, status.memoryServersLost().size(), "server 0 reported lost: " + status);
            String why = status.memoryServersLost().get(0);
            // The replicas of the map's last view: the coordinator may have dropped the one that died first.
            assertTrue(why.startsWith("memory server 0 is lost: every replica") && (why.contains("@" + replacement.seed())
                    || why.contains("@" + stale.seed())), why);
        }
        long asked = System.nanoTime();
        List<java.util.concurrent.CompletableFuture<?>> puts = new java.util.ArrayList<>();
        for (long i = 1; i <= 200; i++) {
            puts.add(client.put(ClusterHarness.key(i * 97) + 1, i).toCompletableFuture());
        }
        int named = 0;
        int lost = 0;
        for (java.util.concurrent.CompletableFuture<?> put : puts) {
            java.util.concurrent.ExecutionException failed = org.junit.jupiter.api.Assertions.assertThrows(
                    java.util.concurrent.ExecutionException.class, () -> put.get(120, TimeUnit.SECONDS),
                    "a put needs memory server 0 (its redo log)");
            String message = String.valueOf(failed.getCause().getMessage());
            named += message.contains("memory server 0") ? 1 : 0;
            lost += message.contains("memory server 0 is lost: every replica") ? 1 : 0;
        }
        cluster.log(String.format("200 puts after every replica was lost: all failed within %.1f s, %d naming memory server 0,"
                + " %d saying it is lost", (System.nanoTime() - asked) / 1e9, named, lost));
        assertEquals(200, named, "every failure names the memory server");
        assertTrue(lost > 0, "the failures say the server is lost and name its replicas");

        // The whole group restarts on its kept regions. The last primary's comes back first: its region holds every change
        // of the last view, so it is made primary of the next one. The other is then copied from it, as a new backup.
        long restarting = System.nanoTime();
        NodeProcess primaryAgain = cluster.restart(replacement, replacement.name() + "-again");
        long up = System.nanoTime();
        long servedAfterRestart = cluster.awaitServing(Duration.ofSeconds(90));
        cluster.log(String.format("the index serves again %.2f s after the last primary was started again, %.2f s after it"
                + " was up", (servedAfterRestart - restarting) / 1e9, (servedAfterRestart - up) / 1e9));
        assertTrue(primaryAgain.logText().contains("this replica is primary of view " + (lastView + 1)), "the last primary's"
                + " restarted node is primary of view " + (lastView + 1) + "; its log:\n" + primaryAgain.logTail());
        assertTrue(computes.stream().anyMatch(compute -> compute.logText().contains("restarted on the kept region of its PRIMARY")),
                "the coordinator took the kept region of the last view's primary");
        NodeProcess backupAgain = cluster.restart(stale, stale.name() + "-again");
        backupAgain.awaitLog("copy complete", Duration.ofSeconds(90));
        long unmarkedBy = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (cluster.statuses().stream().anyMatch(status -> !status.memoryServersLost().isEmpty())) {
            assertTrue(System.nanoTime() < unmarkedBy, "server 0 is still reported lost: " + cluster.statuses());
            Thread.sleep(200);
        }
        WriteMix.Verification afterRestart = mix.assertNoAcknowledgedWriteLost(KEYS);
        cluster.log("verified after the whole group restarted: " + afterRestart);
    }

    private static int occurrences(String text, String of) {
        int count = 0;
        for (int at = text.indexOf(of); at >= 0; at = text.indexOf(of, at + 1)) {
            count++;
        }
        return count;
    }

    private static void awaitOccurrences(NodeProcess node, String text, int count, Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        while (occurrences(node.logText(), text) < count) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(node + " logged '" + text + "' fewer than " + count + " times; its log:\n" + node.logTail());
            }
            Thread.sleep(100);
        }
    }
}
