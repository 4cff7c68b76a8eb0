package dev.dex.rdma;

/**
 * The memory server's side of an exported region. The memory server reads and writes it directly
 * (for example to run offloaded operations); clients use one-sided verbs through {@link RemoteMemory}.
 */
public interface ExportedRegion extends AutoCloseable {
    int serverId();

    /** Direct access to the region's memory, for code running on the memory server. */
    Region region();

    /**
     * Where clients of another process reach this region, in the transport's own words (for {@code tcp}
     * {@code host:port}); empty where the transport finds regions by server id alone ({@code local},
     * {@code shm}). A memory node advertises it; compute nodes pass it to {@link Fabric#connect(java.util.Map)}.
     */
    default String endpoint() {
        return "";
    }

    /** Stops exporting; clients connected afterwards fail. */
    @Override
    void close();
}
