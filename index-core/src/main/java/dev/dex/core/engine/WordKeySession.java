package dev.dex.core.engine;

import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeHeaderDescriptor;

/**
 * The key handling every engine's session shares: the {@code long} operations of an index of 8-byte keys as the
 * word operations of a one-word key, and the four writes as one {@link #write} with a {@link LeafOps} code. A
 * subclass implements the lookup, the write and the scan of keys given as words ({@link IndexSession}).
 *
 * <p>Not thread-safe, as every session: the one-word key array is this session's.
 */
public abstract class WordKeySession implements IndexSession {
    /** The index's key width in words. */
    protected final int words;
    private final long[] longKey;
    /** A key given in a longer array, cut to the index's width ({@link #checkedKey}). */
    private final long[] cutKey;

    /**
     * Set while {@link #scanPartition} runs: a session of an engine of partitions ends the scan at the end of its start
     * key's partition ({@code DexSession}); one without partitions scans as usual.
     */
    protected boolean onePartition;

    protected WordKeySession(int words) {
        this.words = words;
        this.longKey = new long[words];
        this.cutKey = new long[words];
    }

    /**
     * The caller's key, checked against the index's format {@code keys} and used as given (an operation only reads it);
     * only a longer array is cut to the index's width, into an array of this session's.
     */
    protected final long[] checkedKey(dev.dex.core.node.KeyFormat keys, long[] key) {
        if (key.length < words) {
            throw new IllegalArgumentException("a key of " + key.length + " words; this index's keys are " + words + " words");
        }
        NodeHeaderDescriptor.checkKey(keys, key);
        if (key.length == words) {
            return key;
        }
        System.arraycopy(key, 0, cutKey, 0, words);
        return cutKey;
    }

    @Override
    public final int keyWords() {
        return words;
    }

    /**
     * Runs the write {@code op} ({@link LeafOps#INSERT}, {@code UPDATE}, {@code PUT} or {@code DELETE}) of {@code key}.
     *
     * @return {@link LeafOps#result} of the operation
     */
    protected abstract boolean write(long[] key, long value, int op);

    @Override
    public boolean lookup(long key) {
        return lookup(longKey(key));
    }

    @Override
    public boolean insert(long key, long value) {
        return write(longKey(key), value, LeafOps.INSERT);
    }

    @Override
    public boolean update(long key, long value) {
        return write(longKey(key), value, LeafOps.UPDATE);
    }

    @Override
    public boolean put(long key, long value) {
        return write(longKey(key), value, LeafOps.PUT);
    }

    @Override
    public boolean delete(long key) {
        return write(longKey(key), 0, LeafOps.DELETE);
    }

    @Override
    public boolean insert(long[] key, long value) {
        return write(key, value, LeafOps.INSERT);
    }

    @Override
    public boolean update(long[] key, long value) {
        return write(key, value, LeafOps.UPDATE);
    }

    @Override
    public boolean put(long[] key, long value) {
        return write(key, value, LeafOps.PUT);
    }

    @Override
    public boolean delete(long[] key) {
        return write(key, 0, LeafOps.DELETE);
    }

    /** A scan from a long key; {@code Long.MIN_VALUE} (below every key) starts at the first key. */
    @Override
    public int scan(long startKey, int count, long[] keys, long[] values) {
        return scan(longKey(Math.max(startKey, NodeHeaderDescriptor.NEG_INFINITY + 1)), count, keys, values);
    }

    /**
     * Checks a scan's arrays and copies its start key into {@code into}: the minus-infinity key (below every key)
     * becomes the first key there can be.
     *
     * @throws IllegalArgumentException when the arrays cannot take {@code count} entries
     */
    protected final void startScan(long[] startKey, int count, long[] keys, long[] values, long[] into) {
        if (count < 0 || keys.length < count * words || values.length < count) {
            throw new IllegalArgumentException("scan of " + count + " entries needs arrays of at least that length");
        }
        System.arraycopy(startKey, 0, into, 0, words);
        boolean negInfinity = true;
        for (int w = 0; w < words; w++) {
            negInfinity &= into[w] == NodeHeaderDescriptor.NEG_INFINITY;
        }
        if (negInfinity) {
            IndexSession.successor(into, words);
        }
    }

    /** {@code key} as this session's one-word key; refused on an index of wider keys. */
    private long[] longKey(long key) {
        IndexSession.requireOneWord(words);
        longKey[0] = key;
        return longKey;
    }

    /**
     * {@link #scan(long[], int, long[], long[])} that ends at the end of the start key's partition instead of going on
     * into the next partition this engine holds: what a partition's owner answers for that partition alone, without
     * reading the next one's leaves.
     */
    public final int scanPartition(long[] startKey, int count, long[] keys, long[] values) {
        onePartition = true;
        try {
            return scan(startKey, count, keys, values);
        } finally {
            onePartition = false;
        }
    }

    /** {@link #scanPartition(long[], int, long[], long[])} from a long key, as {@link #scan(long, int, long[], long[])}. */
    public final int scanPartition(long startKey, int count, long[] keys, long[] values) {
        onePartition = true;
        try {
            return scan(startKey, count, keys, values);
        } finally {
            onePartition = false;
        }
    }
}
