package dev.dex.core.tree;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;

/**
 * The tree's superblock, at the start of memory server 0's root area (little-endian 8-byte words).
 *
 * <pre>
 *   0               8               16                24              28              32           36          40              48              56          64
 *   +---------------+---------------+-----------------+---------------+---------------+------------+-----------+---------------+---------------+-----------+
 *   | magic         | root address  | instance count  | subtree level | format version| partitions | key bytes | log directory | table version | ownership |
 *   +---------------+---------------+-----------------+---------------+---------------+------------+-----------+---------------+---------------+-----------+
 *   64
 *   +------------------------------------------------------+
 *   | partition upper bounds: (partitions - 1) longs       |
 *   +------------------------------------------------------+
 * </pre>
 *
 * <ul>
 *   <li><b>magic</b> is written last by {@link Superblock#format}: a tree exists once it is set.</li>
 *   <li><b>root address</b> is changed only by compare-and-swap (root split, bulk load).</li>
 *   <li><b>instance count</b> is taken by fetch-and-add by every tree instance that opens the tree, so
 *       lock tags are unique across compute nodes.</li>
 *   <li><b>subtree level</b> M: every subtree rooted at level M lies on one memory server.</li>
 *   <li><b>partitions</b>: the number of logical partitions in the partition table's slot 0 (0 until a table is
 *       stored), followed at offset 64 by the inclusive upper bounds of all partitions but the last, then (where the
 *       chunk has room) their ids; slot 1 follows (see {@code PartitionTable}), so every compute node reads the same
 *       table.</li>
 *   <li><b>table version</b>: which slot holds the partition table, and a lock over changing it: even for a table,
 *       odd while a writer holds the lock; only ever raised, by compare-and-swap ({@code PartitionTable.commit}). A
 *       compute node serves the table of the version it read, and reads it again when an acquire finds it moved.</li>
 *   <li><b>key bytes</b>: the width of the index's keys ({@code KeyFormat}), fixed when the tree is formatted;
 *       0 (a superblock written before widths existed) means 8.</li>
 *   <li><b>log directory</b>: address of the chunk that lists each partition's redo log, set by
 *       compare-and-swap by the first compute node that opens a log ({@code RedoLogDescriptor}).</li>
 *   <li><b>ownership</b>: address of this server's ownership table, which every memory server keeps at this
 *       offset of its root area ({@code OwnershipTable}); not part of the superblock proper.</li>
 * </ul>
 */
public final class SuperblockDescriptor {
    /** "DEXTREE1" in ASCII, little-endian. */
    public static final long MAGIC = 0x3145455254584544L;
    public static final int FORMAT_VERSION = 1;

    public static final int MAGIC_OFFSET = 0;
    public static final int ROOT_OFFSET = MAGIC_OFFSET + Long.BYTES;
    public static final int INSTANCE_COUNT_OFFSET = ROOT_OFFSET + Long.BYTES;
    public static final int SUBTREE_LEVEL_OFFSET = INSTANCE_COUNT_OFFSET + Long.BYTES;
    public static final int FORMAT_VERSION_OFFSET = SUBTREE_LEVEL_OFFSET + Integer.BYTES;
    public static final int PARTITION_COUNT_OFFSET = FORMAT_VERSION_OFFSET + Integer.BYTES;
    public static final int KEY_BYTES_OFFSET = PARTITION_COUNT_OFFSET + Integer.BYTES;
    public static final int LENGTH = KEY_BYTES_OFFSET + Integer.BYTES;
    public static final int LOG_DIRECTORY_OFFSET = 40;
    public static final int TABLE_VERSION_OFFSET = 48;
    public static final int PARTITION_BOUNDS_OFFSET = 64;

    /** Global address of the superblock: server 0, start of the region's root area. */
    public static final long ADDRESS = GlobalAddress.of(0, RegionHeaderDescriptor.ROOT_AREA_OFFSET);
    public static final long ROOT_ADDRESS = ADDRESS + ROOT_OFFSET;
    public static final long INSTANCE_COUNT_ADDRESS = ADDRESS + INSTANCE_COUNT_OFFSET;
    public static final long PARTITION_COUNT_ADDRESS = ADDRESS + PARTITION_COUNT_OFFSET;
    public static final long PARTITION_BOUNDS_ADDRESS = ADDRESS + PARTITION_BOUNDS_OFFSET;
    public static final long TABLE_VERSION_ADDRESS = ADDRESS + TABLE_VERSION_OFFSET;

    private SuperblockDescriptor() {
    }
}
