package dev.dex.core.partition;

import dev.dex.core.engine.IndexEngine;

/**
 * An engine that serves only the logical partitions it holds. {@link #acquire} lets it serve a
 * partition (with a cold cache); {@link #release} writes back that range's dirty cached nodes and drops
 * them, after which another compute node may acquire it: the paper's logical repartitioning.
 */
public interface PartitionedEngine extends IndexEngine {

    /** The partition table every compute node of this tree reads from the superblock. */
    PartitionTable partitions();

    /** Starts serving {@code partition}. Idempotent. */
    void acquire(int partition);

    /**
     * Stops serving {@code partition}: waits for its operations in flight, writes back its dirty frames,
     * drops its frames. Idempotent (releasing a partition not held reports zero work).
     */
    ReleaseReport release(int partition);

    /** True while this engine serves {@code partition}. */
    boolean holds(int partition);

    /** What a {@link #release} did. */
    record ReleaseReport(int partition, long nanos, long pagesWritten, long bytesWritten, long framesDropped) {
    }
}
