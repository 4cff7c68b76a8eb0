package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

/**
 * The members a memory node remembers to rejoin its cluster ({@link ClusterContacts}): written beside its region as the
 * membership changes (other memory and compute nodes with the memory server each serves, not clients, not itself), and
 * read back at the next start with comments, blank lines and malformed entries left out.
 */
class ClusterContactsTest {
    @TempDir
    Path directory;

    @Test
    void aMissingFileIsNoContactsAndMalformedLinesAreLeftOut() throws Exception {
        Path file = ClusterContacts.file(directory, 3);
        assertEquals(directory.resolve("cluster-contacts-3.txt"), file);
        assertEquals(List.of(), ClusterContacts.read(file));
        assertEquals(List.of(), ClusterContacts.read(null));
        Files.writeString(file, "# members\n\n10.0.0.1:2552\nno-port\n10.0.0.2:99999\n  10.0.0.3:2553 memory-server 4 \n"
                + "10.0.0.4:2554 memory-server x\n", StandardCharsets.UTF_8);
        assertEquals(List.of(new ClusterContacts.Contact("10.0.0.1:2552", -1), new ClusterContacts.Contact("10.0.0.3:2553", 4)),
                ClusterContacts.read(file));
    }

    @Test
    void onlyTheLowestRememberedMemoryServerMayFormAClusterOfItsOwn() {
        List<ClusterContacts.Contact> seenBy2 = List.of(new ClusterContacts.Contact("10.0.0.1:2552", -1),
                new ClusterContacts.Contact("10.0.0.3:2553", 4));
        org.junit.jupiter.api.Assertions.assertTrue(MemoryNodeProcess.mayFormACluster(2, seenBy2), "2 is lower than 4");
        List<ClusterContacts.Contact> seenBy4 = List.of(new ClusterContacts.Contact("10.0.0.1:2552", -1),
                new ClusterContacts.Contact("10.0.0.2:2552", 2));
        org.junit.jupiter.api.Assertions.assertFalse(MemoryNodeProcess.mayFormACluster(4, seenBy4), "4 waits for 2");
        org.junit.jupiter.api.Assertions.assertTrue(MemoryNodeProcess.mayFormACluster(4, List.of(new ClusterContacts.Contact(
                "10.0.0.1:2552", -1))), "a memory node that remembers only compute nodes forms the cluster");
    }

    @Test
    void theMembersAreWrittenAsTheyComeUpAndReadBack() throws Exception {
        Path file = ClusterContacts.file(directory, 0);
        AtomicReference<List<ClusterContacts.Contact>> current = new AtomicReference<>(List.of());
        ActorSystem<Void> memory = ActorSystem.create(Behaviors.setup(context -> {
            context.spawn(ClusterContacts.create(current, file), "cluster-contacts");
            return Behaviors.empty();
        }), DexNodes.SYSTEM, config("memory", List.of()));
        ActorSystem<Void> compute = null;
        ActorSystem<Void> client = null;
        ActorSystem<Void> memory7 = null;
        ClusterContacts.Contact lastStopped = null;
        try {
            org.apache.pekko.cluster.typed.Cluster.get(memory).manager().tell(
                    org.apache.pekko.cluster.typed.Join.create(org.apache.pekko.cluster.typed.Cluster.get(memory).selfMember().address()));
            String seed = DexNodes.hostPort(memory);
            compute = ActorSystem.create(Behaviors.empty(), DexNodes.SYSTEM, config("compute", List.of(seed)));
            client = ActorSystem.create(Behaviors.empty(), DexNodes.SYSTEM, config("client", List.of(seed)));
            Config otherMemory = ConfigFactory.parseString("pekko.cluster.roles = [memory, \"" + ClusterContacts.SERVER_ROLE + "7\"]")
                    .withFallback(config("memory", List.of(seed)));
            memory7 = ActorSystem.create(Behaviors.empty(), DexNodes.SYSTEM, otherMemory);
            List<ClusterContacts.Contact> expected = new java.util.ArrayList<>(List.of(
                    new ClusterContacts.Contact(DexNodes.hostPort(compute), -1), new ClusterContacts.Contact(DexNodes.hostPort(memory7), 7)));
            expected.sort(java.util.Comparator.comparing(ClusterContacts.Contact::hostPort));
            lastStopped = new ClusterContacts.Contact(DexNodes.hostPort(memory7), 7);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (!current.get().equals(expected) || !ClusterContacts.read(file).equals(expected)) {
                assertTrue(System.nanoTime() < deadline, "the compute node and memory server 7 are remembered; now " + current.get());
                Thread.sleep(50);
            }
            String text = Files.readString(file, StandardCharsets.UTF_8);
            assertTrue(text.startsWith("#"), "the file says what it is: " + text);
        } finally {
            for (ActorSystem<?> system : new ActorSystem<?>[] {client, compute, memory7, memory}) {
                if (system != null) {
                    system.terminate();
                    system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
                }
            }
        }
        assertEquals(List.of(lastStopped), ClusterContacts.read(file), "members that leave are dropped, but the last one stays in"
                + " the file: a node that sees itself alone keeps the members it knew");
    }

