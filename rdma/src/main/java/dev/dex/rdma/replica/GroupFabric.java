package dev.dex.rdma.replica;

import java.util.Map;

/**
 * A fabric whose compute nodes write every replica of a replica group themselves (docs/replication.md, "The
 * compute-side write path"): {@code local} and {@code disni}, whose memory nodes never see a one-sided verb. Its memory
 * nodes each export one replica, which takes the parts the cluster's coordinator gives it; its compute nodes connect to
 * every replica of each group's view and move to each newer one. ({@code tcp} replicates on the memory side instead.)
 */
public interface GroupFabric {
    /** Exports memory server {@code serverId}'s region as one replica of its group, with no part yet. */
    GroupReplica exportReplica(int serverId, long regionLength, int chunkLength);

    /**
     * Connects compute node {@code clientId} to replicated servers, each in the view given: a client that writes every
     * replica of the view ({@link ReplicatedRemoteMemory}); {@link ReplicatedRemoteMemory#install} with
     * {@link #replicaSet} moves it to a later view. A verb refused in a view waits the fabric's failover wait for the next.
     *
     * @param failures told of every backup that failed a change
     */
    ReplicatedRemoteMemory connectGroups(Map<Integer, ReplicaEndpoints> views, long clientId,
                                         ReplicatedRemoteMemory.BackupFailures failures);

    /** Server {@code serverId}'s replicas in a view, as compute node {@code clientId} reaches them. */
    ReplicaSet replicaSet(int serverId, ReplicaEndpoints endpoints, long clientId);
}
