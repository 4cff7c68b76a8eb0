package dev.dex.actors.node;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.disni.DisniReplicaRegion;
import dev.dex.rdma.local.LocalReplicaRegion;
import dev.dex.rdma.replica.GroupReplica;
import dev.dex.rdma.tcp.ReplicaStatus;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * A memory node's side of its replica group: what its fabric says of its replica, and the group changes the coordinator
 * asks of it (docs/replication.md). Over {@code tcp} the primary's region server orders and streams the changes; over
 * {@code local} the compute nodes write every replica themselves, and the node's replica only keeps its gate's view and
 * copies its region to a backup that joins ({@link LocalReplicaRegion}); over {@code disni} likewise, with the replicas on
 * other hosts learning of each other from their beats ({@link DisniReplicaRegion}). Elsewhere a node is the only copy
 * of its server.
 */
final class ReplicaControl {
    private ReplicaControl() {
    }

    /** The replica of {@code serverId} this node exported ({@code region}), as a description carries it. */
    static MemoryNode.Replica status(Fabric fabric, ExportedRegion region, int serverId) {
        if (region instanceof GroupReplica replica) {
            // A replica that is gone serves nothing, whatever its part was: the coordinator counts it out at once.
            String role = replica.gone() ? MemoryNode.Replica.DEMOTED_ROLE : replica.role().name();
            return new MemoryNode.Replica(role, replica.view(), 0, replica.complete() && !replica.gone(), replica.copyLeft(),
                    replica.primaryLost());
        }
        if (!(fabric instanceof TcpFabric tcp)) {
            return MemoryNode.Replica.SOLE;
        }
        ReplicaStatus status = tcp.replicaStatus(serverId);
        return new MemoryNode.Replica(status.role().name(), status.view(), status.applied(), status.complete(), status.copyLeft(),
                status.primaryLost(), status.regionId(), status.freshRegion(),
                status.kept() == null ? null : status.kept().role().name(), status.kept() == null ? 0 : status.kept().view());
    }

    /**
     * A backup's report that its primary is lost, {@code certain} when it is a {@code local} replica whose primary's gate
     * is retired: that replica refuses every verb for good, so the coordinator need not ask its node.
     */
    static ReplicaReports.PrimarySuspected primarySuspected(ExportedRegion region, MemoryNode.Description self) {
        return new ReplicaReports.PrimarySuspected(self, region instanceof GroupReplica replica && replica.primaryRetired());
    }

    /** A primary's report of {@code lost} backups; over {@code local} each of them is gone for certain (its gate retired). */
    static ReplicaReports.BackupsSuspected backupsSuspected(ExportedRegion region, MemoryNode.Description self,
                                                               java.util.Map<String, String> lost) {
        return new ReplicaReports.BackupsSuspected(self, lost,
                region instanceof GroupReplica replica && replica.backupLossCertain() ? lost.keySet() : java.util.Set.of());
    }

    /**
     * A primary's gating backups whose link broke, by endpoint, with why: its answers wait for them until a view leaves
     * them out. Empty for any other replica, and when every gating backup's link is up.
     */
    static java.util.Map<String, String> lostBackups(Fabric fabric, ExportedRegion region, int serverId) {
        if (region instanceof GroupReplica replica) {
            return replica.lostBackups(); // every change waits for them (compute nodes write them) until a view leaves them out
        }
        if (!(fabric instanceof TcpFabric tcp)) {
            return java.util.Map.of();
        }
        ReplicaStatus status = tcp.replicaStatus(serverId);
        if (status.role() != ReplicaStatus.Role.PRIMARY) {
            return java.util.Map.of();
        }
        java.util.Map<String, String> lost = new java.util.TreeMap<>();
        for (ReplicaStatus.Backup backup : status.backups()) {
            if (backup.gating() && backup.broken() != null) {
                lost.putIfAbsent(backup.endpoint(), backup.broken());
            }
        }
        return lost;
    }

    /**
     * Carries out {@code replicate}; blocks (a promotion waits out the old primary's lease, a primary connects to its
     * backups), so never on an actor's thread.
     *
     * @throws IllegalStateException    when the fabric has no replica groups, or the replica cannot take that part
     * @throws IllegalArgumentException for an unknown operation or an older view
     */
    static void apply(Fabric fabric, ExportedRegion region, int serverId, MemoryNode.Replicate replicate) {
        if (region instanceof GroupReplica replica) {
            switch (replicate.op()) {
                case MemoryNode.Replicate.BECOME_BACKUP -> replica.becomeBackup(replicate.view());
                case MemoryNode.Replicate.BECOME_PRIMARY -> {
                    replica.becomePrimary(replicate.view());
                    replica.installView(replicate.view(), replicate.backups());
                }
                case MemoryNode.Replicate.INSTALL_VIEW -> replica.installView(replicate.view(), replicate.backups());
                default -> throw new IllegalArgumentException("unknown replica operation " + replicate.op());
            }
            return;
        }
        if (!(fabric instanceof TcpFabric tcp)) {
            throw new IllegalStateException("replica groups need the tcp, disni or local fabric; this memory node uses " + fabric.transport());
        }
        switch (replicate.op()) {
            case MemoryNode.Replicate.BECOME_BACKUP -> tcp.becomeBackup(serverId, replicate.view());
            case MemoryNode.Replicate.BECOME_PRIMARY -> tcp.becomePrimary(serverId, replicate.view(), replicate.backups());
            case MemoryNode.Replicate.INSTALL_VIEW -> tcp.installView(serverId, replicate.view(), replicate.backups());
            default -> throw new IllegalArgumentException("unknown replica operation " + replicate.op());
        }
    }
}
