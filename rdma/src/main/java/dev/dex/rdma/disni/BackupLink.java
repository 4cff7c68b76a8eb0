package dev.dex.rdma.disni;

import dev.dex.rdma.MessageSender;
import dev.dex.rdma.RemoteMemory;

/**
 * A {@link DisniReplicaRegion primary}'s link to one backup: the control connection its beats take (opened at the first
 * beat, again after a failure), the copy's thread and progress, and why the backup's node did not answer the last beat.
 *
 * <p>Concurrency: the connection changes under this object's lock and is made outside it; the other fields are volatile,
 * written by the primary's beat, send and copy threads and read by its memory node.
 */
final class BackupLink {
    final String endpoint;
    private final DisniFabric fabric;
    private final int serverId;
    private RemoteMemory sender;
    private boolean linkClosed;
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
        this.fabric = fabric;
        this.serverId = serverId;
        this.endpoint = endpoint;
    }

    /** The control connection, made on first use outside this link's lock (a connect may wait seconds). */
    MessageSender sender() {
        synchronized (this) {
            if (linkClosed) {
                throw new IllegalStateException("the link to " + endpoint + " is closed");
            }
            if (sender != null) {
                return (MessageSender) sender;
            }
        }
        RemoteMemory made = fabric.controlLink(serverId, endpoint);
        synchronized (this) {
            if (!linkClosed && sender == null) {
                sender = made;
                return (MessageSender) made;
            }
        }
        made.close(); // closed meanwhile, or another beat connected first
        return sender();
    }

    /** Drops the connection: the next beat connects again. */
    void closeSender() {
        RemoteMemory old;
        synchronized (this) {
            old = sender;
            sender = null;
        }
        closeQuietly(old);
    }

    /** The backup left this primary's views: no connection is made for it again. */
    void close() {
        RemoteMemory old;
        synchronized (this) {
            linkClosed = true;
            old = sender;
            sender = null;
        }
        closeQuietly(old);
    }

    private void closeQuietly(RemoteMemory connection) {
        if (connection != null) {
            try {
                connection.close();
            } catch (RuntimeException ignored) {
                // already broken
            }
        }
    }
}
