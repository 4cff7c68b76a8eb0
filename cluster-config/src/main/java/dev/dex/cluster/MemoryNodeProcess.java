package dev.dex.cluster;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.AddressFromURIString;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.JoinSeedNodes;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigValueFactory;

import dev.dex.actors.node.Fabrics;
import dev.dex.actors.node.MemoryNode;
import dev.dex.actors.node.MemoryRegion;
import dev.dex.rdma.Fabric;

/**
 * A memory node's process ({@code dex memory-node}): exports its region once and serves it for as long as the process
 * runs, whatever the cluster does to the actor system around it (docs/replication.md, "Downing").
 *
 * <ul>
 *   <li>When the cluster downs this node (it was cut off from the compute nodes, or paused), the actor system ends;
 *       the process starts a new one at the same address on the same region, which rejoins through the members it
 *       last saw ({@link ClusterContacts}). The region is never given up, so no data moves and the compute nodes'
 *       fabric connections carry on.</li>
 *   <li>A process started again on a kept region ({@code shm}, {@code tcp} with a region directory) without
 *       {@code --seed} rejoins the cluster its previous run left in the contacts file, rather than forming a cluster of
 *       its own: it tries them for {@code pekko.cluster.seed-node-timeout} first, and starts a new cluster only when
 *       none answers (the whole cluster is gone). Started so with {@code --seed}, it tries the seeds and those members
 *       alike, since the seeds of its first start may be gone.</li>
 *   <li>Any other end (a SIGTERM, a leave) ends the process, keeping the region where the fabric can.</li>
 * </ul>
 */
final class MemoryNodeProcess {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(MemoryNodeProcess.class);

    private MemoryNodeProcess() {
    }

