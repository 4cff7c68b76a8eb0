package dev.dex.cluster;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;

import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.MemoryNodes;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;

/**
 * The demo's cluster as a whole, apart from what the demo does with it: the memory node's region size, the waits
 * until the tree is formatted, every member is Up, the compute nodes have registered and the partitions have
 * settled on them, and the stop in an operator's order. {@link Demo} starts the nodes ({@link DexNodes}) and
 * decides when to wait for what.
 */
final class DemoCluster {
    /** Compute nodes one demo JVM runs with the cluster's own failure-detection settings (at most). */
    static final int CROWDED = 9;
    /** How many compute nodes a crowded JVM starts before it waits for them to be Up. */
    static final int START_GROUP = 4;
    /** Compute nodes beyond which the cluster's fast ticks ({@link #PEKKO_TICKS}) go back to Pekko's defaults too. */
    static final int VERY_CROWDED = 24;
    /**
     * dex-cluster.conf's ticks (gossip, leader actions and the reaper every 0.1-0.25 s, heartbeats every 0.5 s, the
     * replicators' gossip every 0.25 s) at Pekko's defaults. (Sharding's replicator keeps Pekko's own: its copy of the
     * settings resolves from Pekko's reference, not from dex-cluster.conf.) With 33 compute nodes in one 2-core JVM the fast ones
     * starved the heartbeats (intervals of 10-50 s) and the resolver downed everyone, even with pauses of 30 s.
     */
    static final java.util.Map<String, String> PEKKO_TICKS = java.util.Map.of(
            "pekko.cluster.gossip-interval", "1s",
            "pekko.cluster.leader-actions-interval", "1s",
            "pekko.cluster.unreachable-nodes-reaper-interval", "1s",
            "pekko.cluster.failure-detector.heartbeat-interval", "1s",
            "pekko.cluster.distributed-data.gossip-interval", "2s",
            "pekko.cluster.distributed-data.notify-subscribers-interval", "500ms",
            "pekko.cluster.typed.receptionist.distributed-data.gossip-interval", "2s");
    static final String HEARTBEAT_PAUSE = "pekko.cluster.failure-detector.acceptable-heartbeat-pause";
    static final String STABLE_AFTER = "pekko.cluster.split-brain-resolver.stable-after";

    /**
     * {@code base} for a demo JVM that runs {@code computeNodes} compute nodes (the joining one included): beyond
     * {@link #CROWDED}, a failure detector that allows pauses of 10 s and a split-brain resolver that waits 10 s,
     * unless {@code userSettings} (system properties, application.conf) set them. With the cluster's own 2 s and 3 s,
     * 16 compute nodes in one JVM on a 2-core host missed heartbeats while they formed, and the resolver downed them
     * all (docs/cluster.md). Beyond {@link #VERY_CROWDED}, also {@link #PEKKO_TICKS}. Otherwise {@code base} itself.
     */
    static Config forCrowdedJvm(Config base, int computeNodes, Config userSettings) {
        if (computeNodes <= CROWDED) {
            return base;
        }
        Config relaxed = ConfigFactory.empty();
        if (!setBy(userSettings, HEARTBEAT_PAUSE)) {
            relaxed = relaxed.withValue(HEARTBEAT_PAUSE, ConfigValueFactory.fromAnyRef("10s"));
        }
        if (!setBy(userSettings, STABLE_AFTER)) {
            relaxed = relaxed.withValue(STABLE_AFTER, ConfigValueFactory.fromAnyRef("10s"));
        }
        if (computeNodes > VERY_CROWDED) {
            for (var tick : new java.util.TreeMap<>(PEKKO_TICKS).entrySet()) {
                if (!setBy(userSettings, tick.getKey())) {
                    relaxed = relaxed.withValue(tick.getKey(), ConfigValueFactory.fromAnyRef(tick.getValue()));
                }
            }
        }
        return relaxed.isEmpty() ? base : relaxed.withFallback(base);
    }

