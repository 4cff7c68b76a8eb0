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

    /**
     * Whether this export made the region (zeroed and formatted) rather than reattaching to one that held data
     * already ({@link Fabric#attach}).
     */
    default boolean fresh() {
        return true;
    }

    /**
     * Stops exporting but keeps the region's data where the transport can, for the next {@link Fabric#attach}
     * of this server id ({@code shm}: the file stays). Where the region lives in the exporting process
     * ({@code local}, {@code tcp}), the same as {@link #close()}.
     */
    default void detach() {
        close();
    }

    /** How code on the memory node changes the region (offloaded writes); {@link MemorySideWrites#DIRECT} unless replicated. */
    default MemorySideWrites memorySideWrites() {
        return MemorySideWrites.DIRECT;
    }

    /** Stops exporting and discards the region; clients connected afterwards fail. */
    @Override
    void close();
}
