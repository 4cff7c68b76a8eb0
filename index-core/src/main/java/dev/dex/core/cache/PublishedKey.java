package dev.dex.core.cache;

import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;

import java.util.concurrent.atomic.AtomicLongArray;

import dev.dex.core.node.KeyFormat;

/**
 * The key one session's operation is descending to, published before the descent reads anything and withdrawn when
 * the operation ends. Other sessions' offloaded writes are not sent into a subtree such a key lies in: that operation
 * may hold images of the subtree and write them back over the write ({@link Offloader}, {@link OffloadExclusion}).
 * Only an engine that offloads reads published keys; the others skip the volatile stores.
 *
 * <p>Concurrency: written by its session's thread only, read by any session's thread. An 8-byte key is one volatile
 * long; a wider key's words are volatile elements under a sequence number (odd while the words change). A session
 * publishes with volatile stores before its descent's first read, so an offloaded write that entered its range and
 * then reads this key either sees the key or the descent, which started later, meets the write's range or its
 * missed node's IO marker on the way down. A reader that meets the words changing (an odd or moved sequence) takes
 * the key to be in the range it asks about: refusing an offload is always safe.
 */
final class PublishedKey {
    /** A word of no operation in progress; no key is all this. */
    static final long NONE = NEG_INFINITY;

    private final boolean enabled;
    private final KeyFormat keys;
    private final int words;
    /** An 8-byte key. */
    private volatile long key = NONE;
    /** A wider key's words, and the sequence number that guards them. */
    private final AtomicLongArray wide;
    private volatile long sequence;

    PublishedKey(boolean enabled, KeyFormat keys) {
        this.enabled = enabled;
        this.keys = keys;
        this.words = keys.words();
        this.wide = new AtomicLongArray(words);
        for (int w = 0; w < words; w++) {
            wide.set(w, NONE);
        }
    }

    /** Publishes the key the session's operation descends to. */
    void publish(long[] key) {
        if (!enabled) {
            return;
        }
        if (words == 1) {
            this.key = key[0];
            return;
        }
        sequence++;
        for (int w = 0; w < words; w++) {
            wide.set(w, key[w]);
        }
        sequence++;
    }

    /** Withdraws the key: the operation ended. */
    void clear() {
        if (!enabled) {
            return;
        }
        if (words == 1) {
            this.key = NONE;
            return;
        }
        sequence++;
        for (int w = 0; w < words; w++) {
            wide.set(w, NONE);
        }
        sequence++;
    }

    /** Whether the session's operation is descending to a key in {@code (low, high]} (of this key width). */
    boolean in(long[] low, long[] high) {
        if (words == 1) {
            long k = key;
            return k != NONE && k > low[0] && k <= high[0];
        }
        long before = sequence;
        if ((before & 1) != 0) {
            return true;
        }
        long[] k = new long[words];
        boolean none = true;
        for (int w = 0; w < words; w++) {
            k[w] = wide.get(w);
            none &= k[w] == NONE;
        }
        if (sequence != before) {
            return true;
        }
        return !none && keys.compare(k, 0, low, 0) > 0 && keys.compare(k, 0, high, 0) <= 0;
    }
}
