package dev.dex.core.engine;

/**
 * One thread's handle on an index: the operations and their per-thread state. Not thread-safe; create
 * one per thread with {@link IndexEngine#newSession()}. Allocation-free on the hot path.
 *
 * <p>Keys have the width the index was formatted with ({@code KeyFormat}). Every operation takes a key as its
 * {@link #keyWords()} words ({@code long[]}, the words at {@code [0, keyWords())}; {@code KeyFormat#toWords} makes
 * them from bytes); an index of 8-byte keys (one word) also takes the {@code long} itself, the fast path. Keys are
 * signed longs (words) except {@code Long.MIN_VALUE} (in every word), which is reserved and rejected with
 * {@link IllegalArgumentException}; a {@code long} operation on an index of wider keys is refused the same way. An
 * operation on a key whose partition the engine does not hold throws {@link PartitionNotHeldException}.
 */
public interface IndexSession extends AutoCloseable {

    /** The width of the index's keys in 8-byte words: 1 for 8-byte keys. */
    default int keyWords() {
        return 1;
    }

    /** {@link #lookup(long)} of a key of any width. */
    default boolean lookup(long[] key) {
        requireOneWord(keyWords());
        return lookup(key[0]);
    }

    /** {@link #insert(long, long)} of a key of any width. */
    default boolean insert(long[] key, long value) {
        requireOneWord(keyWords());
        return insert(key[0], value);
    }

    /** {@link #update(long, long)} of a key of any width. */
    default boolean update(long[] key, long value) {
        requireOneWord(keyWords());
        return update(key[0], value);
    }

    /** {@link #put(long, long)} of a key of any width. */
    default boolean put(long[] key, long value) {
        requireOneWord(keyWords());
        return put(key[0], value);
    }

    /** {@link #delete(long)} of a key of any width. */
    default boolean delete(long[] key) {
        requireOneWord(keyWords());
        return delete(key[0]);
    }

    /**
     * {@link #scan(long, int, long[], long[])} from a key of any width: entry {@code i}'s key goes to
     * {@code keys[i * keyWords(), (i + 1) * keyWords())}, so {@code keys} holds {@code count * keyWords()} words.
     */
    default int scan(long[] startKey, int count, long[] keys, long[] values) {
        requireOneWord(keyWords());
        return scan(startKey[0], count, keys, values);
    }

    /** Refuses a {@code long} key on an index of wider keys. */
    static void requireOneWord(int words) {
        if (words != 1) {
            throw new IllegalArgumentException("this index has " + words * 8 + "-byte keys; a long key is 8 bytes: pass the key's words");
        }
    }

    /** Turns {@code key[0, words)} into the next key up (the last word plus one, carrying); it must not be the largest. */
    static void successor(long[] key, int words) {
        for (int w = words - 1; w >= 0; w--) {
            if (key[w] != Long.MAX_VALUE) {
                key[w]++;
                return;
            }
            key[w] = Long.MIN_VALUE;
        }
        throw new IllegalArgumentException("the largest key has no successor");
    }

    /** Looks {@code key} up; on {@code true} its value is {@link #value()}. */
    boolean lookup(long key);

    /** The value found by the last successful {@link #lookup}. */
    long value();

    /** Adds {@code key} if absent; false (and no change) if present. */
    boolean insert(long key, long value);

    /** Replaces the value of a present {@code key}; false (and no change) if absent. */
    boolean update(long key, long value);

    /** Inserts or replaces; true if {@code key} was present (its value replaced), false if it was added. */
    boolean put(long key, long value);

    /** Removes {@code key}; false if absent. */
    boolean delete(long key);

    /**
     * Copies up to {@code count} entries with keys {@code >= startKey}, ascending, into the arrays. An engine
     * that holds only some partitions stops at the end of the last consecutive partition it holds.
     *
     * @return entries copied
     */
    int scan(long startKey, int count, long[] keys, long[] values);

    /**
     * Starts a batch of writes that {@link #commit} makes durable together (group commit), on engines that
     * log writes; elsewhere nothing.
     */
    default void beginBatch() {
    }

    /** Ends a batch: returns once its writes are durable (engines that log writes); elsewhere nothing. */
    default void commit() {
    }

    @Override
    void close();
}
