package dev.dex.actors.node;

import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The {@link ReplicaCoordinator}'s rules for memory nodes restarted on kept regions (docs/replication.md, "The whole
 * group restarts"): which may form a group the map does not have, and which may serve again for a group whose every
 * replica was gone. Pure functions of the descriptions.
 */
final class KeptRegions {
    private KeptRegions() {
    }

    /** The memory node to form a group with when the map has none (docs/replication.md); null when none may. */
    static MemoryNode.Description founderOf(List<MemoryNode.Description> here) {
        MemoryNode.Description best = null;
        for (MemoryNode.Description d : here) {
            if (d.replica().keptRole() != null && (best == null || newer(d.replica(), best.replica()))) {
                best = d;
            }
        }
        if (best != null) {
            return best;
        }
        return here.stream().filter(d -> d.replica().freshRegion()).min(Comparator.comparing(d -> d.node().path().toString()))
                .orElse(null);
    }

    /**
     * A memory node of {@code group}'s server that restarted on the kept region of a member of the group's last view, and
     * whose region held every change answered in that view (docs/replication.md, "The whole group restarts"); its primary's
     * before a complete backup's. Null when none did (yet).
     */
    static MemoryNode.Description restartedMember(ReplicaGroups.Group group, List<MemoryNode.Description> here) {
        Set<Long> members = new HashSet<>();
        members.add(group.primary().regionId());
        group.backups().forEach(backup -> members.add(backup.regionId()));
        members.remove(0L);
        MemoryNode.Description best = null;
        for (MemoryNode.Description d : here) {
            MemoryNode.Replica replica = d.replica();
            if (MemoryNode.Replica.SOLE_ROLE.equals(replica.role()) && replica.keptRole() != null
                    && replica.keptView() == group.view() && members.contains(replica.regionId())
                    && (best == null || newer(replica, best.replica()))) {
                best = d;
            }
        }
        return best;
    }

    /** Whether kept region {@code a} is newer than {@code b}: a later view, or the same view's primary. */
    private static boolean newer(MemoryNode.Replica a, MemoryNode.Replica b) {
        if (a.keptView() != b.keptView()) {
            return a.keptView() > b.keptView();
        }
        return MemoryNode.Replica.PRIMARY_ROLE.equals(a.keptRole()) && !MemoryNode.Replica.PRIMARY_ROLE.equals(b.keptRole());
    }
}