    private static boolean setBy(Config userSettings, String path) {
        try {
            return userSettings.hasPath(path);
        } catch (com.typesafe.config.ConfigException.NotResolved substitution) {
            return true; // set through a substitution: the user's
        }
    }

    private DemoCluster() {
    }

    /**
     * Stops the cluster the way an operator would, so that a normal exit logs nothing alarming: the client
     * leaves first, then the compute nodes one by one (each hands its partitions off together, not a few per round:
     * the nodes they would go to stop next), then the memory node.
     * Each leaves gracefully (coordinated shutdown), so the others see it removed before its connections
     * close; a system that does not stop within 30 s is terminated.
     */
    static void leaveInOrder(List<ActorSystem<?>> systems) throws Exception {
        List<ActorSystem<?>> clients = new ArrayList<>();
        List<ActorSystem<?>> computeNodes = new ArrayList<>();
        List<ActorSystem<?>> memoryNodes = new ArrayList<>();
        for (ActorSystem<?> system : systems) {
            var roles = Cluster.get(system).selfMember().getRoles();
            (roles.contains("memory") ? memoryNodes : roles.contains("compute") ? computeNodes : clients).add(system);
        }
        // Compute nodes youngest first: the oldest runs the sharding coordinator, which moves once, if at all. (Their
        // age is the cluster's, not their start order: nodes Up in one leader round are ordered by address.)
        computeNodes.sort(java.util.Comparator.comparing((ActorSystem<?> node) -> Cluster.get(node).selfMember(),
                org.apache.pekko.cluster.Member.ageOrdering()).reversed());
        List<List<ActorSystem<?>>> phases = new ArrayList<>();
        clients.forEach(client -> phases.add(List.of(client)));
        if (computeNodes.size() > CROWDED) {
            // One by one, 33 nodes took minutes (each leave waits for gossip to converge). All but the oldest leave
            // together; the oldest keeps the coordinator, which their regions' handoffs ask, until they are gone.
            phases.add(computeNodes.subList(0, computeNodes.size() - 1));
            phases.add(List.of(computeNodes.get(computeNodes.size() - 1)));
        } else {
            computeNodes.forEach(node -> phases.add(List.of(node)));
        }
        memoryNodes.forEach(memory -> phases.add(List.of(memory)));
        // Every phase runs, whatever an earlier one threw: no node is left running under a fabric that closes next.
        // (Agrona's closeAll: in order, the first failure thrown with the others suppressed.)
        org.agrona.CloseHelper.closeAll(phases.stream().map(phase -> (AutoCloseable) () -> leave(phase)).toList());
    }

    /** {@code systems} leave at once (the whole cluster stops); one that does not stop within 30 s is terminated. */
    private static void leave(List<ActorSystem<?>> systems) throws Exception {
        List<java.util.concurrent.CompletableFuture<Void>> leaving = new ArrayList<>();
        for (ActorSystem<?> system : systems) {
            leaving.add(java.util.concurrent.CompletableFuture.runAsync(() -> {
                try {
                    if (!ClusterMember.leave(system, dev.dex.actors.partition.LeaveDrain.CLUSTER_STOP)) {
                        system.terminate();
                        system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
                    }
                } catch (Exception e) {
                    throw new java.util.concurrent.CompletionException(e);
                }
            }, runnable -> new Thread(runnable, "demo-leave").start()));
        }
        try {
            java.util.concurrent.CompletableFuture.allOf(leaving.toArray(java.util.concurrent.CompletableFuture[]::new)).get();
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable cause = e.getCause() instanceof java.util.concurrent.CompletionException wrapped ? wrapped.getCause() : e.getCause();
            throw cause instanceof Exception exception ? exception : e;
        }
    }

