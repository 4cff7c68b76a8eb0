package dev.dex.rdma;

/**
 * Hands out chunks of memory servers' regions. A chunk is never returned; bump allocation inside a
 * chunk is the caller's business (see {@code NodeAllocator} in index-core).
 *
 * <p>Allocation is one fetch-and-add on the region header's next-chunk index, so it needs no message to
 * the memory server and is safe across threads and processes.
 *
 * <p>A {@code RemoteMemory} hands out its allocator ({@code RemoteMemory.chunkAllocator()}); the allocator in turn
 * is given only the one verb it issues, {@link FetchAndAdd}, not the client, so the dependency runs one way.
 */
public final class ChunkAllocator {
    /**
     * The fetch-and-add verb of the client that allocates: atomically adds {@code delta} to the 8-byte word at
     * global address {@code address} and returns the previous value, counted as that client's atomic.
     */
    @FunctionalInterface
    public interface FetchAndAdd {
        long fetchAndAdd(long address, long delta);
    }

    private final FetchAndAdd fetchAndAdd;
    private final long[] regionLengths;
    private final long[] chunkLengths;

    /**
     * @param fetchAndAdd   the fetch-and-add of the client that allocates ({@code client::fetchAndAdd})
     * @param regionLengths region length of each connected server by id, 0 where not connected
     * @param chunkLengths  chunk length of each connected server by id, 0 where not connected
     */
    public ChunkAllocator(FetchAndAdd fetchAndAdd, long[] regionLengths, long[] chunkLengths) {
        this.fetchAndAdd = fetchAndAdd;
        this.regionLengths = regionLengths;
        this.chunkLengths = chunkLengths;
    }

    /** Chunk length of a connected server's region. */
    public long chunkLength(int serverId) {
        checkServer(serverId);
        return chunkLengths[serverId];
    }

    /**
     * Allocates one chunk on {@code serverId}.
     *
     * @return the global address of the chunk's first byte
     * @throws MemoryFullException when the region has no chunk left
     */
    public long allocateChunk(int serverId) {
        return allocateChunks(serverId, 1);
    }

    /**
     * Allocates {@code count} adjacent chunks on {@code serverId} with one fetch-and-add (a redo log that
     * is longer than one chunk).
     *
     * @return the global address of the first chunk's first byte
     * @throws MemoryFullException when the region has not that many chunks left
     */
    public long allocateChunks(int serverId, int count) {
        checkServer(serverId);
        if (count < 1) {
            throw new IllegalArgumentException("chunk count must be >= 1: " + count);
        }
        long chunkLength = chunkLengths[serverId];
        long index = fetchAndAdd.fetchAndAdd(GlobalAddress.of(serverId, RegionHeaderDescriptor.NEXT_CHUNK_OFFSET), count);
        long start = index * chunkLength;
        if (index <= 0 || start > regionLengths[serverId] - count * chunkLength) {
            throw new MemoryFullException(serverId, regionLengths[serverId], chunkLength);
        }
        return GlobalAddress.of(serverId, start);
    }

    private void checkServer(int serverId) {
        if (serverId < 0 || serverId >= chunkLengths.length || chunkLengths[serverId] == 0) {
            throw new IllegalArgumentException("not connected to memory server " + serverId);
        }
    }
}
