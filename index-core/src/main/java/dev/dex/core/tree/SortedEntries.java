package dev.dex.core.tree;

/**
 * A source of entries in strictly ascending key order, read once (a cursor). Bulk load checks the order
 * and rejects a key out of order, a duplicate, or the reserved key {@code Long.MIN_VALUE} (minus infinity in
 * every word). Entries of 8-byte keys give {@link #key()}; entries of wider keys override {@link #key(long[])}.
 */
public interface SortedEntries {
    /** Advances to the next entry; false when there is none. */
    boolean next();

    /** The current key, for an index of 8-byte keys. */
    long key();

    /** Puts the current key's words ({@code KeyFormat}) into {@code words}; by default the one word {@link #key()}. */
    default void key(long[] words) {
        words[0] = key();
    }

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

    /** Writes the words of the key of a long (a mapping of 8-byte keys into wider keys, in the same order). */
    @FunctionalInterface
    interface KeyWords {
        void toWords(long key, long[] words);
    }

    /** {@code longs} with each key's words given by {@code words}: entries of wider keys in the longs' order. */
    static SortedEntries withWords(SortedEntries longs, KeyWords words) {
        return new SortedEntries() {
            @Override
            public boolean next() {
                return longs.next();
            }

            @Override
            public long key() {
                return longs.key();
            }

            @Override
            public void key(long[] out) {
                words.toWords(longs.key(), out);
            }

            @Override
            public long value() {
                return longs.value();
            }
        };
    }
}
