package dev.dex.rdma.replica;

import dev.dex.rdma.FabricException;

/**
 * A read of a group's primary could not be served within a {@link ReadLease}: its backups did not grant one in the
 * client's view (a failover may be under way, or the client is cut off from them), and no newer view came in time. The
 * read changed nothing; it may be sent again.
 */
public final class LeaseLapsedException extends FabricException {
    private static final long serialVersionUID = 1L;

    public LeaseLapsedException(String message) {
        super(message);
    }
}
