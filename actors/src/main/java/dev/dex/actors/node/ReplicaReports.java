package dev.dex.actors.node;

import java.util.Map;
import java.util.Set;

/**
 * What memory nodes report to the {@link ReplicaCoordinator} of their group's replicas (docs/replication.md, "Failover"):
 * a backup that lost its primary, a primary that lost backups. Immutable messages.
 */
public final class ReplicaReports {
    private ReplicaReports() {
    }

    /**
     * From a complete backup of a group's current view: its primary's stream closed or went silent (docs/replication.md,
     * "Failover"). The coordinator asks the primary's node; unless it answers as primary within
     * {@link ReplicaCoordinator#CONFIRM}, the primary counts as gone in that view, without waiting for the cluster's
     * failure detector. With {@code certain}, the backup knows the primary's replica can serve nobody any more
     * ({@code local}: its gate is retired for good, and the two share the process), so the coordinator fails over
     * without asking.
     */
    public record PrimarySuspected(MemoryNode.Description backup, boolean certain)
            implements ReplicaCoordinator.Command, dev.dex.actors.CborSerializable {
        /** A suspicion the coordinator confirms by asking the primary's node. */
        public PrimarySuspected(MemoryNode.Description backup) {
            this(backup, false);
        }
    }

    /**
     * From the primary of a group's current view: its links to these gating backups (endpoint, why) broke, and its answers
     * wait for them until a view leaves them out (docs/replication.md, "Failover"). The coordinator asks each backup's
     * node; unless it answers as a backup of that view within {@link ReplicaCoordinator#CONFIRM}, or while the link stays
     * broken for {@link ReplicaCoordinator#BACKUP_PATIENCE}, the backup counts as gone and a new view drops it. Dropping a
     * live backup costs its copy when it is added again, never a write. The backups in {@code certain} can serve nobody
     * any more ({@code local}: their gates are retired for good), so they are dropped without asking.
     */
    public record BackupsSuspected(MemoryNode.Description primary, Map<String, String> backups, Set<String> certain)
            implements ReplicaCoordinator.Command, dev.dex.actors.CborSerializable {
        public BackupsSuspected {
            backups = backups == null ? Map.of() : Map.copyOf(backups);
            certain = certain == null ? Set.of() : Set.copyOf(certain);
        }

        /** A report whose every backup the coordinator confirms by asking its node. */
        public BackupsSuspected(MemoryNode.Description primary, Map<String, String> backups) {
            this(primary, backups, Set.of());
        }
    }
}
