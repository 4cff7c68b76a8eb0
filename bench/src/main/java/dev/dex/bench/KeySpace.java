package dev.dex.bench;

import java.util.SplittableRandom;

import dev.dex.core.tree.SortedEntries;

/**
 * The keys of a run. Bulk load puts {@code key(i) = (i + 1) << GAP_BITS} for every index i in
 * {@code [0, keys)}, with value {@code key + 1}. Lookups, updates and scans target loaded keys. An insert
 * for index i takes a key uniformly from the gap below {@code key(i)}, the {@code 2^GAP_BITS - 1} keys
 * strictly between {@code key(i-1)} and {@code key(i)}: inserts land among the loaded keys, follow the same
 * skew (a hot index has a hot gap), and are new keys with high probability. An insert that draws a key
 * already inserted is the normal outcome "already present".
 */
final class KeySpace {
    static final int GAP_BITS = 20;
    static final long GAP = 1L << GAP_BITS;
    /** Most keys whose gaps stay below Long.MAX_VALUE. */
    static final long MAX_KEYS = (Long.MAX_VALUE >> GAP_BITS) - 1;

    private final long keys;

    KeySpace(long keys) {
        if (keys < 1 || keys > MAX_KEYS) {
            throw new IllegalArgumentException("keys must be in [1, " + MAX_KEYS + "]: " + keys);
        }
        this.keys = keys;
    }

    long keys() {
        return keys;
    }

    long loadedKey(long index) {
        return (index + 1) << GAP_BITS;
    }

    /** Whether bulk load put {@code key}. */
    boolean isLoaded(long key) {
        long index = (key >> GAP_BITS) - 1;
        return (key & (GAP - 1)) == 0 && index >= 0 && index < keys;
    }

    /** A key in the gap below {@code loadedKey(index)}: in {@code [index * GAP + 1, (index + 1) * GAP - 1]}. */
    long insertKey(long index, SplittableRandom random) {
        return (index << GAP_BITS) + 1 + random.nextLong(GAP - 1);
    }

    /** The smallest key any operation uses. */
    long minKey() {
        return 1;
    }

    /** The largest key any operation uses (the last loaded key). */
    long maxKey() {
        return loadedKey(keys - 1);
    }

    /** The bulk-load entries, ascending, generated on the fly. */
    SortedEntries entries() {
        return new SortedEntries() {
            private long index = -1;

            @Override
            public boolean next() {
                return ++index < keys;
            }

            @Override
            public long key() {
                return loadedKey(index);
            }

            @Override
            public long value() {
                return loadedKey(index) + 1;
            }
        };
    }
}
