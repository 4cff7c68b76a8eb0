package dev.dex.rdma.replica;

import java.util.List;
import java.util.Objects;
import java.util.stream.Collectors;

import dev.dex.rdma.RemoteMemory;

/**
 * A memory server's replicas in one view of its group, as one client reaches them: the primary, which serves the reads
 * and orders the atomics, and the backups every change also goes to. A backup that is still being copied
 * ({@link State#COPYING}) takes every change too, but cannot become primary until its copy is done.
 *
 * @param view    the group's view; only grows
 * @param primary the primary's connection (complete by definition)
 * @param backups the backups' connections
 * @param lease   the client's permission to read the primary in this view ({@link ReadLease#NONE} where the replicas'
 *                gates are exact without one)
 */
public record ReplicaSet(long view, Replica primary, List<Replica> backups, ReadLease lease) {
    /** Whether a backup holds everything the primary held when its view began. */
    public enum State { COMPLETE, COPYING }

    /**
     * One replica as a client reaches it.
     *
     * @param name   the replica's name, for errors and logs
     * @param memory the client's connection to it, sending its verbs in the set's view
     * @param state  complete, or still being copied
     * @param words  the order every client in this process converges the replica's words in, or null where clients
     *               do not share one ({@link WordOrder}; without it a stalled convergence can leave a word stale)
     */
    public record Replica(String name, RemoteMemory memory, State state, WordOrder words) {
        public Replica {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(memory, "memory");
            Objects.requireNonNull(state, "state");
        }

        /** A replica whose clients share no order of convergences. */
        public Replica(String name, RemoteMemory memory, State state) {
            this(name, memory, state, null);
        }
    }

    public ReplicaSet {
        Objects.requireNonNull(primary, "primary");
        if (primary.state() != State.COMPLETE) {
            throw new IllegalArgumentException("a primary that is still being copied cannot serve: " + primary.name());
        }
        backups = List.copyOf(backups);
        Objects.requireNonNull(lease, "lease");
    }

    /** A set whose reads need no lease. */
    public ReplicaSet(long view, Replica primary, List<Replica> backups) {
        this(view, primary, backups, ReadLease.NONE);
    }

    @Override
    public String toString() {
        return "view " + view + ": primary " + primary.name() + (backups.isEmpty() ? ", no backup" : ", backups "
                + backups.stream().map(b -> b.name() + (b.state() == State.COPYING ? " (copying)" : "")).collect(Collectors.joining(", ")));
    }
}
