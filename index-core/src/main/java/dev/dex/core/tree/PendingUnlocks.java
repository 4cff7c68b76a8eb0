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
 * Concurrency: one per engine, shared by its sessions. The entries live in a concurrent map (address to tag);
 * a retry removes an entry only with {@code remove(address, tag)} after its lock was released (or found not to
 * be held by that tag any more), so two sessions that retry one entry at once both only ever clear a lock word
 * that still holds the entry's tag (compare-and-swap), and whichever finishes first removes it. {@link #isEmpty}
 * is a volatile read of a counter, what the hot path pays when nothing is pending.
 * </pre>
 */
public final class PendingUnlocks {
    /** Address of the node's lock word owner, to the tag that may hold it; negative tags need a repair first. */
    private final ConcurrentHashMap<Long, Long> pending = new ConcurrentHashMap<>();
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
        pending.put(address, repair ? -tag : tag);
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
            long address = entry.getKey();
            long stored = entry.getValue();
            try {
                if (!remote.releaseFor(address, Math.abs(stored), stored < 0)) {
                    continue;
                }
            } catch (FabricException stillUnreachable) {
                break;
            }
            if (pending.remove(address, stored)) {
                done++;
            }
        }
        size = pending.size();
        return done;
    }
}
