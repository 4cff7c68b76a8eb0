package dev.dex.core.partition;

import java.nio.ByteOrder;
import java.util.Arrays;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.SuperblockDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * The logical partitions: {@code count} contiguous key ranges covering every key. Partition {@code p}
 * holds the keys in {@code (upper[p-1], upper[p]]}, with {@code upper[-1]} minus infinity and
 * {@code upper[count-1] = Long.MAX_VALUE}.
 *
 * <p>A tree node is <em>owned</em> when its fence range {@code (low, high]} lies inside one partition, and
 * <em>shared</em> otherwise. Immutable and thread-safe.
 */
public final class PartitionTable {
    /**
     * Most partitions a tree can have. Their bounds take {@code (n - 1)} words of memory server 0's root area
     * ({@link #maxPartitions(long)}): a chunk of 4 KiB holds 497 partitions, one of 16 KiB or more (the default is
     * 1 MiB) all of them.
     */
    public static final int MAX_PARTITIONS = 1024;

    /** Byte order of the table in the superblock, as of every superblock field. */
    private static final ByteOrder STORED_ORDER = ByteOrder.LITTLE_ENDIAN;

    private final long[] upper;

    private PartitionTable(long[] upper) {
        this.upper = upper;
    }

    /**
     * A table from the inclusive upper bounds of all partitions but the last, strictly ascending.
     */
    public static PartitionTable ofUpperBounds(long... bounds) {
        if (bounds.length + 1 > MAX_PARTITIONS) {
            throw new IllegalArgumentException("at most " + MAX_PARTITIONS + " partitions: " + (bounds.length + 1));
        }
        long[] upper = Arrays.copyOf(bounds, bounds.length + 1);
        upper[bounds.length] = NodeHeaderDescriptor.POS_INFINITY;
        for (int i = 0; i < upper.length; i++) {
            long previous = i == 0 ? NodeHeaderDescriptor.NEG_INFINITY : upper[i - 1];
            if (upper[i] <= previous) {
                throw new IllegalArgumentException("partition bounds must be strictly ascending and above Long.MIN_VALUE: "
                        + Arrays.toString(bounds));
            }
        }
        return new PartitionTable(upper);
    }

    /** {@code count} partitions of equal width over {@code [minKey, maxKey]}; the outer two reach to infinity. */
    public static PartitionTable equalWidth(int count, long minKey, long maxKey) {
        if (count < 1 || count > MAX_PARTITIONS) {
            throw new IllegalArgumentException("partition count must be in [1, " + MAX_PARTITIONS + "]: " + count);
        }
        if (maxKey < minKey || (double) maxKey - (double) minKey + 1 < count) {
            throw new IllegalArgumentException("key range [" + minKey + ", " + maxKey + "] is too narrow for " + count + " partitions");
        }
        long[] bounds = new long[count - 1];
        double width = ((double) maxKey - (double) minKey + 1) / count;
        for (int i = 0; i < bounds.length; i++) {
            bounds[i] = minKey - 1 + (long) Math.floor(width * (i + 1));
        }
        return ofUpperBounds(bounds);
    }

    /**
     * The most partitions whose bounds fit the root area of a chunk of {@code chunkLength} bytes (chunk 0 of memory
     * server 0 holds the superblock), at most {@link #MAX_PARTITIONS}.
     */
    public static int maxPartitions(long chunkLength) {
        long words = (chunkLength - dev.dex.rdma.RegionHeaderDescriptor.ROOT_AREA_OFFSET - SuperblockDescriptor.PARTITION_BOUNDS_OFFSET)
                / Long.BYTES;
        return (int) Math.max(0, Math.min(MAX_PARTITIONS, words + 1));
    }

    public int count() {
        return upper.length;
    }

