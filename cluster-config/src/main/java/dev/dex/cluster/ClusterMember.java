package dev.dex.cluster;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;
import org.apache.pekko.cluster.typed.Cluster;

import dev.dex.actors.node.ComputeNode;

/**
 * What a process does through an actor system that is a member of the cluster, once {@link DexNodes} started it:
 * wait until it is Up, ask every compute node for its status, and leave gracefully. The {@code dex} commands and
 * the demo share these, so they live apart from both.
 */
final class ClusterMember {
    private ClusterMember() {
    }

    /**
     * Waits until {@code system} is Up in the cluster; after {@code max}, fails with what most often keeps a node
     * out (no seed node running, or TLS on one side only).
     */
    static void awaitSelfUp(ActorSystem<?> system, Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        while (Cluster.get(system).selfMember().status() != org.apache.pekko.cluster.MemberStatus.up()) {
            if (System.nanoTime() > deadline) {
                boolean tls = system.settings().config().getString("pekko.remote.artery.transport").equals("tls-tcp");
                throw new IllegalStateException("could not join the cluster in " + max.toSeconds() + " s: are the seed nodes"
                        + " running? This node uses " + (tls ? "mutual TLS; it joins only a cluster whose nodes use TLS with"
                        + " certificates of the same CA" : "plain TCP; it cannot join a cluster that uses TLS (give it --tls)"));
            }
            Thread.sleep(50);
        }
    }

    /** The status of every compute node the receptionist lists that answers, by address ({@link #computeAnswers}). */
    static List<ComputeNode.Status> computeStatuses(ActorSystem<?> system) throws Exception {
        return computeAnswers(system, SILENT_AFTER).statuses();
    }

    /** How long a listed node has to answer before it counts as silent. */
    static final Duration SILENT_AFTER = Duration.ofSeconds(2);

    /**
     * What the compute nodes the receptionist lists answered, by address, and the addresses of those that did not within
     * {@code silentAfter} (a node killed or cut off stays listed until the cluster removes it).
     */
    record ComputeAnswers(List<ComputeNode.Status> statuses, List<String> silent) {
    }

    /** Asks every listed compute node at once; one that does not answer within {@code silentAfter} is listed as silent. */
    static ComputeAnswers computeAnswers(ActorSystem<?> system, Duration silentAfter) throws Exception {
        Answers<ComputeNode.Command, ComputeNode.Status> answers = askEveryListed(system, ComputeNode.KEY, ComputeNode.GetStatus::new,
                silentAfter);
        List<ComputeNode.Status> statuses = new ArrayList<>(answers.answered());
        statuses.sort(java.util.Comparator.comparing(ComputeNode.Status::address));
        List<String> silent = new ArrayList<>(answers.silent().stream().map(node -> node.path().address().toString()).toList());
        silent.sort(null);
        return new ComputeAnswers(statuses, silent);
    }

    /**
     * What each memory node the Receptionist lists says of itself, by server id. The nodes are asked all at once, and one
     * that does not answer within 2 s is left out (shown by its member's status): a dead node still listed until the
     * cluster downs it costs a call those 2 s, not 5 s per dead node one after another.
     */
    static List<dev.dex.actors.node.MemoryNode.Description> memoryDescriptions(ActorSystem<?> system) throws Exception {
        List<dev.dex.actors.node.MemoryNode.Description> descriptions = new ArrayList<>(askEveryListed(system,
                dev.dex.actors.node.MemoryNode.KEY, dev.dex.actors.node.MemoryNode.Describe::new, SILENT_AFTER).answered());
        descriptions.sort(java.util.Comparator.comparingInt(dev.dex.actors.node.MemoryNode.Description::serverId));
        return descriptions;
    }

    /** The answers of the nodes that answered, in listing order, and the nodes that did not. */
    private record Answers<C, A>(List<A> answered, List<ActorRef<C>> silent) {
    }

    /**
     * Asks every node the Receptionist lists under {@code key} at once, with {@code request}; a node that does not answer
     * within {@code timeout} (killed or cut off, and listed until the cluster removes it) is counted as silent.
     */
    private static <C, A> Answers<C, A> askEveryListed(ActorSystem<?> system, ServiceKey<C> key,
                                                      java.util.function.Function<ActorRef<A>, C> request, Duration timeout)
            throws Exception {
        Receptionist.Listing listing = AskPattern.<Receptionist.Command, Receptionist.Listing>ask(system.receptionist(),
                r -> Receptionist.find(key, r), Duration.ofSeconds(5), system.scheduler()).toCompletableFuture()
                .get(10, TimeUnit.SECONDS);
        List<ActorRef<C>> nodes = new ArrayList<>(listing.getServiceInstances(key));
        List<java.util.concurrent.CompletableFuture<A>> asked = new ArrayList<>();
        for (ActorRef<C> node : nodes) {
            asked.add(AskPattern.<C, A>ask(node, request::apply, timeout, system.scheduler()).toCompletableFuture());
        }
        List<A> answered = new ArrayList<>();
        List<ActorRef<C>> silent = new ArrayList<>();
        for (int i = 0; i < nodes.size(); i++) {
            try {
                answered.add(asked.get(i).get(timeout.toMillis() + 10_000, TimeUnit.MILLISECONDS));
            } catch (java.util.concurrent.ExecutionException notAnswered) {
                silent.add(nodes.get(i));
            }
        }
        return new Answers<>(answered, silent);
    }

    /** Leaves the cluster gracefully and waits (up to 30 s) for the system to stop; whether it stopped. */
    static boolean leave(ActorSystem<?> system) throws Exception {
        return leave(system, org.apache.pekko.actor.CoordinatedShutdown.clusterLeavingReason());
    }

    /**
     * As {@link #leave(ActorSystem)}, giving coordinated shutdown {@code reason}: {@code LeaveDrain.CLUSTER_STOP} when
     * every node is being stopped, so that a compute node does not hand its partitions over to nodes that stop next.
     */
    static boolean leave(ActorSystem<?> system, org.apache.pekko.actor.CoordinatedShutdown.Reason reason) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        system.getWhenTerminated().thenRun(done::countDown);
        org.apache.pekko.actor.CoordinatedShutdown.get(system).runAll(reason);
        return done.await(30, TimeUnit.SECONDS);
    }

    /** The operations per second of all partitions {@code status}'s node holds over its last window; NaN before its first. */
    static double load(ComputeNode.Status status) {
        if (!(status.loadWindowSeconds() > 0)) {
            return Double.NaN;
        }
        return status.partitionRates().stream().mapToDouble(Double::doubleValue).sum();
    }

    /**
     * How evenly the compute nodes share partitions and load: the fewest and most partitions a node holds, and, once
     * every node measured a window, the busiest and least busy node's operations per second. Empty without nodes.
     */
    static String balanceLine(List<ComputeNode.Status> statuses) {
        if (statuses.isEmpty()) {
            return "";
        }
        java.util.IntSummaryStatistics held = statuses.stream().mapToInt(s -> s.partitionsHeld().size()).summaryStatistics();
        String line = String.format("balance: %d to %d partitions per compute node", held.getMin(), held.getMax());
        if (statuses.stream().anyMatch(s -> Double.isNaN(load(s)))) {
            return line;
        }
        java.util.DoubleSummaryStatistics load = statuses.stream().mapToDouble(ClusterMember::load).summaryStatistics();
        String ratio = load.getMin() > 0 ? String.format(" (%.2fx)", load.getMax() / load.getMin()) : "";
        return line + String.format("; load from %,.0f to %,.0f operations per second per node%s", load.getMin(), load.getMax(),
                ratio);
    }
}