    /** Runs the memory node until it is stopped; prints "memory node N up at host:port" each time it (re)joins. */
    static int run(Config config, DexSettings settings, PrintWriter out) throws Exception {
        int serverId = settings.memory().serverId();
        Fabric fabric = Fabrics.open(settings.fabric());
        try (MemoryRegion region = MemoryRegion.open(settings.memory(), fabric)) {
            Path kept = settings.fabric().keptRegions();
            Path contactsFile = kept == null ? null : ClusterContacts.file(kept, serverId);
            List<ClusterContacts.Contact> remembered = region.fresh() ? List.of() : ClusterContacts.read(contactsFile);
            AtomicReference<List<ClusterContacts.Contact>> contacts = new AtomicReference<>(remembered);
            boolean configuredSeeds = !config.getStringList("pekko.cluster.seed-nodes").isEmpty();
            // The server id as a role, so that the members remember which memory server a contact is.
            List<String> roles = new ArrayList<>(config.getStringList("pekko.cluster.roles"));
            roles.add(ClusterContacts.SERVER_ROLE + serverId);
            Config withRole = config.withValue("pekko.cluster.roles", ConfigValueFactory.fromIterable(roles));
            Config nodeConfig = withRole;
            for (int run = 1; ; run++) {
                ActorSystem<Void> system = startSystem(region, contacts, contactsFile, nodeConfig, run);
                if (system == null) {
                    // The address it had is taken (or the system failed to start): the next try takes any port;
                    // compute nodes learn where it is from its description, whatever the port.
                    nodeConfig = withRole.withValue("pekko.remote.artery.canonical.port", ConfigValueFactory.fromAnyRef(0));
                    Thread.sleep(Math.min(5_000, 500L * run));
                    continue;
                }
                Address self = Cluster.get(system).selfMember().address();
                List<String> others = new ArrayList<>();
                for (ClusterContacts.Contact contact : contacts.get()) {
                    others.add(contact.hostPort());
                }
                if (run > 1) {
                    for (String seed : config.getStringList("pekko.cluster.seed-nodes")) {
                        String hostPort = seed.substring(seed.indexOf('@') + 1);
                        if (!others.contains(hostPort)) {
                            others.add(hostPort);
                        }
                    }
                }
                String selfHostPort = self.getHost().orElse("127.0.0.1") + ":" + self.getPort().orElse(0);
                others.remove(selfHostPort);
                List<String> seeds = seedsThenRemembered(config.getStringList("pekko.cluster.seed-nodes"), List.of());
                if (run > 1 && !others.isEmpty()) {
                    // Downed: rejoin the cluster it was in, never a new one of its own (the others may be cut off for a
                    // while; a cluster of its own would then split the index's membership for good).
                    join(system, others, false);
                    LOG.warn("memory node {} rejoins the cluster through {} with a new incarnation; its region stayed exported",
                            serverId, others);
                } else if (run == 1 && !configuredSeeds && !others.isEmpty()) {
                    // After a restart of the whole cluster every memory node may start this way: only the one of the lowest
                    // server id may form a cluster of its own (Pekko needs one first seed for all), the others wait for it.
                    int lowestRemembered = lowestMemoryServer(contacts.get());
                    boolean mayForm = mayFormACluster(serverId, contacts.get());
                    join(system, others, mayForm);
                    LOG.info("memory node {} restarted on its kept region: rejoining the cluster it last saw through {}{}", serverId,
                            others, mayForm ? " (a new cluster of its own if none of them answers)"
                                    : " (it waits for them: memory server " + lowestRemembered + " forms the cluster anew when the"
                                    + " whole cluster restarts; give --seed to join elsewhere)");
                } else if (run == 1 && configuredSeeds && !others.isEmpty() && !seeds.contains(selfHostPort)) {
                    // Started again on a kept region with the arguments of its first start: the seeds given then may be
                    // gone by now, so the members it last saw are tried too (whichever answers first). A seed naming the
                    // node itself is an operator forming a cluster anew: left to Pekko.
                    List<String> through = seedsThenRemembered(config.getStringList("pekko.cluster.seed-nodes"), others);
                    join(system, through, false);
                    LOG.info("memory node {} restarted on its kept region: joining through its seeds and the members it last"
                            + " saw, {}", serverId, through);
                } else if (!configuredSeeds) {
                    Cluster.get(system).manager().tell(org.apache.pekko.cluster.typed.Join.create(self));
                }
                DexNodes.operatorEndpoint(system, config);
                out.println("memory node " + serverId + " up at " + DexNodes.hostPort(system) + "; stop with Ctrl-C (a graceful leave)");
                out.flush();
                CoordinatedShutdown shutdown = CoordinatedShutdown.get(system);
                if (!awaitEnd(system.getWhenTerminated().toCompletableFuture(), shutdown::getShutdownReason,
                        () -> shutdown.runAll(shutdown.getShutdownReason().orElseThrow()).toCompletableFuture(), TERMINATION_GRACE_MS)) {
                    LOG.warn("memory node {}'s actor system did not terminate within {} ms of its coordinated shutdown (an"
                            + " association to a cut-off peer, say); the process goes on without waiting for it", serverId,
                            TERMINATION_GRACE_MS);
                }
                Optional<CoordinatedShutdown.Reason> reason = shutdown.getShutdownReason();
                if (reason.isEmpty() || !reason.get().equals(CoordinatedShutdown.clusterDowningReason())) {
                    return 0;
                }
                LOG.warn("the cluster downed memory node {} (run {}); it keeps serving its region and starts a new actor system"
                        + " to rejoin", serverId, run);
                nodeConfig = withRole.withValue("pekko.remote.artery.canonical.port", ConfigValueFactory.fromAnyRef(self.getPort().orElse(0)));
            }
        } finally {
            fabric.close();
        }
    }

    /** How long the process waits for its actor system to terminate once the system's coordinated shutdown is done. */
    static final long TERMINATION_GRACE_MS = 5_000;