    /** The partition that holds {@code key}. */
    public int partitionOf(long key) {
        int lo = 0;
        int hi = upper.length - 1;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (upper[mid] < key) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /** Exclusive lower bound of partition {@code p} ({@code Long.MIN_VALUE} for the first). */
    public long lowerExclusive(int p) {
        return p == 0 ? NodeHeaderDescriptor.NEG_INFINITY : upper[p - 1];
    }

    /** Inclusive upper bound of partition {@code p}. */
    public long upperInclusive(int p) {
        return upper[p];
    }

    /**
     * The partition that holds the key of any width at {@code key[0, words)}: partitions are bounds on the first word
     * (a key's first 8 bytes), so partition {@code p} holds the keys from {@code (upper[p-1], MAX, ..., MAX)} exclusive
     * to {@code (upper[p], MAX, ..., MAX)} inclusive.
     */
    public int partitionOf(long[] key) {
        return partitionOf(key[0]);
    }

    /**
     * Whether the key of any width {@code key} lies in the partition whose first-word bounds are {@code (low, high]}
     * ({@link #lowerExclusive}, {@link #upperInclusive}): its first word lies in {@code (low, high]}, or, in the
     * first partition ({@code low} minus infinity), it is that word and the key is not the reserved minus infinity.
     */
    public static boolean contains(long low, long high, long[] key) {
        long first = key[0];
        if (first > high || first < low) {
            return false;
        }
        if (first > low) {
            return true;
        }
        if (low != NodeHeaderDescriptor.NEG_INFINITY) {
            return false;
        }
        for (int w = 1; w < key.length; w++) {
            if (key[w] != NodeHeaderDescriptor.NEG_INFINITY) {
                return true;
            }
        }
        return false;
    }

    /**
     * The exclusive lower bound of partition {@code p} as a key of {@code words} words, into {@code out}: the last key of
     * partition {@code p - 1}, or minus infinity (the reserved key, never stored) for the first.
     */
    public void lowerExclusive(int p, long[] out, int words) {
        out[0] = lowerExclusive(p);
        for (int w = 1; w < words; w++) {
            out[w] = p == 0 ? NodeHeaderDescriptor.NEG_INFINITY : NodeHeaderDescriptor.POS_INFINITY;
        }
    }

    /** The inclusive upper bound of partition {@code p} as a key of {@code words} words, into {@code out}. */
    public void upperInclusive(int p, long[] out, int words) {
        out[0] = upper[p];
        for (int w = 1; w < words; w++) {
            out[w] = NodeHeaderDescriptor.POS_INFINITY;
        }
    }

    /**
     * The partition a node with fences {@code (low, high]} of {@code words} words lies in, or -1 when it spans
     * several (shared).
     */
    public int ownerOf(long[] low, long[] high, int words) {
        boolean lowRestMaximal = true;
        for (int w = 1; w < words; w++) {
            lowRestMaximal &= low[w] == NodeHeaderDescriptor.POS_INFINITY;
        }
        return ownerOf(low[0], lowRestMaximal, high[0]);
    }

    /** The partition the node {@code node} lies in by its fences, or -1 when it spans several (shared). */
    public int ownerOf(NodeView node) {
        return ownerOf(node.lowFence(), node.lowFenceRestIsMaximal(), node.highFence());
    }

    /**
     * The partition of a node whose low fence has the first word {@code low0} (and further words all maximal, or
     * not) and whose high fence has the first word {@code high0}: the partition of its high fence if the low fence
     * is at or above that partition's exclusive lower bound {@code (upper[p-1], MAX, ..., MAX)}, else -1.
     */
    private int ownerOf(long low0, boolean lowRestMaximal, long high0) {
        int p = partitionOf(high0);
        if (p == 0) {
            return 0;
        }
        long bound = upper[p - 1];
        return low0 > bound || low0 == bound && lowRestMaximal ? p : -1;
    }

    /**
     * The partition a node with fences {@code (low, high]} lies in, or -1 when it spans several (shared).
     */
    public int ownerOf(long low, long high) {
        return ownerOf(low, true, high);
    }

    /** The inclusive upper bounds of all partitions but the last. */
    public long[] upperBounds() {
        return Arrays.copyOf(upper, upper.length - 1);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PartitionTable other && Arrays.equals(upper, other.upper);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(upper);
    }

    @Override
    public String toString() {
        return "PartitionTable" + Arrays.toString(upper);
    }

    /**
     * Stores the partition table every compute node will read. Done once, by the node that formats or
     * bulk-loads the tree, before compute nodes open it.
     */
    public static void store(RemoteMemory memory, PartitionTable table) {
        Superblock.read(memory);
        long chunk = memory.chunkAllocator().chunkLength(0);
        if (table.count() > maxPartitions(chunk)) {
            throw new IllegalArgumentException(table.count() + " partitions do not fit the superblock in memory server 0's chunks of "
                    + chunk + " bytes, which hold " + maxPartitions(chunk) + "; format its region with larger chunks"
                    + " (dex.memory.chunk-size, 16 KiB or more holds " + MAX_PARTITIONS + ")");
        }
        // Odd while the table is rewritten: a reader that sees an odd or a moved version reads again.
        memory.fetchAndAdd(SuperblockDescriptor.TABLE_VERSION_ADDRESS, 1);
        long[] bounds = table.upperBounds();
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Math.max(8, bounds.length * Long.BYTES)]);
        for (int i = 0; i < bounds.length; i++) {
            buffer.putLong(i * Long.BYTES, bounds[i], STORED_ORDER);
        }
        if (bounds.length > 0) {
            memory.write(SuperblockDescriptor.PARTITION_BOUNDS_ADDRESS, buffer, 0, bounds.length * Long.BYTES);
        }
        UnsafeBuffer count = new UnsafeBuffer(new byte[Long.BYTES]);
        count.putInt(0, table.count(), STORED_ORDER);
        memory.write(SuperblockDescriptor.PARTITION_COUNT_ADDRESS, count, 0, Integer.BYTES);
        memory.fetchAndAdd(SuperblockDescriptor.TABLE_VERSION_ADDRESS, 1);
    }

    /** A partition table and the version it was read at. */
    public record Versioned(PartitionTable table, long version) {
    }

    /** The partition table and its version, read consistently (again while a rewrite is under way). */
    public static Versioned loadVersioned(RemoteMemory memory) {
        for (int attempt = 0; ; attempt++) {
            long before = storedVersion(memory);
            if ((before & 1) == 0) {
                PartitionTable table = load(memory);
                if (storedVersion(memory) == before) {
                    return new Versioned(table, before);
                }
            }
            if (attempt > 10_000) {
                throw new IllegalStateException("the partition table is being rewritten and did not settle");
            }
            Thread.onSpinWait();
        }
    }

    /** The partition table's version: odd while it is rewritten, even otherwise. */
    public static long storedVersion(RemoteMemory memory) {
        return memory.readLong(SuperblockDescriptor.TABLE_VERSION_ADDRESS);
    }

    /** The stored partition table; fails clearly when none was stored. */
    public static PartitionTable load(RemoteMemory memory) {
        Superblock.read(memory);
        UnsafeBuffer count = new UnsafeBuffer(new byte[Integer.BYTES]);
        memory.read(SuperblockDescriptor.PARTITION_COUNT_ADDRESS, count, 0, Integer.BYTES);
        int n = count.getInt(0, STORED_ORDER);
        if (n < 1 || n > MAX_PARTITIONS) {
            throw new IllegalStateException("the tree has no partition table; store one with PartitionTable.store");
        }
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Math.max(8, (n - 1) * Long.BYTES)]);
        if (n > 1) {
            memory.read(SuperblockDescriptor.PARTITION_BOUNDS_ADDRESS, buffer, 0, (n - 1) * Long.BYTES);
        }
        long[] bounds = new long[n - 1];
        for (int i = 0; i < bounds.length; i++) {
            bounds[i] = buffer.getLong(i * Long.BYTES, STORED_ORDER);
        }
        return ofUpperBounds(bounds);
    }
}
