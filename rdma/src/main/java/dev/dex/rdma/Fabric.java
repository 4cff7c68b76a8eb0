package dev.dex.rdma;

/**
 * A transport for the memory pool: memory servers {@link #export} regions, compute sides
 * {@link #connect} to them and issue one-sided verbs through the returned {@link RemoteMemory}.
 *
 * <p>Transports: {@code local} (regions in this JVM), {@code shm} (memory-mapped files shared by the
 * processes of one host). Every transport passes the same contract test suite.
 */
public interface Fabric extends AutoCloseable {

    /** The transport's name as used in configuration: {@code local}, {@code shm}. */
    String transport();

    /**
     * Exports a new, zeroed region for memory server {@code serverId} and formats its header.
     *
     * @param regionLength bytes in the region, a multiple of {@code chunkLength}
     * @param chunkLength  bytes per chunk, a power of two of at least
     *                     {@value RegionHeaderDescriptor#MIN_CHUNK_LENGTH}
     * @throws IllegalArgumentException for bad lengths or a server id already exported by this fabric
     */
    ExportedRegion export(int serverId, long regionLength, int chunkLength);

    /**
     * Connects a client to the given memory servers' regions.
     *
     * @throws IllegalArgumentException when a server has no region on this fabric
     */
    RemoteMemory connect(int... serverIds);

    /** Releases what this fabric object holds (its exported regions among them). */
    @Override
    void close();
}