    /**
     * Removes {@code system} itself from {@code systems}. Not {@link List#remove(Object)}: a typed actor system is an
     * actor reference (its user guardian), equal to every other system of the same name in this JVM (same local path,
     * uid 0), so that would remove the first system named {@code dex}, the memory node, and leave the stopped one in.
     */
    static void removeSame(List<? extends ActorSystem<?>> systems, ActorSystem<?> system) {
        if (!systems.removeIf(s -> s == system)) {
            throw new IllegalStateException(system.address() + " is not in the list");
        }
    }

    /**
     * The memory node's region: the loaded tree (about 96 bytes a key, splits included), one redo log per
     * partition in whole 1 MiB chunks plus the log directory's chunk, and room for the chunks each compute
     * node allocates for its splits.
     */
    static long regionMiB(long keys, int partitions, Config defaults) {
        long chunk = defaults.getBytes("dex.memory.chunk-size");
        long logChunks = (defaults.getBytes("dex.compute.redo-log-size") + chunk - 1) / chunk;
        long logsMiB = (partitions * logChunks + 1) * chunk >> 20;
        return Math.max(64, (keys * 96 >> 20) + 1 + logsMiB + 16);
    }

    /**
     * Deletes a directory of plain files the demo made for itself (its shm directory, where the memory node keeps its
     * region file when it stops; the log directory of a node process); nothing when it is not there.
     */
    static void deleteFlatDirectory(java.nio.file.Path directory) throws java.io.IOException {
        if (!java.nio.file.Files.isDirectory(directory)) {
            return;
        }
        try (var files = java.nio.file.Files.list(directory)) {
            for (java.nio.file.Path file : (Iterable<java.nio.file.Path>) files::iterator) {
                java.nio.file.Files.deleteIfExists(file);
            }
        }
        java.nio.file.Files.deleteIfExists(directory);
    }

