package dev.dex.rdma.disni;

import dev.dex.rdma.MessageSender;
import dev.dex.rdma.RemoteMemory;

/**
 * A connection on the control fabric to the memory node of one replica, for messages ({@link MessageSender}): made at
 * first use outside this link's lock (a connect may wait seconds), dropped after a failure so that the next use connects
 * anew, and closed for good when the replica is no longer wanted.
 *
 * <p>Concurrency: thread-safe; the connection changes under this object's lock, and several threads may send on it.
 */
class ControlLink {
    final String endpoint;
    private final DisniFabric fabric;
    private final int serverId;
    private final long clientId;
    private RemoteMemory sender;
    private boolean linkClosed;

    /** A link to {@code endpoint}, a replica of server {@code serverId}, greeting as {@code clientId} (0: anonymous). */
    ControlLink(DisniFabric fabric, int serverId, String endpoint, long clientId) {
        this.fabric = fabric;
        this.serverId = serverId;
        this.endpoint = endpoint;
        this.clientId = clientId;
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
        RemoteMemory made = fabric.controlLink(serverId, endpoint, clientId);
        synchronized (this) {
            if (!linkClosed && sender == null) {
                sender = made;
                return (MessageSender) made;
            }
        }
        made.close(); // closed meanwhile, or another thread connected first
        return sender();
    }

    /** Drops the connection: the next use connects again. */
    void drop() {
        RemoteMemory old;
        synchronized (this) {
            old = sender;
            sender = null;
        }
        closeQuietly(old);
    }

    /** No connection is made for it again. */
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
