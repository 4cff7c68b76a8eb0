package dev.dex.rdma;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * The compute side's view of the memory pool: one-sided verbs on {@link GlobalAddress global addresses}.
 *
 * <p>Each verb completes before it returns, and verbs issued by one thread take effect in issue order,
 * as when an RDMA client waits for each completion. A {@link #read} that overlaps a concurrent
 * {@link #write} may observe a mix of old and new bytes (no atomicity beyond aligned 8-byte words);
 * callers detect torn reads with versions. {@link #compareAndSwap} and {@link #fetchAndAdd} are atomic
 * with respect to each other and to aligned 8-byte reads and writes from every client of the region.
 *
 * <p>Implementations are thread-safe. Every verb is counted in {@link #counters()} for the calling thread.
 * An address outside every connected region, or a misaligned atomic, throws
 * {@link IllegalArgumentException}; no verb ever reads or writes outside a region.
 */
public interface RemoteMemory extends AutoCloseable {

    /** Copies {@code length} bytes at {@code address} into {@code dst[dstOffset..]}. */
    void read(long address, MutableDirectBuffer dst, int dstOffset, int length);

    /** Reads the 8-byte word at {@code address}, little-endian as every fabric layout: one {@link #read}. */
    default long readLong(long address) {
        org.agrona.concurrent.UnsafeBuffer word = new org.agrona.concurrent.UnsafeBuffer(new byte[Long.BYTES]);
        read(address, word, 0, Long.BYTES);
        return word.getLong(0, java.nio.ByteOrder.LITTLE_ENDIAN);
    }

    /** Copies {@code length} bytes of {@code src[srcOffset..]} to {@code address}. */
    void write(long address, DirectBuffer src, int srcOffset, int length);

    /**
     * Atomically replaces the 8-byte word at {@code address} (8-byte aligned) by {@code desired} if it
     * equals {@code expected}.
     *
     * @return the value found, which equals {@code expected} exactly when the swap happened
     */
    long compareAndSwap(long address, long expected, long desired);

    /** Atomically adds {@code delta} to the 8-byte word at {@code address}; returns the previous value. */
    long fetchAndAdd(long address, long delta);

    /**
     * Issues every verb of {@code batch} together and returns, possibly before they complete: {@link VerbBatch#await}
     * waits for them. Verbs this thread issued before take effect first; the batch's own verbs are not ordered among
     * themselves. This default runs them one after the other now, through this object's own verbs, which is correct
     * for every transport and every layer; transports that can keep verbs in flight together override it.
     */
    default void start(VerbBatch batch) {
        batch.runEach(this);
    }

    /** {@link #start Starts} the batch and {@link VerbBatch#await awaits} it: every verb has completed or failed. */
    default void submit(VerbBatch batch) {
        start(batch);
        batch.await();
    }

    /** Ids of the memory servers this client is connected to, ascending. */
    int[] memoryServerIds();

    /** The verbs this client issued, per thread, summed on demand. */
    VerbCounters counters();

    /** Chunks of the connected regions, handed out by a one-sided fetch-and-add on each region header. */
    ChunkAllocator chunkAllocator();

    /**
     * This client's fabric identity, named in its greeting to every memory server, so that a memory server can
     * {@link #fence} it; 0 when the transport has no identities (or the client did not give one).
     */
    default long clientId() {
        return 0;
    }

    /**
     * Fences client {@code clientId} on every connected memory server: each closes that client's connections,
     * applies nothing of it that it had not applied before the call returns, and refuses its greeting from now
     * on. A new owner of a partition calls it before it replays the partition's log, so an old owner that did
     * not give the partition up (crashed, downed, cut off) cannot write after it. Returns false when the
     * transport cannot fence: one-sided stores into shared memory ({@code local}, {@code shm}) cannot be revoked
     * from another client. ({@code disni} fences by revoking the client's own RDMA keys.)
     *
     * @throws IllegalArgumentException for client 0 or this client's own identity
     * @throws FabricException          when a memory server cannot be reached (the fence is not in place)
     */
    default boolean fence(long clientId) {
        return false;
    }

    /**
     * Memory server {@code serverId} now answers at {@code endpoint} (as its memory node advertises it): a memory node
     * that restarted on its kept region with another port. The next verb for that server connects there, and must
     * find the same region (its incarnation) it found at connect, or fails as for any server that restarted without
     * its data. Connections to the old endpoint are closed; verbs in flight on them fail with
     * {@link FabricException}. Returns false, changing nothing, for transports that find regions by server id
     * ({@code local}, {@code shm}), or when the endpoint is the one already in use.
     *
     * @throws IllegalArgumentException for a server this client is not connected to, or a malformed endpoint
     */
    default boolean relocate(int serverId, String endpoint) {
        return false;
    }

    /**
     * Memory server {@code serverId} is lost ({@code why} says how: every replica of its group, or its only memory node,
     * is out of the cluster), or back ({@code why} null). While lost, a verb for it that fails fails at once, without waiting for a failover, and
     * its {@link FabricException} starts with {@code why}. A {@link #relocate} to another endpoint clears it. Does
     * nothing on transports without replica groups.
     *
     * @throws IllegalArgumentException for a server this client is not connected to
     */
    default void markLost(int serverId, String why) {
    }

    /** Disconnects; verbs after close fail. Does not destroy the memory servers' regions. */
    @Override
    void close();
}
