package dev.dex.rdma.replica;

import dev.dex.rdma.FabricException;

/**
 * A replica refused a verb because the client sent it in an older view of the replica group than the replica is in: a
 * failover or a new replica changed the group since the client last installed its view. The verb took no effect on
 * that replica, with one exception: on {@code disni} a WRITE of more than one word may have landed in part before the
 * device refused it, and sending it again writes it whole (docs/rdma-disni.md, "Views"). Not final: the client installs
 * the group's newer view and sends the change again.
 */
public final class StaleViewException extends FabricException {
    private static final long serialVersionUID = 1L;

    private final int serverId;
    private final long clientView;
    private final long replicaView;

    public StaleViewException(int serverId, String replica, long clientView, long replicaView) {
        super("memory server " + serverId + "'s replica " + replica + " is in view " + replicaView + " and refuses a verb of view "
                + clientView + ": the group changed; install its newer view and send the change again");
        this.serverId = serverId;
        this.clientView = clientView;
        this.replicaView = replicaView;
    }

    public int serverId() {
        return serverId;
    }

    /** The view the refused verb was sent in. */
    public long clientView() {
        return clientView;
    }

    /** The view the replica was in when it refused. */
    public long replicaView() {
        return replicaView;
    }
}
