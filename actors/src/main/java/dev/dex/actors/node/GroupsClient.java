package dev.dex.actors.node;

import java.util.HashMap;
import java.util.Map;

import org.slf4j.Logger;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.EngineMode;
import dev.dex.core.offload.OffloadSettings;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.GroupFabric;
import dev.dex.rdma.replica.ReplicaEndpoints;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;

/**
 * A compute node's side of replica groups on the {@code local} and {@code disni} fabrics (docs/replication.md, "The
 * compute-side write path"): the node connects to every replica of each group's view in the map, writes each change to
 * all of them itself, and moves to each newer view the map brings. An offload would change the primary's region alone,
 * so the engine sends none. Elsewhere the node connects as usual (over {@code tcp} the primary streams to its backups).
 *
 * <p>Concurrency: static functions, called on the compute node's actor thread; the connection they make is
 * thread-safe ({@link ReplicatedRemoteMemory}).
 */
final class GroupsClient {
    private GroupsClient() {
    }

    /**
     * How a compute node reaches the memory pool: its connection, the replicated one when it writes every replica itself
     * (null otherwise), and the engine settings to open with.
     */
    record Pool(RemoteMemory connection, ReplicatedRemoteMemory replicated, DexEngineSettings engine) {
    }

    /**
     * Connects to servers {@code ids}: with replica groups on {@code local} or {@code disni}, to every replica of each
     * group's view in {@code groups} with offloading off; otherwise through {@code fabric} to {@code endpoints} as
     * {@code clientId}.
     *
     * @throws IllegalStateException when a server's group is not formed yet (the node tries again later)
     */
    static Pool open(Fabric fabric, ComputeNode.Settings settings, ReplicaGroups groups, int[] ids, Map<Integer, String> endpoints,
                     long clientId, Logger log) {
        if (settings.replicas() > 1 && writesEveryReplica(fabric)) {
            Map<Integer, ReplicaEndpoints> views = new HashMap<>();
            for (int id : ids) {
                ReplicaGroups.Group group = groups.group(id);
                if (group == null) {
                    throw new IllegalStateException("memory server " + id + "'s replica group is not formed yet");
                }
                views.put(id, endpoints(group));
            }
            ReplicatedRemoteMemory.BackupFailures failures = (server, view, replica, cause) -> log.warn(
                    "memory server {}'s backup {} failed a change in view {}: {}", server, replica, view, cause.getMessage());
            ReplicatedRemoteMemory replicated = ((GroupFabric) fabric).connectGroups(views, clientId, failures);
            return new Pool(replicated, replicated, withoutOffloads(settings.engine()));
        }
        return new Pool(fabric.connect(endpoints, clientId), null, settings.engine());
    }

    /** Whether a compute node on {@code fabric} writes every replica of a group itself: {@code local} and {@code disni}. */
    static boolean writesEveryReplica(Fabric fabric) {
        return fabric instanceof GroupFabric;
    }

    /**
     * Moves {@code replicated} (null: nothing to do) to every newer view in {@code groups} of a server it is connected to,
     * as the compute node of {@code system}. A replica set that cannot be made (a {@code disni} primary out of reach) is
     * logged and left: the node calls this on every change of the map and every health tick, so it is tried again.
     */
    static void follow(ReplicatedRemoteMemory replicated, Fabric fabric, ReplicaGroups groups,
                       org.apache.pekko.actor.typed.ActorSystem<?> system, Logger log) {
        if (replicated == null) {
            return;
        }
        long clientId = Fabrics.clientId(org.apache.pekko.cluster.typed.Cluster.get(system).selfMember().uniqueAddress());
        for (ReplicaGroups.Group group : groups.groups()) {
            if (replicated.connected(group.serverId()) && group.view() > replicated.view(group.serverId()).view()) {
                // From now on the node's changes go to the new view's replicas; its verbs of the old one are refused.
                try {
                    replicated.install(group.serverId(), ((GroupFabric) fabric).replicaSet(group.serverId(), endpoints(group), clientId));
                } catch (RuntimeException e) {
                    log.warn("memory server {}'s view {} cannot be installed yet: {}", group.serverId(), group.view(), e.toString());
                }
            }
        }
    }

    private static ReplicaEndpoints endpoints(ReplicaGroups.Group group) {
        return new ReplicaEndpoints(group.view(), group.primary().endpoint(),
                group.backups().stream().map(ReplicaGroups.Replica::endpoint).toList());
    }

    /**
     * {@code engine} with offloading off: {@code dex} runs as {@code no-offload}; a mode that never offloads stays.
     *
     * @throws IllegalStateException for a mode that offloads every miss ({@code DexSettings} refuses it at start)
     */
    static DexEngineSettings withoutOffloads(DexEngineSettings engine) {
        if (engine.mode().policy() == OffloadSettings.Policy.NEVER) {
            return engine;
        }
        if (engine.mode() != EngineMode.DEX) {
            throw new IllegalStateException("engine mode " + engine.mode() + " offloads every miss; replica groups on local and disni need one"
                    + " that never offloads");
        }
        OffloadSettings o = engine.offload();
        return new DexEngineSettings(EngineMode.NO_OFFLOAD, engine.cacheBytes(), engine.coolingRatio(), engine.leafAdmission(),
                new OffloadSettings(OffloadSettings.Policy.NEVER, o.window(), o.sampleRate(), o.exploreRate(), o.localSearchNanos(),
                        o.cacheCoefficient(), o.exploreBudget()));
    }
}