    /**
     * Waits until the actor system has terminated, or its coordinated shutdown (started by anyone, for any reason) has
     * run every phase and {@code graceMs} more have passed: an actor system whose termination hangs (its last phase
     * timed out on an association to a peer behind a cut link) must not keep a downed memory node from rejoining.
     *
     * @param terminated completes when the actor system has terminated
     * @param reason the shutdown's reason, present once a coordinated shutdown began
     * @param shutdownDone the coordinated shutdown's own completion; asked for only once a reason is present
     * @return true when the system terminated; false when the wait gave up on it
     */
    static boolean awaitEnd(CompletableFuture<?> terminated, Supplier<Optional<?>> reason,
                            Supplier<CompletableFuture<?>> shutdownDone, long graceMs)
            throws InterruptedException {
        while (true) {
            try {
                terminated.get(500, TimeUnit.MILLISECONDS);
                return true;
            } catch (TimeoutException notYet) {
                if (reason.get().isPresent()) {
                    break;
                }
            } catch (ExecutionException failed) {
                return true; // terminated all the same
            }
        }
        CompletableFuture<?> done = shutdownDone.get();
        try {
            CompletableFuture.anyOf(terminated, done).get();
        } catch (ExecutionException failed) {
            // a phase failed: the shutdown is over all the same
        }
        try {
            terminated.get(graceMs, TimeUnit.MILLISECONDS);
            return true;
        } catch (TimeoutException hung) {
            return false;
        } catch (ExecutionException failed) {
            return true;
        }
    }

    /**
     * Starts run {@code run}'s actor system on {@code region}; null when it cannot start (its address is taken, say)
     * after the first run, which throws instead (a node started with a bad address is a configuration error).
     */
    private static ActorSystem<Void> startSystem(MemoryRegion region, AtomicReference<List<ClusterContacts.Contact>> contacts,
                                                 Path contactsFile, Config config, int run) {
        try {
            return ActorSystem.create(Behaviors.setup(context -> {
                context.spawn(MemoryNode.create(region), "memory", org.apache.pekko.actor.typed.DispatcherSelector.blocking());
                context.spawn(ClusterContacts.create(contacts, contactsFile), "cluster-contacts");
                return Behaviors.empty();
            }), DexNodes.SYSTEM, config);
        } catch (RuntimeException failed) {
            if (run == 1) {
                throw failed;
            }
            LOG.error("memory node {}: actor system run {} did not start ({}); trying again with any port",
                    region.settings().serverId(), run, failed.toString());
            return null;
        }
    }

    /**
     * Whether memory server {@code serverId}, restarted without {@code --seed} and remembering {@code contacts}, may form a
     * cluster of its own when none of them answers: only the one of the lowest server id among itself and the memory
     * nodes it remembers. Pekko forms a cluster only from one first seed node; two memory nodes that each put
     * themselves first after a restart of the whole cluster would form two clusters that never merge.
     */
    static boolean mayFormACluster(int serverId, List<ClusterContacts.Contact> contacts) {
        return serverId < lowestMemoryServer(contacts);
    }

    /** The lowest memory server id among {@code contacts}, or {@link Integer#MAX_VALUE} when none is a memory node. */
    private static int lowestMemoryServer(List<ClusterContacts.Contact> contacts) {
        int lowest = Integer.MAX_VALUE;
        for (ClusterContacts.Contact contact : contacts) {
            if (contact.memoryServer() >= 0) {
                lowest = Math.min(lowest, contact.memoryServer());
            }
        }
        return lowest;
    }

    /**
     * The members to join through when started again on a kept region with {@code --seed}: the seeds ({@code seedNodes},
     * as addresses) first, then each remembered member ({@code host:port}) that is not one of them.
     */
    static List<String> seedsThenRemembered(List<String> seedNodes, List<String> remembered) {
        List<String> through = new ArrayList<>();
        for (String seed : seedNodes) {
            through.add(seed.substring(seed.indexOf('@') + 1));
        }
        remembered.stream().filter(other -> !through.contains(other)).forEach(through::add);
        return through;
    }

    /** Joins through {@code others}; with {@code selfFirst} this node may start a cluster of its own if none answers. */
    private static void join(ActorSystem<?> system, List<String> others, boolean selfFirst) {
        List<Address> seeds = new ArrayList<>();
        if (selfFirst) {
            seeds.add(Cluster.get(system).selfMember().address());
        }
        for (String other : others) {
            seeds.add(AddressFromURIString.parse(DexNodes.seedAddress(other)));
        }
        Cluster.get(system).manager().tell(new JoinSeedNodes(seeds));
    }
}
