package dev.dex.rdma;

import java.util.Map;

/**
 * A transport for the memory pool: memory servers {@link #export} regions, compute sides
 * {@link #connect} to them and issue one-sided verbs through the returned {@link RemoteMemory}.
 *
 * <p>Transports: {@code local} (regions in this JVM), {@code shm} (memory-mapped files shared by the
 * processes of one host), {@code tcp} (regions served by memory nodes over TCP, any host), {@code disni}
 * (RDMA verbs through DiSNI, where an RDMA device exists). Every transport passes the same contract test
 * suite. A verb that fails in the transport itself (connection lost, no answer in time) throws
 * {@link FabricException}.
 */
public interface Fabric extends AutoCloseable {

    /** The transport's name as used in configuration: {@code local}, {@code shm}, {@code tcp}, {@code disni}. */
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
     * Exports memory server {@code serverId}'s region as this fabric finds it: a region that outlived its last
     * export ({@code shm}: the file in the directory) is reattached with its data ({@link ExportedRegion#fresh()}
     * false), after checking that it is a formatted region of these lengths; otherwise a new one is made, as by
     * {@link #export}. Where regions live in the exporting process ({@code local}, {@code tcp}) there is nothing
     * to reattach to: the same as {@link #export}.
     *
     * @throws IllegalArgumentException for bad lengths, or a region found with other lengths
     * @throws IllegalStateException     when another exporter serves that server id already
     */
    default ExportedRegion attach(int serverId, long regionLength, int chunkLength) {
        return export(serverId, regionLength, chunkLength);
    }

    /**
     * Exports a new, zeroed region for memory server {@code serverId} in place of the one this fabric kept for it,
     * discarding that one's data (a memory node started with a format). It takes the same exclusion as
     * {@link #attach} before it touches the kept region: a format refused because another exporter serves that
     * server id leaves that exporter's region as it was. Where regions live in the exporting process
     * ({@code local}, {@code tcp} without a region directory), the same as {@link #export}.
     *
     * @throws IllegalArgumentException for bad lengths
     * @throws IllegalStateException     when another exporter serves that server id already
     */
    default ExportedRegion reformat(int serverId, long regionLength, int chunkLength) {
        return export(serverId, regionLength, chunkLength);
    }

    /**
     * Connects a client to the given memory servers' regions.
     *
     * @throws IllegalArgumentException when a server has no region on this fabric
     */
    RemoteMemory connect(int... serverIds);

    /**
     * Connects a client to memory servers that advertise {@link ExportedRegion#endpoint() endpoints}, as
     * compute nodes do with what memory nodes tell them. Transports that find regions by server id alone
     * ignore the endpoints.
     *
     * @param endpoints each server's endpoint, by server id
     * @throws IllegalArgumentException when a server cannot be reached or an endpoint is malformed
     */
    default RemoteMemory connect(Map<Integer, String> endpoints) {
        return connect(endpoints.keySet().stream().mapToInt(Integer::intValue).sorted().toArray());
    }

    /**
     * As {@link #connect(Map)}, greeting every memory server as client {@code clientId} (not 0), the identity
     * memory servers can {@link #fence} (a compute node uses its cluster member's unique id). Transports
     * without identities ignore it.
     */
    default RemoteMemory connect(Map<Integer, String> endpoints, long clientId) {
        return connect(endpoints);
    }

    /**
     * Fences client {@code clientId} on memory server {@code serverId}, a region this fabric object exported
     * (a memory node does so for a compute node the cluster downed): closes the client's connections, applies
     * nothing more of it, and refuses its greeting from now on. Returns false when the transport cannot fence
     * (see {@link RemoteMemory#fence}).
     */
    default boolean fence(int serverId, long clientId) {
        return false;
    }

    /**
     * The fabric identities of the clients connected to memory server {@code serverId}, a region this fabric object
     * exported, that greeted with one: a memory node that was away from the cluster fences those whose member is gone.
     * Empty where the transport has no identities or connections ({@code local}, {@code shm}).
     */
    default java.util.Set<Long> connectedClients(int serverId) {
        return java.util.Set.of();
    }

    /**
     * The clients of memory server {@code serverId} (exported here) whose own side ended a connection in the last few
     * seconds (an end of stream or a reset: a client that closed it, or a process that died, whose kernel ends every
     * connection at once) and that have no connection open now, with the {@link System#nanoTime} of the last such end.
     * A connection the server closed itself (a fence, a refusal) does not count. Empty where the transport cannot tell.
     */
    default java.util.Map<Long, Long> hungUpClients(int serverId) {
        return java.util.Map.of();
    }

    /** Releases what this fabric object holds (its exported regions among them). */
    @Override
    void close();
}
