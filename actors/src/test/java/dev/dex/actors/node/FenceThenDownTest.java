package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.UniqueAddress;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.Test;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * Fence, then down ({@link FenceThenDown}): a real cluster in this JVM, a memory node over {@code tcp} and compute-node
 * members, the split-brain resolver's {@code stable-after} at 30 s so that only the rule can down anything within the
 * test. A compute node that stops without leaving (its actor system ends, as a crashed node's would) is fenced at the
 * memory node, so its fabric client's writes fail, and downed within seconds; with the rule off, or on a side without a
 * majority of the voters, it is not.
 */
class FenceThenDownTest {
    private static final Duration STABLE_AFTER = Duration.ofSeconds(30);
    /** Well under stable-after; well over the failure detector's verdict (a 1 s heartbeat pause here) and the down. */
    private static final Duration DOWNED_WITHIN = Duration.ofSeconds(10);
    /**
     * How long the negative cases watch for a downing that must not come: twice the positive case's worst (the failure
     * detector's verdict and the rule's probes, 2.0-3.5 s here).
     */
    private static final Duration NOT_DOWNED_FOR = Duration.ofSeconds(6);
    /**
     * How long a hang-up case watches for a downing that must not come: the hang-up path acts at the memory node's next
     * tick (100 ms) and removes a dead node 0.3-1.0 s after its hang-up (the case above); three times the worst.
     */
    private static final Duration HANG_UP_WATCH = Duration.ofSeconds(3);

    private static Config config(String roles, String extra) {
        return ConfigFactory.parseString("""
                pekko.cluster.roles = [%s, voter]
                pekko.cluster.downing-provider-class = "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider"
                pekko.cluster.split-brain-resolver.active-strategy = keep-majority
                pekko.cluster.split-brain-resolver.keep-majority.role = voter
                pekko.cluster.split-brain-resolver.stable-after = %d s
                pekko.cluster.failure-detector.heartbeat-interval = 200ms
                pekko.cluster.failure-detector.acceptable-heartbeat-pause = 1s
                pekko.cluster.unreachable-nodes-reaper-interval = 250ms
                pekko.coordinated-shutdown.run-by-actor-system-terminate = off
                %s
                """.formatted(roles, STABLE_AFTER.toSeconds(), extra)).withFallback(ActorTestKit.applicationTestConfig());
    }

    /** The victim's status as the memory node sees it, once it is down or gone, within {@code within}; else null. */
    private static String downedWithin(ActorSystem<?> observer, UniqueAddress victim, Duration within) throws InterruptedException {
        return statusWithin(observer, victim, within, false);
    }

    /**
     * The victim's status as {@code observer} sees it once it is down or gone ({@code removedOnly}: gone), within
     * {@code within}; else null.
     */
    private static String statusWithin(ActorSystem<?> observer, UniqueAddress victim, Duration within, boolean removedOnly)
            throws InterruptedException {
        long deadline = System.nanoTime() + within.toNanos();
        while (System.nanoTime() < deadline) {
            boolean member = false;
            for (Member m : Cluster.get(observer).state().getMembers()) {
                if (m.uniqueAddress().equals(victim)) {
                    member = true;
                    if (m.status() == MemberStatus.down() && !removedOnly) {
                        return "down";
                    }
                }
            }
            if (!member) {
                return "removed";
            }
            Thread.sleep(50);
        }
        return null;
    }

    private record Crash(Duration downedAfter, boolean fenced) {
    }

    /** How a scenario ends the first compute node. */
    private enum Ending {
        /** Its actor system stops without leaving; its fabric connections stay open (a node cut off, say). */
        SYSTEM_STOPS,
        /** Its actor system stops without leaving and its fabric connections close: a process that dies. */
        PROCESS_DIES,
        /** Only its fabric connections close; its actor system carries on: alive. */
        CONNECTIONS_CLOSE
    }

    private static Crash crashOne(int computeNodes, String memoryExtra) throws Exception {
        return crashOne(computeNodes, memoryExtra, "", Ending.SYSTEM_STOPS, DOWNED_WITHIN, false);
    }

    /**
     * A memory node and {@code computeNodes} compute-node members; the first compute node writes through its fabric
     * client, then its actor system stops without leaving. Whether and when it was downed, and whether its client was
     * fenced.
     */
    private static Crash crashOne(int computeNodes, String memoryExtra, String allExtra, Ending ending, Duration within,
                                  boolean removedOnly) throws Exception {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 16L << 20, 64 << 10, 1, 16, PartitionTable.equalWidth(4, 0, 1000), 3,
                false, 8);
        List<ActorSystem<?>> systems = new ArrayList<>();
        try (TcpFabric fabric = new TcpFabric(); TcpFabric clients = new TcpFabric();
             MemoryRegion region = MemoryRegion.open(settings, fabric)) {
            ActorSystem<Void> memory = ActorSystem.create(Behaviors.setup(context -> {
                context.spawn(MemoryNode.create(region), "memory");
                return Behaviors.empty();
            }), "dex", config("memory", memoryExtra + "\n" + allExtra));
            systems.add(memory);
            Cluster.get(memory).manager().tell(Join.create(Cluster.get(memory).selfMember().address()));
            for (int c = 0; c < computeNodes; c++) {
                ActorSystem<Void> compute = ActorSystem.create(Behaviors.empty(), "dex", config("compute", allExtra));
                systems.add(compute);
                Cluster.get(compute).manager().tell(Join.create(Cluster.get(memory).selfMember().address()));
            }
            dev.dex.actors.TestCluster.awaitMembersUp(memory, 1 + computeNodes);
            ActorSystem<?> victim = systems.get(1);
            UniqueAddress victimAddress = Cluster.get(victim).selfMember().uniqueAddress();
            RemoteMemory client = clients.connect(Map.of(0, region.region().endpoint()), Fabrics.clientId(victimAddress));
            UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
            long address = GlobalAddress.of(0, 64L << 10);
            client.write(address, word, 0, 8);

            // The memory node has seen the client's connection before the crash.
            long seen = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (!region.fabric().connectedClients(0).contains(Fabrics.clientId(victimAddress)) && System.nanoTime() < seen) {
                Thread.sleep(20);
            }
            Thread.sleep(300); // a few of the rule's ticks
            long crashed = System.nanoTime();
            if (ending != Ending.CONNECTIONS_CLOSE) {
                victim.terminate(); // no coordinated shutdown: it does not leave, as a crashed node would not
                victim.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
            }
            if (ending != Ending.SYSTEM_STOPS) {
                // As the kernel ends a dead process's sockets; after its remoting port closed, as with a SIGKILL, where
                // both go at once (closed first, a probe could find the port still open and the node alive).
                client.close();
            }
            String status = statusWithin(memory, victimAddress, within, removedOnly);
            Duration after = status == null ? null : Duration.ofNanos(System.nanoTime() - crashed);
            boolean fenced = false;
            if (ending != Ending.SYSTEM_STOPS) {
                try {
                    client = clients.connect(Map.of(0, region.region().endpoint()), Fabrics.clientId(victimAddress));
                } catch (FencedException refusedGreeting) {
                    return new Crash(after, true);
                }
            }
            if (status != null || ending == Ending.CONNECTIONS_CLOSE) {
                try {
                    for (int attempt = 0; attempt < 3; attempt++) {
                        try {
                            client.write(address, word, 0, 8);
                        } catch (FencedException refused) {
                            throw refused;
                        } catch (FabricException closedFirst) {
                            // the fence closed the connection under the verb; the reconnect's greeting is refused
                        }
                    }
                } catch (FencedException refused) {
                    fenced = true;
                }
            }
            client.close();
            return new Crash(after, fenced);
        } finally {
            for (ActorSystem<?> system : systems) {
                system.terminate();
            }
            for (ActorSystem<?> system : systems) {
                system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void aCrashedComputeNodeIsFencedAtTheMemoryNodeThenDownedWithoutWaitingForStableAfter() throws Exception {
        assertTakenDown(crashOne(2, ""), "the crashed compute node was not downed within " + DOWNED_WITHIN.toSeconds()
                + " s (stable-after is " + STABLE_AFTER.toSeconds() + " s)", "downed %.1f s after the crash");
    }

    /** The node was downed (or removed) in time, and its fabric client is refused; prints when, with {@code printed}. */
    private static void assertTakenDown(Crash crash, String notInTime, String printed) {
        assertTrue(crash.downedAfter() != null, notInTime);
        assertTrue(crash.fenced(), "its fabric client is refused: it was fenced before, or at, its downing");
        System.out.printf(printed + "%n", crash.downedAfter().toNanos() / 1e9);
    }

    /**
     * A process that dies closes its sockets at once: the memory node sees the fabric connections of a compute node
     * that is up close, finds it silent, fences it, downs it and quarantines it, and the cluster removes it, all long
     * before a failure detector with a 20 s heartbeat pause (on every node here) could find it unreachable.
     */
    @Test
    void aComputeNodeWhoseConnectionsCloseAndWhichIsSilentIsRemovedBeforeAnyFailureDetectorVerdict() throws Exception {
        // A killed process sends nothing; a stopped actor system tells its peers, which then quarantine it harmlessly
        // after their shutdown-flush-timeout (a quarantine the cluster does not act on): kept away from the test.
        Crash crash = crashOne(2, "pekko.remote.artery.advanced.shutdown-flush-timeout = 5s",
                "pekko.cluster.failure-detector.acceptable-heartbeat-pause = 20s", Ending.PROCESS_DIES, Duration.ofSeconds(8), true);
        assertTakenDown(crash, "the dead compute node was not removed within 8 s; the failure detectors allow a 20 s pause"
                + " and stable-after is " + STABLE_AFTER.toSeconds() + " s", "removed %.2f s after its process died");
    }

    /** A compute node whose fabric connections close but which answers is alive: it is not fenced, nor downed. */
    @Test
    void aComputeNodeWhoseConnectionsCloseButWhichAnswersIsLeftAlone() throws Exception {
        Crash crash = crashOne(2, "", "pekko.cluster.failure-detector.acceptable-heartbeat-pause = 20s", Ending.CONNECTIONS_CLOSE,
                HANG_UP_WATCH, false);
        assertEquals(null, crash.downedAfter(), "a live compute node was downed because it hung up its fabric connections");
        assertEquals(false, crash.fenced(), "a live compute node was fenced because it hung up its fabric connections");
    }

    /**
     * The port probe that tells a dead process from a paused one: a port where a process listens accepts (the kernel
     * accepts for it even while it is paused), a port where none does refuses, and an address without a port tells
     * nothing.
     */
    @Test
    void aRemotingPortWhereNoProcessListensRefusesAndOneWhereOneListensAccepts() throws Exception {
        java.util.concurrent.ExecutorService executor = java.util.concurrent.Executors.newSingleThreadExecutor();
        try {
            int port;
            try (java.net.ServerSocket listening = dev.dex.rdma.testing.LoopbackPorts.listen()) {
                port = listening.getLocalPort();
                org.apache.pekko.actor.Address alive = new org.apache.pekko.actor.Address("pekko", "dex", "127.0.0.1", port);
                assertEquals(FenceThenDown.Port.ACCEPTED, FenceThenDown.probePort(alive, Duration.ofSeconds(2), executor)
                        .get(10, TimeUnit.SECONDS));
            }
            org.apache.pekko.actor.Address gone = new org.apache.pekko.actor.Address("pekko", "dex", "127.0.0.1", port);
            assertEquals(FenceThenDown.Port.REFUSED, FenceThenDown.probePort(gone, Duration.ofSeconds(2), executor)
                    .get(10, TimeUnit.SECONDS), "nothing listens on port " + port + " any more");
            assertEquals(FenceThenDown.Port.SILENT, FenceThenDown.probePort(new org.apache.pekko.actor.Address("pekko", "dex"),
                    Duration.ofSeconds(2), executor).get(10, TimeUnit.SECONDS), "a local address has no port to try");
        } finally {
            executor.shutdownNow();
        }
    }

    /** A memory node that wakes from a pause acts on nobody until the heartbeats that waited have been read. */
    @Test
    void afterAGapBetweenTicksTheRuleHoldsBack() {
        FenceThenDown.PauseGuard guard = new FenceThenDown.PauseGuard();
        long t = 1_000_000_000L;
        assertEquals(false, guard.mayAct(t), "the first tick only starts the clock");
        t += 100_000_000L;
        assertEquals(true, guard.mayAct(t), "ticks 100 ms apart");
        t += FenceThenDown.PauseGuard.GAP.toNanos() + 1;
        assertEquals(false, guard.mayAct(t), "a tick after a gap of more than a second: held back");
        long woke = t;
        while (t - woke < FenceThenDown.PauseGuard.HOLD.toNanos()) {
            assertEquals(false, guard.mayAct(t), "still held back");
            t += 100_000_000L;
        }
        assertEquals(true, guard.mayAct(t), "acts again once the hold is over");
    }

    @Test
    void withTheRuleOffOnlyTheResolverDownsAndNotBeforeStableAfter() throws Exception {
        Crash crash = crashOne(2, "dex.memory.fence-then-down = off", "", Ending.SYSTEM_STOPS, NOT_DOWNED_FOR, false);
        assertEquals(null, crash.downedAfter(), "downed before stable-after with the rule off");
    }

    @Test
    void aSideWithoutAMajorityOfTheVotersDownsNobody() throws Exception {
        // A memory node and one compute node: when the compute node is gone, one voter of two is no majority.
        Crash crash = crashOne(1, "", "", Ending.SYSTEM_STOPS, NOT_DOWNED_FOR, false);
        assertEquals(null, crash.downedAfter(), "a side of one voter in two downed the other");
    }
}
