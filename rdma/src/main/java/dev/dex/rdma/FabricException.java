package dev.dex.rdma;

/**
 * A verb failed in the transport rather than by its arguments: the connection to the memory server was
 * lost, the server did not answer within the verb timeout, or it refused the request. The verb may or may
 * not have taken effect; the caller treats the memory server as unreachable.
 */
public class FabricException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public FabricException(String message) {
        super(message);
    }

    public FabricException(String message, Throwable cause) {
        super(message, cause);
    }

    /**
     * Whether sending the verb again cannot help: this client is fenced ({@link FencedException}) or the memory server
     * lost every replica ({@link MemoryServerLostException}). Otherwise the failure may be over at the next try.
     */
    public boolean isFinal() {
        return false;
    }
}
