package dev.dex.rdma.replica;

import dev.dex.rdma.FabricException;

/**
 * A replica refused a verb because it is gone (its memory node stopped, or it was left out of its group): the verb took
 * no effect on it. Not final: the group's next view does without it.
 */
public final class ReplicaGoneException extends FabricException {
    private static final long serialVersionUID = 1L;

    public ReplicaGoneException(String message) {
        super(message);
    }
}
