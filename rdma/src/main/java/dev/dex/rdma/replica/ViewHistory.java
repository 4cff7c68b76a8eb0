package dev.dex.rdma.replica;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import dev.dex.rdma.FabricException;

/**
 * The recent views of one server's group that a client installed, by view number ({@link #HISTORY} at most), and what
 * they say of a change made in an older one (docs/replication.md, "A backup that fails a change"): whether it counts,
 * and whether a primary kept its role across them.
 *
 * <p>Concurrency: a concurrent sorted map; {@link #record} adds from any thread, readers walk it by view number. Two
 * installs racing may show a view before the one below it, for a moment: a walk then sees a gap and fails its change
 * (outcome unknown), never counts it wrongly.
 */
final class ViewHistory {
    /** Views kept; a change that waits longer than this many view changes fails. */
    static final int HISTORY = 16;

    private final ConcurrentSkipListMap<Long, ReplicaSet> history = new ConcurrentSkipListMap<>();

    ViewHistory(ReplicaSet first) {
        history.put(first.view(), first);
    }

    /** A view the client installed (or was offered: an older one is kept too, for the walks that need it). */
    void record(ReplicaSet view) {
        history.putIfAbsent(view.view(), view);
        while (history.size() > HISTORY) {
            history.pollFirstEntry();
        }
    }

    /**
     * A change is on the primary of {@code set} and on each of its backups but {@code failed}: waits until
     * {@code deadline} (or {@code closed}) for a newer view in which every replica holds it, so that it counts. It walks
     * the views installed since {@code set}'s one by one:
     * <ul>
     *   <li>each view's primary must hold the change, or it throws at once (a failover to a replica that failed it: a
     *       later view copied from that primary would lose it too);</li>
     *   <li>a replica that first appears in a view after {@code set}'s holds it once copied, because its copy starts
     *       after the primary's gate moved past {@code set}'s view, which the change passed before;</li>
     *   <li>the change counts at the first view every replica of which holds it and none of which failed it.</li>
     * </ul>
     * A view this client never installed (the map went past it) leaves the change's history unknown, as does the deadline:
     * it throws {@code failure}, the change's outcome unknown, as for any failed verb.
     */
    void awaitHolding(ReplicaSet set, List<String> failed, FabricException failure, long deadline, BooleanSupplier closed) {
        Set<String> took = new HashSet<>();
        Set<String> seen = new HashSet<>();
        names(set).forEach(name -> {
            seen.add(name);
            took.add(name);
        });
        failed.forEach(took::remove);
        long walked = set.view();
        while (true) {
            ReplicaSet next = history.get(walked + 1);
            if (next == null && history.lastKey() > walked + 1) {
                next = history.get(walked + 1); // it may have come just now, with a later one
                if (next == null) {
                    throw failure; // a view went by unseen: what its primary did to the change is unknown
                }
            }
            if (history.firstKey() > walked + 1) {
                throw failure; // trimmed: too many views went by to know
            }
            if (next != null) {
                if (!took.contains(next.primary().name())) {
                    throw failure;
                }
                for (String name : names(next)) {
                    if (seen.add(name) && !failed.contains(name)) {
                        took.add(name); // joined after the change: its copy reads a primary that holds it
                    }
                }
                if (took.containsAll(names(next))) {
                    return;
                }
                walked = next.view();
                continue;
            }
            if (System.nanoTime() - deadline > 0 || closed.getAsBoolean()) {
                throw failure;
            }
            LockSupport.parkNanos(1_000_000);
        }
    }

    /**
     * Whether every view from {@code from}'s to {@code to}'s was installed here and had {@code from}'s primary: then no
     * other replica was primary in between, from which the primary could have been copied again.
     */
    boolean keptPrimary(ReplicaSet from, ReplicaSet to) {
        for (long v = from.view() + 1; v <= to.view(); v++) {
            ReplicaSet view = history.get(v);
            if (view == null || !view.primary().name().equals(from.primary().name())) {
                return false;
            }
        }
        return true;
    }

    private static List<String> names(ReplicaSet view) {
        List<String> names = new ArrayList<>(view.backups().size() + 1);
        names.add(view.primary().name());
        view.backups().forEach(backup -> names.add(backup.name()));
        return names;
    }
}
