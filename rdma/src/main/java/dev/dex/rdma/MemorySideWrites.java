package dev.dex.rdma;

/**
 * How code running on a memory node (offloaded operations) changes its region: through the exporting transport, which
 * may have to pass the change on (a replicated {@code tcp} primary streams it to its backups before it answers).
 */
@FunctionalInterface
public interface MemorySideWrites {

    /** Changes made straight in the region: every transport without replicas. */
    MemorySideWrites DIRECT = (offset, length, apply) -> apply.run();

    /**
     * Runs {@code apply}, which changes only the region's bytes {@code [offset, offset + length)}.
     *
     * @throws IllegalStateException when this replica takes no changes (a backup, or a replaced primary)
     */
    void change(long offset, int length, Runnable apply);
}
