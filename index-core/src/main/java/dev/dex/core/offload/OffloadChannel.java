package dev.dex.core.offload;

/**
 * How a compute node sends an offloaded operation to the memory server that holds its subtree. The
 * in-process implementation is {@link LocalOffloadChannel}; the cluster's sends a message to the
 * {@code MemoryNode} actor.
 */
public interface OffloadChannel extends AutoCloseable {

    /**
     * Sends {@code request} to the memory server of its start node. The request is always answered:
     * {@link OffloadRequest#await()} returns once it is, with {@link OffloadRequest#REJECTED} when the
     * server's queue was full.
     */
    void submit(OffloadRequest request);

    @Override
    void close();
}
