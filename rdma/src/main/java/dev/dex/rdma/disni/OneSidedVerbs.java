package dev.dex.rdma.disni;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * One-sided READ and WRITE work requests on connections to memory servers: the device half of
 * {@link DisniRemoteMemory}, which has already checked the address, found the segment's remote address and
 * rkey, and split the transfer.
 *
 * <p>Each call of {@link #read} or {@link #write} posts one work request of at most the transport's maximum
 * transfer, inside one registered segment, and returns once its completion has arrived, so one thread's calls take
 * effect in issue order; {@link #postAll} posts several such requests together.
 * Implementations are thread-safe.
 */
interface OneSidedVerbs extends AutoCloseable {

    /**
     * Copies {@code length} bytes at {@code remoteAddress} of memory server {@code serverId} into
     * {@code dst[dstOffset..]} with one RDMA READ.
     *
     * @throws dev.dex.rdma.FabricException when the work request fails or does not complete in time
     * @throws IllegalStateException        after {@link #close()}
     */
    void read(int serverId, long remoteAddress, int rkey, MutableDirectBuffer dst, int dstOffset, int length);

    /**
     * Copies {@code length} bytes of {@code src[srcOffset..]} to {@code remoteAddress} of memory server
     * {@code serverId} with one RDMA WRITE.
     *
     * @throws dev.dex.rdma.FabricException when the work request fails or does not complete in time
     * @throws IllegalStateException        after {@link #close()}
     */
    void write(int serverId, long remoteAddress, int rkey, DirectBuffer src, int srcOffset, int length);

    /**
     * Posts every request of {@code work} before it waits for any, then waits for all of them, and records each one's
     * outcome in {@code work} ({@link WorkList#failure}: what {@link #read} or {@link #write} would have thrown, or
     * null; after {@link #close()}, an {@link IllegalStateException}). The requests are not ordered among themselves;
     * this thread's earlier calls took effect before them. This default runs them one after the other, which is always
     * correct.
     */
    default void postAll(WorkList work) {
        for (int i = 0; i < work.size(); i++) {
            try {
                post(work, i);
            } catch (RuntimeException e) {
                work.fail(i, e);
            }
        }
    }

    /** Runs request {@code i} of {@code work} alone, as {@link #read} or {@link #write}, and throws what it throws. */
    default void post(WorkList work, int i) {
        if (work.isRead(i)) {
            read(work.serverId(i), work.remoteAddress(i), work.rkey(i), work.destination(i), work.offset(i), work.length(i));
        } else {
            write(work.serverId(i), work.remoteAddress(i), work.rkey(i), work.source(i), work.offset(i), work.length(i));
        }
    }

    /** Waits for calls in flight, then disconnects and releases the connections; idempotent. */
    @Override
    void close();
}
