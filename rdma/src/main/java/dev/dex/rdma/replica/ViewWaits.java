package dev.dex.rdma.replica;

import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;

/**
 * How a verb of {@link ReplicatedRemoteMemory} waits for its group: for a newer view after a failure in its own
 * ({@link #next}), for views that hold a change a backup failed ({@link #awaitViewWithout}), and for a read lease
 * before it reads the primary ({@link #leased}).
 *
 * <p>Concurrency: thread-safe; it only reads the client's views (atomic references the client swaps) and parks.
 */
final class ViewWaits {
    /** While a verb waits for a lease, how often it asks the backups again. */
    private static final long ASK_AGAIN_NANOS = 5_000_000;
    private final AtomicReference<ReplicaSet>[] groups;
    private final ViewHistory[] installed;
    private final long failoverWaitNanos;
    private final BooleanSupplier closed;
    /** Per server: {@link System#nanoTime} of the first verb that failed for want of a read lease since one got it, or 0. */
    private final AtomicLongArray lapsedSince;

    ViewWaits(AtomicReference<ReplicaSet>[] groups, ViewHistory[] installed, long failoverWaitNanos, BooleanSupplier closed) {
        this.groups = groups;
        this.installed = installed;
        this.failoverWaitNanos = failoverWaitNanos;
        this.closed = closed;
        this.lapsedSince = new AtomicLongArray(groups.length);
    }

    /** When verbs on server {@code serverId} began to fail for want of a read lease, or 0 (one got it since). */
    long lapsedSince(int serverId) {
        return lapsedSince.get(serverId);
    }

    /** Whether {@code set}'s read lease is held now; if so, a verb at {@code address} ran under it. */
    boolean observe(ReplicaSet set, long address) {
        boolean held = set.lease().held();
        if (held) {
            leaseHeld(GlobalAddress.serverId(address));
        }
        return held;
    }

    /** A verb on server {@code serverId} ran under its read lease. */
    private void leaseHeld(int serverId) {
        if (lapsedSince.get(serverId) != 0) {
            lapsedSince.set(serverId, 0);
        }
    }

    /**
     * A verb failed in {@code set}'s view: waits up to the failover wait for a newer view of the server to be installed
     * (a failover, or a view that leaves a failed backup out) and returns it, for the verb to run again there; throws
     * {@code failure} when none comes in time.
     */
    ReplicaSet next(ReplicaSet set, long address, FabricException failure) {
        if (failoverWaitNanos == 0 || closed.getAsBoolean()) {
            throw failure;
        }
        AtomicReference<ReplicaSet> group = groups[GlobalAddress.serverId(address)];
        long deadline = System.nanoTime() + failoverWaitNanos;
        while (true) {
            ReplicaSet now = group.get();
            if (now.view() > set.view()) {
                return now;
            }
            if (System.nanoTime() - deadline > 0 || closed.getAsBoolean()) {
                throw failure;
            }
            LockSupport.parkNanos(1_000_000);
        }
    }

    /**
     * A change is on the primary of {@code set} and on each of its backups but {@code failed}: waits until
     * {@code deadline} for the views since {@code set}'s to make it count ({@link ViewHistory#awaitHolding}); throws
     * {@code failure} (the change's outcome unknown) when they do not, or without a failover wait, or at once when it
     * says this client is fenced.
     */
    void awaitViewWithout(ReplicaSet set, long address, List<String> failed, FabricException failure, long deadline) {
        if (failoverWaitNanos == 0 || closed.getAsBoolean() || failure instanceof dev.dex.rdma.FencedException) {
            // A fenced client's change counts in no view: nothing to wait for.
            throw failure;
        }
        installed[GlobalAddress.serverId(address)].awaitHolding(set, failed, failure, deadline, closed);
    }

    /**
     * {@code set}, once its read lease is held, or a newer view of its server whose lease is, whichever comes first. A
     * view waits the failover wait for its lease, and at least about a lease ({@link ReadLease#patienceNanos}), from the
     * first time a verb waits for it: {@code wait} holds that deadline ({@link System#nanoTime}) and its view, one per
     * verb, so that a verb that waits again in the same view does not start over, and one in a newer view does.
     *
     * @throws LeaseLapsedException when neither came by the deadline
     */
    ReplicaSet leased(ReplicaSet set, long address, long[] wait) {
        AtomicReference<ReplicaSet> group = groups[GlobalAddress.serverId(address)];
        long asked = System.nanoTime();
        set.lease().renewSoon();
        while (true) {
            ReplicaSet now = group.get();
            if (now.view() > set.view()) {
                set = now;
                set.lease().renewSoon();
            }
            if (set.lease().held()) {
                leaseHeld(GlobalAddress.serverId(address));
                return set;
            }
            if (closed.getAsBoolean()) {
                throw new FabricException("remote memory is closed");
            }
            long time = System.nanoTime();
            if (wait[0] == 0 || wait[1] != set.view()) {
                wait[0] = time + Math.max(failoverWaitNanos, set.lease().patienceNanos());
                wait[1] = set.view();
            }
            if (time - wait[0] > 0) {
                lapsedSince.compareAndSet(GlobalAddress.serverId(address), 0, time);
                throw new LeaseLapsedException("memory server " + GlobalAddress.serverId(address) + "'s primary cannot be read in view "
                        + set.view() + ": no read lease (" + set.lease().why() + "), and no newer view came; a failover may be under"
                        + " way, or this node is cut off from the group's backups");
            }
            if (time - asked > ASK_AGAIN_NANOS) {
                asked = time;
                set.lease().renewSoon(); // a backup that refused (it had not heard its primary's beat of the view yet)
            }
            LockSupport.parkNanos(200_000);
        }
    }
}
