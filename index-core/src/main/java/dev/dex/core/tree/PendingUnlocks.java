package dev.dex.core.tree;

import java.util.concurrent.ConcurrentHashMap;

import dev.dex.rdma.FabricException;

/**
 * Remote locks this compute node may still hold although no operation uses them any more: the verb that would
 * have released them failed (a timeout, a broken connection), or the compare-and-swap that takes a lock failed
 * and may or may not have taken effect. Nobody else takes such a lock over while this node is alive (its holder
 * is not gone), so this node releases it itself, as soon as the memory server answers again: every session
 * that is about to take a remote lock first retries what is pending here ({@link RemoteNodes#lock}), and so does
 * the engine's periodic repair ({@code DexEngine.repair}).
 *
 * <p>A lock whose node may be half written (a split whose last write failed) is released only after the node is
 * repaired the way a dead holder's would be ({@link RemoteNodes#repairAndRelease}): clipped to its slot in the
 * parent, so no compute node whose cached parent predates the split writes the right half's keys into it.
 *
 * <pre>
 * Concurrency: one per engine, shared by its sessions. The entries live in a concurrent map keyed by (address,
 * tag): two sessions of one engine may each have left a lock of the same node (one after the other), and each is
 * released by its own tag; an entry that needs a repair stays one (a later plain entry of the same key does not
 * weaken it). A retry removes an entry only with {@code remove(key, repair)} after its lock was released (or
 * found not to be held by that tag any more), so two sessions that retry one entry at once both only ever clear a
 * lock word that still holds the entry's tag (compare-and-swap), and whichever finishes first removes it.
 * {@link #isEmpty} is a volatile read of a counter, what the hot path pays when nothing is pending.
 * </pre>
 */
public final class PendingUnlocks {
    /** A node's lock that a tag may hold. */
    private record Held(long address, long tag) {
    }

    /** Each lock left held, to whether its node needs a repair before it is released. */
    private final ConcurrentHashMap<Held, Boolean> pending = new ConcurrentHashMap<>();
    private volatile int size;
    /** One thread retries at a time, and not more often than every {@link #RETRY_INTERVAL_NANOS}. */
    private final java.util.concurrent.atomic.AtomicBoolean retrying = new java.util.concurrent.atomic.AtomicBoolean();
    private volatile long nextRetry = System.nanoTime();
    /** How often sessions retry: a memory server that does not answer costs one verb timeout per interval at most. */
    static final long RETRY_INTERVAL_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(50);

    /** Whether nothing is pending (one volatile read). */
    public boolean isEmpty() {
        return size == 0;
    }

    /** Locks pending now. */
    public int size() {
        return pending.size();
    }

    /** Records that the lock of the node at {@code address} may still hold {@code tag}. */
    void add(long address, long tag, boolean repair) {
        pending.merge(new Held(address, tag), repair, Boolean::logicalOr);
        size = pending.size();
    }

    /**
     * {@link #retry} unless another thread is retrying or the last retry was less than {@link #RETRY_INTERVAL_NANOS}
     * ago; what a session calls before it takes a remote lock.
     */
    public void retryIfDue(RemoteNodes remote) {
        if (System.nanoTime() - nextRetry < 0 || !retrying.compareAndSet(false, true)) {
            return;
        }
        try {
            retry(remote);
        } finally {
            nextRetry = System.nanoTime() + RETRY_INTERVAL_NANOS;
            retrying.set(false);
        }
    }

    /**
     * Releases what is pending, as far as the memory servers answer; what still fails stays pending (the first
     * failure ends the round: the server is most likely still unreachable).
     *
     * @param remote any session's remote side on the engine's memory (the tags come from the entries)
     * @return locks released or found released
     */
    public int retry(RemoteNodes remote) {
        int done = 0;
        for (var entry : pending.entrySet()) {
            Held held = entry.getKey();
            boolean repair = entry.getValue();
            try {
                if (!remote.releaseFor(held.address(), held.tag(), repair)) {
                    continue;
                }
            } catch (FabricException stillUnreachable) {
                break;
            }
            if (pending.remove(held, repair)) {
                done++;
            }
        }
        size = pending.size();
        return done;
    }
}