    /** Waits until memory server 0 has formatted the tree, and returns a connection for the loader. */
    static RemoteMemory awaitFormatted(ActorSystem<?> memoryNode, Fabric fabric) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Map<Integer, String> endpoints = MemoryNodes.endpoints(memoryNode, 1, Duration.ofSeconds(30));
        while (true) {
            try {
                RemoteMemory memory = fabric.connect(endpoints);
                try {
                    PartitionTable.load(memory);
                    return memory;
                } catch (IllegalStateException notYet) {
                    memory.close();
                }
            } catch (IllegalArgumentException notExported) {
                // the memory node has not exported its region yet
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("memory node 0 did not format the tree within 30 s");
            }
            Thread.sleep(20);
        }
    }

    /** Waits until every one of {@code systems} is Up in the cluster, all within {@code max}. */
    static void awaitUp(List<ActorSystem<?>> systems, Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        for (ActorSystem<?> system : systems) {
            while (Cluster.get(system).selfMember().status() != MemberStatus.up()) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the cluster did not come up in " + max.toSeconds() + " s");
                }
                Thread.sleep(20);
            }
        }
    }

    /** Waits until {@code count} compute nodes answer a status request from {@code system}. */
    static void awaitComputeNodes(ActorSystem<?> system, int count, Duration max) throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        while (ClusterMember.computeStatuses(system).size() < count) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(count + " compute nodes did not come up in " + max.toSeconds() + " s");
            }
            Thread.sleep(100);
        }
    }

    /**
     * Touches every partition (sharding starts a moved partition on its first message) until each of {@code nodes}
     * compute nodes holds its share and every partition is held exactly once, for two checks in a row. The last of
     * {@code table}'s {@code partitions} is touched at {@code lastKey}, the largest loaded key.
     */
    static List<ComputeNode.Status> awaitRebalance(DexClientApi client, ActorSystem<?> system, PartitionTable table, int partitions,
            long lastKey, int nodes, Duration max) throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        String previous = "";
        while (System.nanoTime() < deadline) {
            // Every partition answers a get, asked all at once: one after another, 256 partitions of a crowded demo took
            // 10-15 s a pass, which the settled time then measured instead of the rebalance.
            java.util.concurrent.CompletableFuture<?>[] gets = new java.util.concurrent.CompletableFuture<?>[partitions];
            for (int p = 0; p < partitions; p++) {
                // A partition's upper bound is a loaded key (bounds are leaf fences); the last one is the largest key.
                long key = p == partitions - 1 ? lastKey : table.upperInclusive(p);
                gets[p] = client.get(key).toCompletableFuture();
            }
            java.util.concurrent.CompletableFuture.allOf(gets).get(60, TimeUnit.SECONDS);
            List<ComputeNode.Status> statuses;
            try {
                statuses = ClusterMember.computeStatuses(system);
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                // A compute node that just left may still be listed and no longer answers: not settled yet.
                previous = "";
                Thread.sleep(250);
                continue;
            }
            int total = 0;
            int smallest = Integer.MAX_VALUE;
            int largest = 0;
            for (ComputeNode.Status s : statuses) {
                total += s.partitionsHeld().size();
                smallest = Math.min(smallest, s.partitionsHeld().size());
                largest = Math.max(largest, s.partitionsHeld().size());
            }
            String map = statuses.stream().map(ComputeNode.Status::partitionsHeld).toList().toString();
            // Where the least-shard strategy stops: every node within one of the rounded-up share, and no more. A looser
            // check (the rounded-down share minus one) took a map one round early for settled.
            int share = (partitions + nodes - 1) / nodes;
            boolean balanced = statuses.size() == nodes && total == partitions && largest <= share && smallest >= share - 1;
            if (balanced && map.equals(previous)) {
                return statuses;
            }
            previous = balanced ? map : "";
            Thread.sleep(250);
        }
        throw new IllegalStateException("partitions did not settle on " + nodes + " compute nodes within "
                + max.toSeconds() + " s");
    }

    /**
     * Seconds from {@code since} until every one of {@code partitions} has answered a get (of a key inside it that the
     * mix never writes: between two loaded keys). All are asked at once, and each again 20 ms after a failed try (a try
     * waits at most 2 s): asked one after another, 512 partitions took 18 s to check behind the mix, after they all
     * served again within a second.
     */
    static double awaitPartitionsServe(DexClientApi client, PartitionTable table, List<Integer> partitions, long since,
            Duration max) throws Exception {
        return awaitServed(partitionsServe(client, table, partitions, since, max), max);
    }

    /** The seconds {@code serving} ({@link #partitionsServe}, started with {@code max}) completes with, or its failure. */
    static double awaitServed(java.util.concurrent.CompletableFuture<Double> serving, Duration max) throws Exception {
        try {
            return serving.get(max.toSeconds() + 5, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            throw e.getCause() instanceof IllegalStateException stuck ? stuck : e;
        }
    }

    /**
     * {@link #awaitPartitionsServe} started, not awaited: completes with the seconds from {@code since} until every one of
     * {@code partitions} has answered, or fails with the first that did not within {@code max}.
     */
    static java.util.concurrent.CompletableFuture<Double> partitionsServe(DexClientApi client, PartitionTable table,
            List<Integer> partitions, long since, Duration max) {
        long deadline = System.nanoTime() + max.toNanos();
        List<java.util.concurrent.CompletableFuture<Long>> answered = new ArrayList<>();
        for (int partition : partitions) {
            long key = table.lowerExclusive(partition) + 1;
            if (key % DemoWorkload.KEY_SPACING == 0) {
                key++;
            }
            long inside = key;
            java.util.concurrent.CompletableFuture<Long> at = new java.util.concurrent.CompletableFuture<>();
            askUntilAnswered(() -> client.get(inside), deadline, at);
            answered.add(at.exceptionally(notYet -> {
                throw new IllegalStateException("partition " + partition + " did not serve again within " + max.toSeconds()
                        + " s: " + notYet);
            }));
        }
        return java.util.concurrent.CompletableFuture.allOf(answered.toArray(java.util.concurrent.CompletableFuture[]::new))
                .thenApply(done -> (answered.stream().mapToLong(java.util.concurrent.CompletableFuture::join).max()
                        .orElse(since) - since) / 1e9);
    }

    /** Completes {@code at} with the time {@code operation} first answers, asking again 20 ms after each failed try. */
    private static void askUntilAnswered(java.util.function.Supplier<java.util.concurrent.CompletionStage<?>> operation,
            long deadline, java.util.concurrent.CompletableFuture<Long> at) {
        java.util.concurrent.CompletableFuture<?> asked;
        try {
            asked = operation.get().toCompletableFuture();
        } catch (RuntimeException refused) {
            asked = java.util.concurrent.CompletableFuture.failedFuture(refused);
        }
        asked.orTimeout(2, TimeUnit.SECONDS).whenComplete((answer, failure) -> {
            if (failure == null) {
                at.complete(System.nanoTime());
            } else if (System.nanoTime() > deadline) {
                at.completeExceptionally(failure);
            } else {
                java.util.concurrent.CompletableFuture.delayedExecutor(20, TimeUnit.MILLISECONDS)
                        .execute(() -> askUntilAnswered(operation, deadline, at));
            }
        });
    }

    /**
     * The address, of {@code computeNodes}, of the node that runs the partitions' shard coordinator (the oldest compute
     * node, once the cluster has settled), as {@code asker} finds it: a lookup of the coordinator's path at each address,
     * again every 20 ms (during a hand-over, or after its node was killed) for at most {@code max}.
     *
     * @throws IllegalStateException when none of them runs it within {@code max}
     */
    static org.apache.pekko.actor.Address awaitCoordinator(ActorSystem<?> asker, List<org.apache.pekko.actor.Address> computeNodes,
            Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        while (true) {
            for (org.apache.pekko.actor.Address node : computeNodes) {
                if (runsCoordinator(asker, node)) {
                    return node;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no compute node ran the shard coordinator within " + max.toSeconds() + " s");
            }
            Thread.sleep(20);
        }
    }

    /** Whether the node at {@code node} runs the partitions' shard coordinator, as {@code asker} looks it up. */
    private static boolean runsCoordinator(ActorSystem<?> asker, org.apache.pekko.actor.Address node) {
        String path = node + dev.dex.actors.partition.ProbedRebalance.coordinatorPath(asker, dev.dex.actors.partition.Partition.TYPE_KEY.name());
        try {
            org.apache.pekko.actor.typed.javadsl.Adapter.toClassic(asker).actorSelection(path).resolveOne(Duration.ofSeconds(1))
                    .toCompletableFuture().get(2, TimeUnit.SECONDS);
            return true;
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException notThere) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** The addresses of the compute nodes that {@code system}'s cluster has Up. */
    static List<org.apache.pekko.actor.Address> upComputeNodes(ActorSystem<?> system) {
        List<org.apache.pekko.actor.Address> nodes = new ArrayList<>();
        for (org.apache.pekko.cluster.Member member : Cluster.get(system).state().getMembers()) {
            if (member.status() == MemberStatus.up() && member.hasRole("compute")) {
                nodes.add(member.address());
            }
        }
        return nodes;
    }

    /**
     * Asks {@code operation} again until it answers (each try waits at most 2 s, then 20 ms between tries); past
     * {@code deadline} ({@link System#nanoTime()}) it fails with {@code failure} and the last try's error.
     */
    static void awaitAnswer(java.util.function.Supplier<java.util.concurrent.CompletionStage<?>> operation, long deadline,
            String failure) throws InterruptedException {
        java.util.concurrent.CompletableFuture<Long> answered = new java.util.concurrent.CompletableFuture<>();
        askUntilAnswered(operation, deadline, answered);
        try {
            answered.get();
        } catch (java.util.concurrent.ExecutionException notYet) {
            throw new IllegalStateException(failure + ": " + notYet.getCause());
        }
    }
}
