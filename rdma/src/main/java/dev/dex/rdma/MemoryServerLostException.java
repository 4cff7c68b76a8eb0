package dev.dex.rdma;

/**
 * A verb for a memory server that lost every replica, or with one replica its only memory node (its compute node marked
 * it so, {@link RemoteMemory#markLost}): the message says which server and names its replicas. Sending the operation again does not help until one of them
 * is back, so callers fail it instead of retrying (docs/replication.md, "Every replica lost").
 */
public final class MemoryServerLostException extends FabricException {
    private static final long serialVersionUID = 1L;

    public MemoryServerLostException(String message, Throwable cause) {
        super(message, cause);
    }

    @Override
    public boolean isFinal() {
        return true;
    }
}
