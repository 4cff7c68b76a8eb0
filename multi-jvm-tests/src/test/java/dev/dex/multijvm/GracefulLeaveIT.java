package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.actors.client.DexClientApi;
import dev.dex.rdma.RemoteMemory;

/**
 * A graceful leave under load: SIGTERM to a compute JVM runs Pekko's coordinated shutdown, in which the node
 * hands its partitions over {@value #GROUP} per rebalance round ({@code LeaveDrain}; each entity writes its dirty pages
 * back) before the node leaves the cluster; the log's drain progress must show no round of more than {@value #GROUP}. The stopped node is the oldest compute node, so the shard coordinator moves as well. Its
 * partitions move to the survivor and no acknowledged write is lost. Operations complete in every second of the leave
 * (its router refuses what still reaches it, and the client goes through sharding: docs/cluster.md, "A graceful
 * leave"); the lowest second against the usual rate and the longest operation are printed, the figures the issue's
 * targets name (a benchmark's, not asserted here).
 */
class GracefulLeaveIT {
    private static final long KEYS = 20_000;
    /** Partitions handed over per round: the leaving node's 8 go in 4 rounds. */
    private static final int GROUP = 2;
    private static final Pattern DRAINED = Pattern.compile("leaving: (\\d+) of (\\d+) partitions still here");
    private static final Pattern DRAINING = Pattern.compile("leaving: handing (\\d+) partitions over");

    @RegisterExtension
    final ClusterHarness cluster = new ClusterHarness("dex.tree.partitions=16", "dex.compute.leave.handoff-group=" + GROUP,
            // A drain of four rounds has time enough on a loaded host, where rounds may be postponed.
            "dex.compute.leave.drain-timeout=40s", "pekko.coordinated-shutdown.phases.before-service-unbind.timeout=45s");

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aComputeNodeStoppedUnderWritesHandsItsPartitionsToTheSurvivorWithoutLosingAny() throws Exception {
        cluster.startMemoryNode(0);
        RemoteMemory memory = cluster.awaitFormatted(0);
        cluster.bulkLoad(memory, KEYS);
        List<NodeProcess> computes = cluster.startComputeNodes(List.of("compute-0", "compute-1"));
        NodeProcess leaving = computes.get(0);
        DexClientApi client = cluster.startClient();
        cluster.awaitMembersUp(4);
        cluster.awaitComputeNodes(2);

        WriteMix mix = cluster.closeAfter(new WriteMix(client, KEYS, 50, 64));
        mix.start(11);
        mix.awaitMore(5_000, Duration.ofSeconds(60));
        Thread.sleep(4_000); // the usual rate: the median of the 3 s before the leave
        Map<String, List<Integer>> before = cluster.awaitPartitions("before the leave", ClusterHarness.balancedOver(2),
                Duration.ofSeconds(60));
        List<Integer> held = before.get(leaving.name());
        assertFalse(held.isEmpty(), "the leaving node holds partitions: " + before);

        int earlier = Handoffs.of(leaving).size();
        long stopped = System.nanoTime();
        assertTrue(leaving.stopGracefully(Duration.ofSeconds(60)), leaving + " exits within 60 s of SIGTERM");
        cluster.log(String.format("%s exited %.1f s after SIGTERM", leaving, (System.nanoTime() - stopped) / 1e9));
        cluster.awaitMembersUp(3);
        Map<String, List<Integer>> after = cluster.awaitPartitions("after the leave", ClusterHarness.balancedOver(1),
                Duration.ofSeconds(60));
        long settled = System.nanoTime();
        cluster.log(String.format("compute-1 holds all %d partitions %.1f s after SIGTERM to %s", after.get("compute-1").size(),
                (settled - stopped) / 1e9, leaving));
        mix.awaitMore(5_000, Duration.ofSeconds(60));
        Thread.sleep(Math.max(0, Duration.ofNanos(settled - System.nanoTime()).plusSeconds(3).toMillis()));
        mix.stop();
        cluster.log("mix: " + mix.summary());
        WriteMix.Dip dip = mix.dip(stopped, settled + Duration.ofSeconds(3).toNanos(), 3);
        cluster.log("from SIGTERM until 3 s after the partitions settled: " + dip);
        cluster.log("operations per 100 ms from 1 s before SIGTERM: " + mix.perTick(stopped - Duration.ofSeconds(1).toNanos(),
                settled + Duration.ofSeconds(3).toNanos()));
        assertTrue(dip.lowest() > 0, "operations completed in every second of the leave: " + dip);

        List<Handoffs.Handoff> handoffs = Handoffs.since(leaving, earlier);
        handoffs.forEach(h -> cluster.log("handoff " + h));
        Set<Integer> handedOff = new TreeSet<>();
        handoffs.forEach(h -> handedOff.add(h.partition()));
        assertTrue(handedOff.containsAll(held), "every partition the leaving node held was handed off (dirty pages written back):"
                + " held " + held + ", handed off " + handedOff);

        // The drain's progress, as the leaving node logged it every 200 ms: no round handed over more than the group.
        String log = leaving.logText();
        List<Integer> left = new ArrayList<>();
        Matcher line = DRAINED.matcher(log);
        while (line.find()) {
            left.add(Integer.parseInt(line.group(1)));
        }
        cluster.log("partitions still on the leaving node, as the drain went: " + left);
        // What the node held at SIGTERM: a rebalance round decided just before it may have moved some of the partitions
        // the snapshot above saw (each handed off all the same, asserted above).
        Matcher draining = DRAINING.matcher(log);
        assertTrue(draining.find(), "the drain said how many partitions it hands over");
        int atSigterm = Integer.parseInt(draining.group(1));
        assertTrue(atSigterm >= 1 && atSigterm <= held.size(), "the drain hands over what the node held: " + atSigterm
                + " of " + held);
        assertTrue(log.contains("leaving: all " + atSigterm + " partitions handed over"), "the drain handed every partition over"
                + " before the region's shutdown");
        assertFalse(left.isEmpty(), "the drain logged its progress");
        left.add(0);
        for (int i = 1; i < left.size(); i++) {
            assertTrue(left.get(i - 1) - left.get(i) <= GROUP, "a round handed over more than " + GROUP + ": " + left);
        }

        cluster.log("verified: " + mix.assertNothingLost(KEYS));
    }
}
