package dev.dex.core.node;

import dev.dex.core.engine.IndexSession;

/**
 * Test keys of any width that keep the order of longs, so a test written against a {@code long} model runs
 * unchanged at every width: the long {@code n} becomes the words {@code [n >> 4, C, ..., C, n & 15]} (one
 * word, {@code n} itself, for 8-byte keys). Sixteen consecutive keys share every word but the last, so many
 * comparisons read the whole key, the worst case of a memcmp; the first word, which partitions go by, still spreads
 * the keys over the partitions ({@link #firstWord}).
 *
 * <p>{@link Session} runs a session's word operations with long keys mapped this way.
 */
public final class WideKeys {
    private static final long MIDDLE = 0x6b65_795f_6d69_6464L;
    private static final int SHIFT = 4;
    private static final long LOW_MASK = (1L << SHIFT) - 1;

    private final int words;

    public WideKeys(int bytes) {
        this.words = bytes / 8;
    }

    public int words() {
        return words;
    }

    /** The words of {@code n}'s key into {@code out[offset, offset + words)}. */
    public void toWords(long n, long[] out, int offset) {
        if (words == 1) {
            out[offset] = n;
            return;
        }
        out[offset] = n >> SHIFT;
        for (int w = 1; w < words - 1; w++) {
            out[offset + w] = MIDDLE;
        }
        out[offset + words - 1] = n & LOW_MASK;
    }

    /** The long whose key is at {@code key[offset, offset + words)}. */
    public long fromWords(long[] key, int offset) {
        if (words == 1) {
            return key[offset];
        }
        for (int w = 1; w < words - 1; w++) {
            if (key[offset + w] != MIDDLE) {
                throw new AssertionError("word " + w + " of a key is " + Long.toHexString(key[offset + w]) + ": not a test key");
            }
        }
        return (key[offset] << SHIFT) | key[offset + words - 1];
    }

    /** The first word of {@code n}'s key: what its partition is chosen by. */
    public long firstWord(long n) {
        return words == 1 ? n : n >> SHIFT;
    }

    /** The largest long whose key's first word is {@code word}. */
    public long largestWithFirstWord(long word) {
        return words == 1 ? word : (word << SHIFT) | LOW_MASK;
    }

    /** Sorted long keys and their values as entries of keys of this width, for bulk load. */
    public dev.dex.core.tree.SortedEntries entries(long[] keys, long[] values) {
        dev.dex.core.tree.SortedEntries longs = dev.dex.core.tree.SortedEntries.of(keys, values);
        return dev.dex.core.tree.SortedEntries.withWords(longs, (n, out) -> toWords(n, out, 0));
    }

    /** A session's operations on the keys of longs. Not thread-safe, like the session. */
    public Session of(IndexSession session) {
        return new Session(session);
    }

    /** {@link IndexSession}'s operations with long keys mapped to keys of this width. */
    public final class Session {
        private final IndexSession session;
        private final long[] key = new long[words];
        private long[] scanWords = new long[0];

        private Session(IndexSession session) {
            if (session.keyWords() != words) {
                throw new IllegalArgumentException("the session's keys are " + session.keyWords() + " words, not " + words);
            }
            this.session = session;
        }

        public IndexSession session() {
            return session;
        }

        private long[] key(long n) {
            toWords(n, key, 0);
            return key;
        }

        public boolean lookup(long n) {
            return session.lookup(key(n));
        }

        public long value() {
            return session.value();
        }

        public boolean insert(long n, long value) {
            return session.insert(key(n), value);
        }

        public boolean update(long n, long value) {
            return session.update(key(n), value);
        }

        public boolean put(long n, long value) {
            return session.put(key(n), value);
        }

        public boolean delete(long n) {
            return session.delete(key(n));
        }

        /** A scan from {@code n}'s key; the entries' keys go back to longs in {@code keys}. */
        public int scan(long n, int count, long[] keys, long[] values) {
            return scan(n, count, keys, values, false);
        }

        /** {@link dev.dex.core.cache.DexSession#scanPartition} from {@code n}'s key, as {@link #scan}. */
        public int scanPartition(long n, int count, long[] keys, long[] values) {
            return scan(n, count, keys, values, true);
        }

        private int scan(long n, int count, long[] keys, long[] values, boolean onePartition) {
            if (scanWords.length < count * words) {
                scanWords = new long[count * words];
            }
            int found = onePartition ? ((dev.dex.core.cache.DexSession) session).scanPartition(key(n), count, scanWords, values)
                    : session.scan(key(n), count, scanWords, values);
            for (int i = 0; i < found; i++) {
                keys[i] = fromWords(scanWords, i * words);
            }
            return found;
        }
    }
}
