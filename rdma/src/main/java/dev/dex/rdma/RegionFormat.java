package dev.dex.rdma;

import static dev.dex.rdma.RegionHeaderDescriptor.CHUNK_LENGTH_OFFSET;
import static dev.dex.rdma.RegionHeaderDescriptor.MAGIC;
import static dev.dex.rdma.RegionHeaderDescriptor.MAGIC_OFFSET;
import static dev.dex.rdma.RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
import static dev.dex.rdma.RegionHeaderDescriptor.NEXT_CHUNK_OFFSET;
import static dev.dex.rdma.RegionHeaderDescriptor.REGION_LENGTH_OFFSET;

/** Writes and checks the {@link RegionHeaderDescriptor region header}; shared by every transport. */
public final class RegionFormat {
    private RegionFormat() {
    }

    /** Checks the lengths a region is exported with; throws a message that names the bad one. */
    public static void checkLengths(int serverId, long regionLength, int chunkLength) {
        if (serverId < 0 || serverId > GlobalAddress.MAX_SERVER_ID) {
            throw new IllegalArgumentException("memory server id " + serverId + " outside [0, " + GlobalAddress.MAX_SERVER_ID + "]");
        }
        if (chunkLength < MIN_CHUNK_LENGTH || Integer.bitCount(chunkLength) != 1) {
            throw new IllegalArgumentException("chunk length " + chunkLength + " must be a power of two >= " + MIN_CHUNK_LENGTH);
        }
        if (regionLength < 2L * chunkLength || regionLength % chunkLength != 0 || regionLength > GlobalAddress.MAX_OFFSET) {
            throw new IllegalArgumentException("region length " + regionLength + " must be a multiple of the chunk length "
                    + chunkLength + ", hold at least two chunks, and stay below 2^48");
        }
    }

    /** Writes a fresh header: chunk 0 is the header and root area, chunk 1 is the first to hand out. */
    public static void format(Region region, int chunkLength) {
        region.putLongVolatile(REGION_LENGTH_OFFSET, region.length());
        region.putLongVolatile(CHUNK_LENGTH_OFFSET, chunkLength);
        region.putLongVolatile(NEXT_CHUNK_OFFSET, 1);
        long incarnation;
        do {
            incarnation = new java.security.SecureRandom().nextLong();
        } while (incarnation == 0);
        region.putLongVolatile(RegionHeaderDescriptor.INCARNATION_OFFSET, incarnation);
        region.putLongVolatile(MAGIC_OFFSET, MAGIC);
    }

    /** The region's incarnation (see {@link RegionHeaderDescriptor}); 0 for a region formatted before it existed. */
    public static long incarnation(Region region) {
        return region.getLongVolatile(RegionHeaderDescriptor.INCARNATION_OFFSET);
    }

    /** Checks that {@code region} carries a header written by {@link #format}; returns its chunk length. */
    public static long check(int serverId, Region region) {
        if (region.length() < MIN_CHUNK_LENGTH || region.getLongVolatile(MAGIC_OFFSET) != MAGIC) {
            throw new IllegalArgumentException("memory server " + serverId + " has no formatted DEX region");
        }
        long length = region.getLongVolatile(REGION_LENGTH_OFFSET);
        if (length != region.length()) {
            throw new IllegalArgumentException("memory server " + serverId + " region header says " + length
                    + " bytes but " + region.length() + " are mapped");
        }
        return region.getLongVolatile(CHUNK_LENGTH_OFFSET);
    }
}
