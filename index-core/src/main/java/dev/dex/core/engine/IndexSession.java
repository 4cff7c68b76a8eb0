package dev.dex.core.engine;

/**
 * One thread's handle on an index: the operations and their per-thread state. Not thread-safe; create
 * one per thread with {@link IndexEngine#newSession()}. Allocation-free on the hot path.
 *
 * <p>Keys are signed longs except {@code Long.MIN_VALUE}, which is reserved and rejected with
 * {@link IllegalArgumentException}. An operation on a key whose partition the engine does not hold
 * throws {@link PartitionNotHeldException}.
 */
public interface IndexSession extends AutoCloseable {

    /** Looks {@code key} up; on {@code true} its value is {@link #value()}. */
    boolean lookup(long key);

    /** The value found by the last successful {@link #lookup}. */
    long value();

    /** Adds {@code key} if absent; false (and no change) if present. */
    boolean insert(long key, long value);

    /** Replaces the value of a present {@code key}; false (and no change) if absent. */
    boolean update(long key, long value);

    /** Inserts or replaces; true if {@code key} was absent. */
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
