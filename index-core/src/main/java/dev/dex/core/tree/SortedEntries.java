package dev.dex.core.tree;

/**
 * A source of entries in strictly ascending key order, read once (a cursor). Bulk load checks the order
 * and rejects a key out of order, a duplicate, or the reserved key {@code Long.MIN_VALUE}.
 */
public interface SortedEntries {
    /** Advances to the next entry; false when there is none. */
    boolean next();

    long key();

    long value();

    /** Entries from two arrays of equal length. */
    static SortedEntries of(long[] keys, long[] values) {
        if (keys.length != values.length) {
            throw new IllegalArgumentException(keys.length + " keys but " + values.length + " values");
        }
        return new SortedEntries() {
            private int index = -1;

            @Override
            public boolean next() {
                return ++index < keys.length;
            }

            @Override
            public long key() {
                return keys[index];
            }

            @Override
            public long value() {
                return values[index];
            }
        };
    }
}
