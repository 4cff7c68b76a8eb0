package dev.dex.rdma.disni;

/**
 * A {@link DisniReplicaRegion primary}'s link to one backup: the control connection its beats take (opened at the first
 * beat, again after a failure), the copy's thread and progress, and why the backup's node did not answer the last beat.
 *
 * <p>Concurrency: the connection is a {@link ControlLink}'s; the other fields are volatile, written by the primary's
 * beat, send and copy threads and read by its memory node.
 */
final class BackupLink extends ControlLink {
    /** When the beat in flight was sent ({@link System#nanoTime}), or 0. */
    volatile long beatSentAt;
    volatile long copyStarted;
    volatile Thread copy;
    volatile long copyView = -1;
    volatile long left = -1;
    /** The view its copy completed in, or -1. */
    volatile long doneView = -1;
    volatile String broken;

    BackupLink(DisniFabric fabric, int serverId, String endpoint) {
        super(fabric, serverId, endpoint, 0); // memory nodes link to each other anonymously
    }
}