    /**
     * Members this node downs in its own view stay contacts. A node resumed after a pause downs every member it finds
     * unreachable, one event after another, while they run on; dropping each left only the last one dropped to rejoin
     * through, which may be a dead node. Here the memory node downs both others.
     */
    @Test
    void membersThisNodeDownsStayContactsToRejoinThrough() throws Exception {
        try (MemoryAndTwoComputeNodes nodes = new MemoryAndTwoComputeNodes()) {
            AtomicReference<List<ClusterContacts.Contact>> current = nodes.current;
            List<ClusterContacts.Contact> both = nodes.both;
            org.apache.pekko.cluster.typed.Cluster cluster = org.apache.pekko.cluster.typed.Cluster.get(nodes.memory);

            for (ActorSystem<?> downed : new ActorSystem<?>[] {nodes.compute, nodes.other}) {
                cluster.manager().tell(new org.apache.pekko.cluster.typed.Down(
                        org.apache.pekko.cluster.typed.Cluster.get(downed).selfMember().address()));
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (countMembers(cluster) > 1) {
                assertTrue(System.nanoTime() < deadline, "both are removed");
                Thread.sleep(50);
            }

            assertEquals(both, current.get(), "both stay contacts");
        }
    }

    /**
     * A node that is downed itself keeps the members it knew. Its cluster, shutting down, publishes every member still up
     * as removed; taking that as their leaving left only members downed earlier (often dead) to rejoin through, and
     * MemoryNodeCrashIT failed so: a resumed primary and a backup downed while it joined tried only a killed node.
     */
    @Test
    void aNodeThatIsDownedKeepsTheMembersItKnew() throws Exception {
        try (MemoryAndTwoComputeNodes nodes = new MemoryAndTwoComputeNodes()) {
            AtomicReference<List<ClusterContacts.Contact>> current = nodes.current;
            List<ClusterContacts.Contact> both = nodes.both;
            org.apache.pekko.cluster.typed.Cluster cluster = org.apache.pekko.cluster.typed.Cluster.get(nodes.memory);

            // Downed by a compute node, as the majority downs a paused memory node: the downing reaches it by gossip.
            org.apache.pekko.cluster.typed.Cluster.get(nodes.compute).manager().tell(
                    new org.apache.pekko.cluster.typed.Down(cluster.selfMember().address()));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (!cluster.isTerminated()) {
                assertTrue(System.nanoTime() < deadline, "the downed memory node's cluster shuts down");
                Thread.sleep(50);
            }
            nodes.memory.terminate();
            nodes.memory.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);

            assertEquals(both, current.get(), "the downed node still knows both compute nodes, which run on");
        }
    }

    /**
     * A memory node that keeps contacts (in memory only) and two compute nodes that joined it, once it remembers both;
     * closing terminates the three.
     */
    private static final class MemoryAndTwoComputeNodes implements AutoCloseable {
        final AtomicReference<List<ClusterContacts.Contact>> current = new AtomicReference<>(List.of());
        final ActorSystem<Void> memory;
        ActorSystem<Void> compute;
        ActorSystem<Void> other;
        List<ClusterContacts.Contact> both;

        MemoryAndTwoComputeNodes() throws Exception {
            memory = ActorSystem.create(Behaviors.setup(context -> {
                context.spawn(ClusterContacts.create(current, null), "cluster-contacts");
                return Behaviors.empty();
            }), DexNodes.SYSTEM, config("memory", List.of()));
            try {
                org.apache.pekko.cluster.typed.Cluster cluster = org.apache.pekko.cluster.typed.Cluster.get(memory);
                cluster.manager().tell(org.apache.pekko.cluster.typed.Join.create(cluster.selfMember().address()));
                String seed = DexNodes.hostPort(memory);
                compute = ActorSystem.create(Behaviors.empty(), DexNodes.SYSTEM, config("compute", List.of(seed)));
                other = ActorSystem.create(Behaviors.empty(), DexNodes.SYSTEM, config("compute", List.of(seed)));
                both = new java.util.ArrayList<>(List.of(new ClusterContacts.Contact(DexNodes.hostPort(compute), -1),
                        new ClusterContacts.Contact(DexNodes.hostPort(other), -1)));
                both.sort(java.util.Comparator.comparing(ClusterContacts.Contact::hostPort));
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (!current.get().equals(both)) {
                    assertTrue(System.nanoTime() < deadline, "both compute nodes are remembered; now " + current.get());
                    Thread.sleep(50);
                }
            } catch (Exception | AssertionError e) {
                close();
                throw e;
            }
        }

        @Override
        public void close() throws Exception {
            for (ActorSystem<?> system : new ActorSystem<?>[] {other, compute, memory}) {
                if (system != null) {
                    system.terminate();
                    system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
                }
            }
        }
    }

    private static int countMembers(org.apache.pekko.cluster.typed.Cluster cluster) {
        int n = 0;
        for (org.apache.pekko.cluster.Member ignored : cluster.state().getMembers()) {
            n++;
        }
        return n;
    }

    private static Config config(String role, List<String> seeds) {
        return DexNodes.withoutEndpoint(DexNodes.nodeConfig(DexNodes.config(ConfigFactory.empty()), role, "127.0.0.1", 0, seeds));
    }

    @Test
    void aMemoryNodeStartedAgainWithSeedsTriesThemAndTheMembersItLastSaw() {
        // The seed of its first start is gone; the members it remembers are tried too, each once, seeds first.
        assertEquals(List.of("127.0.0.1:2551", "127.0.0.1:2600", "127.0.0.1:2700"), MemoryNodeProcess.seedsThenRemembered(
                List.of("pekko://dex@127.0.0.1:2551"), List.of("127.0.0.1:2600", "127.0.0.1:2551", "127.0.0.1:2700")));
    }

    @Test
    void statusSaysWhatAStandingByReplicasKeptRegionHeld() {
        dev.dex.actors.node.MemoryNode.Replica standing = new dev.dex.actors.node.MemoryNode.Replica("SOLE", 0, 0, true, 0, null,
                5, false, "PRIMARY", 7);
        assertEquals("; standing by, its kept region held every change of view 7 as its primary", DexCli.replicaLine(standing));
        assertEquals("", DexCli.replicaLine(dev.dex.actors.node.MemoryNode.Replica.SOLE), "the only copy of its server");
    }
}
