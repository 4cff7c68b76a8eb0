package dev.dex.rdma.replica;

import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Supplier;


/**
 * The view a replica is in, and the check that refuses a verb sent in an older one ({@link StaleViewException}). Where
 * the replica's memory and its clients share a process ({@code local}), the gate is exact: {@link #advance} returns
 * only once no verb of an older view is still running on the replica, and none starts after it. A transport whose
 * memory node never sees a verb must refuse old views another way (docs/replication.md).
 *
 * <p>Concurrency: changes run under the read lock of a {@link ReentrantReadWriteLock}, so they run in parallel with
 * each other; {@link #advance} and {@link #retire} take the write lock, so they return only once no change of an older
 * view is running. Reads check the volatile view and mark without the lock ({@link #read}). The view only grows.
 */
public final class ViewGate {
    private final int serverId;
    private final String replica;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private volatile long view;
    private volatile String gone;

    /** A gate of memory server {@code serverId}'s replica {@code replica} (a name for errors), in {@code view}. */
    public ViewGate(int serverId, String replica, long view) {
        this.serverId = serverId;
        this.replica = replica;
        this.view = view;
    }

    /** The view the replica is in. */
    public long view() {
        return view;
    }

    /**
     * Moves the replica to {@code next}: from its return on, verbs of older views are refused, and none is still running.
     *
     * @throws IllegalArgumentException when {@code next} is older than the replica's view
     */
    public void advance(long next) {
        lock.writeLock().lock();
        try {
            if (next < view) {
                throw new IllegalArgumentException("memory server " + serverId + "'s replica " + replica + " is in view " + view
                        + ", not going back to " + next);
            }
            view = next;
        } finally {
            lock.writeLock().unlock();
        }
    }

    /**
     * The replica is gone (its memory node died): from the return on, every verb fails with a {@link ReplicaGoneException}
     * saying {@code why}, and none is still running.
     */
    public void retire(String why) {
        lock.writeLock().lock();
        try {
            gone = why;
        } finally {
            lock.writeLock().unlock();
        }
    }

    private void check(long clientView) {
        String why = gone;
        if (why != null) {
            throw new ReplicaGoneException(why);
        }
        long now = view;
        if (clientView < now) {
            throw new StaleViewException(serverId, replica, clientView, now);
        }
    }

    /** Whether {@link #retire} was called. */
    public boolean retired() {
        return gone != null;
    }

    /**
     * Runs {@code read} as a read sent in {@code clientView}, unless the replica is in a newer view or gone, without the
     * lock: a read that passed the check before a view change is concurrent with every change of the new view (none
     * of them was acknowledged before the read began), so either value it returns is one a linearizable read could.
     * Only changes must be drained by {@link #advance}: the copy relies on every change of the old view being in before
     * it starts.
     *
     * @throws StaleViewException   when the replica is in a view newer than {@code clientView}; {@code read} did not run
     * @throws ReplicaGoneException when the replica is gone; {@code read} did not run
     */
    public void read(long clientView, Runnable read) {
        check(clientView);
        read.run();
    }

    /**
     * Runs {@code verb} as a verb sent in {@code clientView}, unless the replica is in a newer view or gone.
     *
     * @throws StaleViewException when the replica is in a view newer than {@code clientView}; {@code verb} did not run
     * @throws ReplicaGoneException when the replica is gone; {@code verb} did not run
     */
    public <T> T run(long clientView, Supplier<T> verb) {
        lock.readLock().lock();
        try {
            check(clientView);
            return verb.get();
        } finally {
            lock.readLock().unlock();
        }
    }
}
