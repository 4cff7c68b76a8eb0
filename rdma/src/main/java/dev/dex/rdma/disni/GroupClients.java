package dev.dex.rdma.disni;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.ReplicaEndpoints;
import dev.dex.rdma.replica.ReplicaGoneException;
import dev.dex.rdma.replica.ReplicaSet;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.replica.ViewGate;

/**
 * The compute side of {@code disni} replica groups, for one {@link DisniFabric}: a client that writes every replica of a
 * view itself ({@link #connectGroups}), the connections of each view it installs ({@link #replicaSet}), and the read
 * leases their backups grant ({@link ReadLeases}).
 *
 * <p>Concurrency: thread-safe; the read leases and the stand-in region of unreachable backups are made once, under this
 * object's monitor.
 */
final class GroupClients implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(GroupClients.class);

    private final DisniFabric fabric;
    private ReadLeases leases;
    private Region nothing;
    private boolean closed;
    /** For tests of the views' gate alone, whose replicas are plain regions that grant no lease: sets read without one. */
    volatile boolean readLeases = true;

    GroupClients(DisniFabric fabric) {
        this.fabric = fabric;
    }

    /**
     * Connects a compute node to replicated servers, each in the view given: a client that writes every replica of the
     * view itself ({@link ReplicatedRemoteMemory}, the compute-side write path of docs/replication.md), with a
     * {@code disni} connection in that view to each replica; {@link ReplicatedRemoteMemory#install} with
     * {@link #replicaSet} moves it to a later view. The replicas' clients share no process, so no {@link
     * ReplicaSet.Replica#words()} order; the primary's memory node stamps each change of a word instead, and a backup
     * stores only later stamps ({@link ViewAtomics}, "Stamps"), which rules out race 2 of docs/replication.md.
     *
     * @param clientId     the compute node's fabric identity
     * @param failoverWait how long a verb refused in a view waits for a newer one to be installed
     * @param failures     told of every backup that failed a change
     */
    ReplicatedRemoteMemory connectGroups(Map<Integer, ReplicaEndpoints> views, long clientId, java.time.Duration failoverWait,
                                                ReplicatedRemoteMemory.BackupFailures failures) {
        int max = views.keySet().stream().mapToInt(Integer::intValue).max().orElseThrow(
                () -> new IllegalArgumentException("connect needs at least one memory server"));
        long[] regionLengths = new long[max + 1];
        long[] chunkLengths = new long[max + 1];
        Map<Integer, ReplicaSet> sets = new java.util.HashMap<>();
        try {
            views.forEach((id, endpoints) -> {
                RdmaRegionDescriptor primary = DisniFabric.descriptorOf(id, endpoints.primary());
                ReplicaSet set = replicaSet(id, endpoints, clientId);
                sets.put(id, set);
                regionLengths[id] = primary.regionLength();
                chunkLengths[id] = set.primary().memory().chunkAllocator().chunkLength(id);
            });
        } catch (RuntimeException e) {
            for (ReplicaSet set : sets.values()) {
                set.lease().close();
                set.primary().memory().close();
                set.backups().forEach(backup -> backup.memory().close());
            }
            throw e;
        }
        return new ReplicatedRemoteMemory(sets, regionLengths, chunkLengths, ReplicatedRemoteMemory.DEFAULT_MIRROR_TIMEOUT, failoverWait,
                failures, () -> { });
    }

    /**
     * Server {@code serverId}'s replicas in a view, as client {@code clientId} reaches them: a connection in that view to
     * the primary and to each backup, and a read lease the backups grant ({@link ReadLeases}). A backup that cannot be reached stands in as a replica that fails every verb
     * ({@link ReplicaGoneException}), so every change fails on it until a view without it comes; a primary that cannot
     * be reached fails the call.
     *
     * @throws dev.dex.rdma.replica.StaleViewException when a replica is in a newer view already
     */
    ReplicaSet replicaSet(int serverId, ReplicaEndpoints endpoints, long clientId) {
        RemoteMemory primary = fabric.connect(Map.of(serverId, endpoints.primary()), clientId, endpoints.view());
        List<ReplicaSet.Replica> backups = new ArrayList<>();
        for (String backup : endpoints.backups()) {
            RemoteMemory memory;
            try {
                memory = fabric.connect(Map.of(serverId, backup), clientId, endpoints.view());
            } catch (dev.dex.rdma.replica.StaleViewException newer) {
                // The backup moved on already: this view is old, not the backup gone; the caller installs a newer one.
                primary.close();
                backups.forEach(replica -> replica.memory().close());
                throw newer;
            } catch (RuntimeException unreachable) {
                LOG.warn("memory server {}'s backup {} cannot be reached in view {}: {}", serverId, backup, endpoints.view(),
                        unreachable.toString());
                memory = goneReplica(serverId, backup, endpoints.view(), unreachable);
            }
            backups.add(new ReplicaSet.Replica(backup, memory, ReplicaSet.State.COMPLETE));
        }
        dev.dex.rdma.replica.ReadLease lease;
        try {
            lease = readLeases ? leases().lease(serverId, endpoints.view(), endpoints.backups(), clientId)
                    : dev.dex.rdma.replica.ReadLease.NONE;
        } catch (RuntimeException closing) {
            primary.close();
            backups.forEach(replica -> replica.memory().close());
            throw closing;
        }
        return new ReplicaSet(endpoints.view(), new ReplicaSet.Replica(endpoints.primary(), primary, ReplicaSet.State.COMPLETE), backups,
                lease);
    }

    /** The read leases of this fabric's clients of replica groups, renewed every quarter of the replicas' lease. */
    private synchronized ReadLeases leases() {
        if (closed) {
            throw new IllegalArgumentException("this disni fabric is closed");
        }
        if (leases == null) {
            leases = new ReadLeases(fabric, fabric.replication().lease());
        }
        return leases;
    }

    /** The control links kept for read leases: one per backup endpoint of a live lease (for tests). */
    synchronized int leaseLinks() {
        return leases == null ? 0 : leases.links();
    }

    /** A replica that cannot be reached: a retired gate over a small region of this process that no verb reaches. */
    private RemoteMemory goneReplica(int serverId, String endpoint, long view, RuntimeException why) {
        ViewGate gone = new ViewGate(serverId, endpoint, view);
        gone.retire("memory server " + serverId + "'s replica " + endpoint + " cannot be reached: " + why.getMessage());
        Region[] byServer = new Region[serverId + 1];
        byServer[serverId] = nothing();
        return new dev.dex.rdma.replica.GatedRemoteMemory(new dev.dex.rdma.DirectRemoteMemory(byServer, 0, () -> { }), gone, view);
    }

    private synchronized Region nothing() {
        if (nothing == null) {
            nothing = Region.offHeap(2L * dev.dex.rdma.RegionHeaderDescriptor.MIN_CHUNK_LENGTH);
            dev.dex.rdma.RegionFormat.format(nothing, dev.dex.rdma.RegionHeaderDescriptor.MIN_CHUNK_LENGTH);
        }
        return nothing;
    }

    @Override
    public synchronized void close() {
        closed = true;
        if (leases != null) {
            leases.close();
        }
    }
}
