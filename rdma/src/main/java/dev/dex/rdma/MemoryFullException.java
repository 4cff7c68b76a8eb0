package dev.dex.rdma;

/** A memory server's region has no free chunk left. */
public final class MemoryFullException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int serverId;

    public MemoryFullException(int serverId, long regionLength, long chunkLength) {
        super("memory server " + serverId + " is full: its region of " + regionLength + " bytes has no free "
                + chunkLength + "-byte chunk left; start the memory node with a larger region");
        this.serverId = serverId;
    }

    public int serverId() {
        return serverId;
    }
}
