package dev.dex.rdma;

/**
 * A 64-bit global address in the memory pool.
 *
 * <pre>
 *  63  62                48 47                                              0
 * +---+--------------------+-------------------------------------------------+
 * | S |  memory server id  |                 offset in region                |
 * +---+--------------------+-------------------------------------------------+
 *   1          15                                  48
 * </pre>
 *
 * <p>{@code S} (swizzled) is clear in every address stored in remote memory. A compute-side cache may
 * set it in its private copies of inner nodes to mark a child pointer that names a local frame instead
 * of a remote node; the remaining 63 bits are then the cache's own. The address {@code 0} (server 0,
 * offset 0) is the region header of server 0 and is never a node, so it serves as {@link #NULL}.
 */
public final class GlobalAddress {
    /** The null address: no node lives at offset 0 of server 0. */
    public static final long NULL = 0L;

    public static final int OFFSET_BITS = 48;
    public static final int SERVER_ID_BITS = 15;
    public static final int SERVER_ID_SHIFT = OFFSET_BITS;
    public static final long OFFSET_MASK = (1L << OFFSET_BITS) - 1;
    public static final long SERVER_ID_MASK = ((1L << SERVER_ID_BITS) - 1) << SERVER_ID_SHIFT;
    public static final long SWIZZLED_BIT = 1L << 63;

    /** Largest memory server id: 32767. */
    public static final int MAX_SERVER_ID = (1 << SERVER_ID_BITS) - 1;
    /** Largest offset in a region: 2^48 - 1 (256 TiB). */
    public static final long MAX_OFFSET = OFFSET_MASK;

    private GlobalAddress() {
    }

    /** Composes an unswizzled address; rejects an out-of-range server id or offset. */
    public static long of(int serverId, long offset) {
        if (serverId < 0 || serverId > MAX_SERVER_ID) {
            throw new IllegalArgumentException("memory server id " + serverId + " outside [0, " + MAX_SERVER_ID + "]");
        }
        if (offset < 0 || offset > MAX_OFFSET) {
            throw new IllegalArgumentException("offset " + offset + " outside [0, 2^48)");
        }
        return ((long) serverId << SERVER_ID_SHIFT) | offset;
    }

    public static int serverId(long address) {
        return (int) ((address & SERVER_ID_MASK) >>> SERVER_ID_SHIFT);
    }

    public static long offset(long address) {
        return address & OFFSET_MASK;
    }

    public static boolean isSwizzled(long address) {
        return (address & SWIZZLED_BIT) != 0;
    }

    /** Marks a cache-private 63-bit payload (for example a frame id) as swizzled. */
    public static long swizzle(long payload) {
        if (payload < 0) {
            throw new IllegalArgumentException("swizzled payload must fit in 63 bits: " + payload);
        }
        return payload | SWIZZLED_BIT;
    }

    /** The 63-bit payload of a swizzled pointer. */
    public static long unswizzle(long swizzled) {
        return swizzled & ~SWIZZLED_BIT;
    }

    /** {@code "s3:0x10400"}, or {@code "swizzled:17"}, for logs and errors. */
    public static String toString(long address) {
        if (isSwizzled(address)) {
            return "swizzled:" + unswizzle(address);
        }
        return "s" + serverId(address) + ":0x" + Long.toHexString(offset(address));
    }
}
