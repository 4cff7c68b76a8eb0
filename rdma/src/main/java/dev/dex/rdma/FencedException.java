package dev.dex.rdma;

/**
 * A memory server refuses this client: another compute node took over a partition this client held
 * without giving it up, or the cluster downed this client's node, and the memory server fenced the client's
 * fabric identity ({@link RemoteMemory#fence}). Nothing this client sends is applied from then on; the
 * node must stop serving and leave.
 */
public final class FencedException extends FabricException {
    private static final long serialVersionUID = 1L;

    public FencedException(String message) {
        super(message);
    }

    @Override
    public boolean isFinal() {
        return true;
    }
}
