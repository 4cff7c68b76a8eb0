package dev.dex.cluster;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;

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
 *       none answers (the whole cluster is gone).</li>
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
            List<String> remembered = region.fresh() ? List.of() : ClusterContacts.read(contactsFile);
            AtomicReference<List<String>> contacts = new AtomicReference<>(remembered);
            boolean configuredSeeds = !config.getStringList("pekko.cluster.seed-nodes").isEmpty();
            Config nodeConfig = config;
            for (int run = 1; ; run++) {
                ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
                    context.spawn(MemoryNode.create(region), "memory");
                    context.spawn(ClusterContacts.create(contacts, contactsFile), "cluster-contacts");
                    return Behaviors.empty();
                }), DexNodes.SYSTEM, nodeConfig);
                Address self = Cluster.get(system).selfMember().address();
                List<String> others = new ArrayList<>(contacts.get());
                if (run > 1) {
                    for (String seed : config.getStringList("pekko.cluster.seed-nodes")) {
                        String hostPort = seed.substring(seed.indexOf('@') + 1);
                        if (!others.contains(hostPort)) {
                            others.add(hostPort);
                        }
                    }
                }
                others.remove(self.getHost().orElse("127.0.0.1") + ":" + self.getPort().orElse(0));
                if (run > 1) {
                    // Downed: rejoin the cluster it was in, never a new one of its own (the others may be cut off for a
                    // while; a cluster of its own would then split the index's membership for good).
                    join(system, others, false);
                    LOG.warn("memory node {} rejoins the cluster through {} with a new incarnation; its region stayed exported",
                            serverId, others);
                } else if (!configuredSeeds && !others.isEmpty()) {
                    join(system, others, true);
                    LOG.info("memory node {} restarted on its kept region: rejoining the cluster it last saw through {}"
                            + " (a new cluster of its own if none of them answers)", serverId, others);
                } else if (!configuredSeeds) {
                    Cluster.get(system).manager().tell(org.apache.pekko.cluster.typed.Join.create(self));
                }
                DexNodes.operatorEndpoint(system, config);
                out.println("memory node " + serverId + " up at " + DexNodes.hostPort(system) + "; stop with Ctrl-C (a graceful leave)");
                out.flush();
                system.getWhenTerminated().toCompletableFuture().get();
                Optional<CoordinatedShutdown.Reason> reason = CoordinatedShutdown.get(system).getShutdownReason();
                if (reason.isEmpty() || !reason.get().equals(CoordinatedShutdown.clusterDowningReason())) {
                    return 0;
                }
                LOG.warn("the cluster downed memory node {} (run {}); it keeps serving its region and starts a new actor system"
                        + " to rejoin", serverId, run);
                nodeConfig = config.withValue("pekko.remote.artery.canonical.port", ConfigValueFactory.fromAnyRef(self.getPort().orElse(0)));
            }
        } finally {
            fabric.close();
        }
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
