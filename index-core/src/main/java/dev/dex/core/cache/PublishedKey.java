package dev.dex.core.cache;

import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;

/**
 * The key one session's operation is descending to, published before the descent reads anything and withdrawn when
 * the operation ends. Other sessions' offloaded writes are not sent into a subtree such a key lies in: that operation
 * may hold images of the subtree and write them back over the write ({@link Offloader}, {@link OffloadExclusion}).
 * Only an engine that offloads reads published keys; the others skip the volatile store.
 *
 * <p>Concurrency: written by its session's thread only, read by any session's thread. The key is one volatile long:
 * a session publishes with a volatile store before its descent's first read, so an offloaded write that entered its
 * range and then reads this key either sees the key or the descent, which started later, meets the write's range or
 * its missed node's IO marker on the way down.
 */
final class PublishedKey {
    /** No operation in progress; no key is this small. */
    static final long NONE = NEG_INFINITY;

    private final boolean enabled;
    private volatile long key = NONE;

    PublishedKey(boolean enabled) {
        this.enabled = enabled;
    }

    /** Publishes the key the session's operation descends to, or {@link #NONE} when it ends. */
    void publish(long key) {
        if (enabled) {
            this.key = key;
        }
    }

    /** Whether the session's operation is descending to a key in {@code (low, high]}. */
    boolean in(long low, long high) {
        long k = key;
        return k != NONE && k > low && k <= high;
    }
}
