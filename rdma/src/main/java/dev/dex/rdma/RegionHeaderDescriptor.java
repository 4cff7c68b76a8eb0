package dev.dex.rdma;

/**
 * Layout of the header at offset 0 of every exported region (little-endian, 8-byte words).
 *
 * <pre>
 *   0                   8                  16                  24                  32            40       64
 *  +-------------------+------------------+-------------------+-------------------+-------------+--------+----------------
 *  | magic             | region length    | chunk length      | next chunk index  | incarnation | unused | root area ...
 *  +-------------------+------------------+-------------------+-------------------+-------------+--------+----------------
 * </pre>
 *
 * <p>The <em>incarnation</em> is a random non-zero number drawn when the region is formatted: a region that
 * is reattached keeps it, a fresh one (a memory node restarted without its data) has another, so a client
 * that reconnects can tell it is not talking to the memory it connected to.
 *
 * <p>Chunk 0 holds this header and the <em>root area</em>: bytes {@code [ROOT_AREA_OFFSET, chunk length)}
 * are free for the application (the index keeps its superblock there on server 0). Chunks 1.. are handed
 * out by a fetch-and-add on {@code next chunk index}, so any client can allocate without a message to the
 * memory server.
 */
public final class RegionHeaderDescriptor {
    /** "DEXREGN1" in ASCII, little-endian. */
    public static final long MAGIC = 0x314E474552584544L;

    public static final int MAGIC_OFFSET = 0;
    public static final int REGION_LENGTH_OFFSET = MAGIC_OFFSET + Long.BYTES;
    public static final int CHUNK_LENGTH_OFFSET = REGION_LENGTH_OFFSET + Long.BYTES;
    public static final int NEXT_CHUNK_OFFSET = CHUNK_LENGTH_OFFSET + Long.BYTES;
    public static final int INCARNATION_OFFSET = NEXT_CHUNK_OFFSET + Long.BYTES;
    public static final int HEADER_LENGTH = 64;
    /** First byte of the application's root area inside chunk 0. */
    public static final int ROOT_AREA_OFFSET = HEADER_LENGTH;

    /** Smallest chunk: the root area must hold a superblock. */
    public static final int MIN_CHUNK_LENGTH = 4096;

    private RegionHeaderDescriptor() {
    }
}
