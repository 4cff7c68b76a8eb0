package dev.dex.rdma.disni;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * One-sided READ and WRITE work requests on connections to memory servers: the device half of
 * {@link DisniRemoteMemory}, which has already checked the address, found the segment's remote address and
 * rkey, and split the transfer.
 *
 * <p>Each call posts one work request of at most the transport's maximum transfer, inside one registered
 * segment, and returns once its completion has arrived, so one thread's calls take effect in issue order.
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

    /** Waits for calls in flight, then disconnects and releases the connections; idempotent. */
    @Override
    void close();
}
