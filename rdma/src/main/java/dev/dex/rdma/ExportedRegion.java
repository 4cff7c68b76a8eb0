package dev.dex.rdma;

/**
 * The memory server's side of an exported region. The memory server reads and writes it directly
 * (for example to run offloaded operations); clients use one-sided verbs through {@link RemoteMemory}.
 */
public interface ExportedRegion extends AutoCloseable {
    int serverId();

    /** Direct access to the region's memory, for code running on the memory server. */
    Region region();

    /** Stops exporting; clients connected afterwards fail. */
    @Override
    void close();
}
