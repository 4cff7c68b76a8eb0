package dev.dex.rdma.replica;

/**
 * A compute node's permission to read a group's primary in one view (docs/replication.md, "Read leases"): held while
 * every backup of the view granted it within the lease. A backup becomes primary only once every lease it granted has
 * run out, so a read that completed while the lease was held was served before any change of a newer view could count,
 * however late the client learns of that view. Where a replica's gate is exact without it ({@code local}, whose
 * replicas share the clients' process) the lease is {@link #NONE}.
 *
 * <p>Concurrency: thread-safe; {@link #held} is called on every read and must be cheap (a volatile read and a clock read).
 */
public interface ReadLease extends AutoCloseable {
    /** Always held: for sets whose gates refuse a stale view exactly, and for views without backups. */
    ReadLease NONE = new ReadLease() {
        @Override
        public boolean held() {
            return true;
        }

        @Override
        public void renewSoon() {
        }

        @Override
        public long patienceNanos() {
            return 0;
        }

        @Override
        public String why() {
            return "held";
        }

        @Override
        public void close() {
        }
    };

    /** Whether the lease covers this moment. Checked before a read and again after it completed. */
    boolean held();

    /** Asks the backups again now, rather than at the next renewal (a read is waiting). */
    void renewSoon();

    /** How long a read waits for a lease not held before it looks for a newer view or fails: about one lease. */
    long patienceNanos();

    /** Why the lease is not held, for errors: which backup did not grant it, and its answer. */
    String why();

    /** Stops renewing: the view was replaced or the client closed. Not held from then on. */
    @Override
    void close();
}
