package dev.dex.core.partition;

import java.nio.ByteOrder;
import java.util.Arrays;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.SuperblockDescriptor;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * The logical partitions: contiguous key ranges covering every key, each named by an id. In key order the ranges are
 * {@code (upper[i-1], upper[i]]}, with {@code upper[-1]} minus infinity and the last {@code upper} {@code Long.MAX_VALUE},
 * and range {@code i} is partition {@code ids[i]}. A table made at format time ({@link #ofUpperBounds}) numbers its
 * partitions in key order, 0 to {@code count - 1}; a split ({@link #split}) narrows one partition and gives the rest of
 * its range to a new id, so after splits ids are no longer in key order and some ids below {@link #idLimit} may be
 * unused (after a merge, {@link #merge}). Ids are below {@link #MAX_PARTITIONS}: they name redo logs, ownership
 * entries and sharding entities, which are kept per id.
 *
 * <p>A tree node is <em>owned</em> when its fence range {@code (low, high]} lies inside one partition, and
 * <em>shared</em> otherwise. Immutable and thread-safe.
 *
 * <p>Stored in memory server 0's superblock in one of two slots, and replaced by a compare-and-swap of its version
 * ({@link #commit}, docs/partition-splits.md "The stored table").
 */
public final class PartitionTable {
    /**
     * Most partitions a tree can have, and the bound on their ids. Their bounds take {@code (n - 1)} words of memory
     * server 0's root area ({@link #maxPartitions(long)}): a chunk of 4 KiB holds 497 partitions, one of 16 KiB or more
     * (the default is 1 MiB) all of them. A table whose ids are not 0 to n - 1 in key order (after a split) needs
     * {@link #SPLIT_ROOT_AREA} bytes of root area.
     */
    public static final int MAX_PARTITIONS = 1024;

    /** Byte order of the table in the superblock, as of every superblock field. */
    private static final ByteOrder STORED_ORDER = ByteOrder.LITTLE_ENDIAN;

    /**
     * Slot 0 is the table's first place (count at the superblock's partition count, bounds at offset 64), extended by
     * its ids at this root-area offset (all zero: ids in key order, as every table written before splits existed).
     */
    static final int SLOT0_IDS_OFFSET = SuperblockDescriptor.PARTITION_BOUNDS_OFFSET + (MAX_PARTITIONS - 1) * Long.BYTES;
    /** Slot 1: count (a word), then the bounds, then the ids (2 bytes each), at these root-area offsets. */
    static final int SLOT1_COUNT_OFFSET = SLOT0_IDS_OFFSET + MAX_PARTITIONS * Short.BYTES;
    static final int SLOT1_BOUNDS_OFFSET = SLOT1_COUNT_OFFSET + Long.BYTES;
    static final int SLOT1_IDS_OFFSET = SLOT1_BOUNDS_OFFSET + (MAX_PARTITIONS - 1) * Long.BYTES;
    /** Root-area bytes both slots need: what a tree whose table changes after format needs of server 0's chunk 0. */
    public static final int SPLIT_ROOT_AREA = SLOT1_IDS_OFFSET + MAX_PARTITIONS * Short.BYTES;
    /**
     * How long a writer that finds the table locked (odd version) waits before it treats the lock's holder as dead and
     * rolls the lock back ({@link #commit}): well above a commit's few writes, and below a takeover's time.
     */
    public static final long STALE_LOCK_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(2);

    private final long[] upper;
    /** ids[i]: the id of range i (key order). */
    private final int[] ids;
    /** position[id]: its range's index, or -1 for an id not in use; length {@link #idLimit}. */
    private final int[] position;

    private PartitionTable(long[] upper, int[] ids) {
        this.upper = upper;
        this.ids = ids;
        int limit = 0;
        for (int id : ids) {
            if (id < 0 || id >= MAX_PARTITIONS) {
                throw new IllegalArgumentException("partition ids must be in [0, " + MAX_PARTITIONS + "): " + Arrays.toString(ids));
            }
            limit = Math.max(limit, id + 1);
        }
        this.position = new int[limit];
        Arrays.fill(position, -1);
        for (int i = 0; i < ids.length; i++) {
            if (position[ids[i]] >= 0) {
                throw new IllegalArgumentException("partition id " + ids[i] + " names two ranges: " + Arrays.toString(ids));
            }
            position[ids[i]] = i;
        }
    }

    /**
     * A table from the inclusive upper bounds of all ranges but the last (strictly ascending) and the ids of all
     * ranges, in key order.
     */
    public static PartitionTable of(long[] bounds, int[] ids) {
        if (ids.length != bounds.length + 1) {
            throw new IllegalArgumentException(bounds.length + " bounds make " + (bounds.length + 1) + " ranges, not " + ids.length);
        }
        checkBounds(bounds);
        long[] upper = Arrays.copyOf(bounds, bounds.length + 1);
        upper[bounds.length] = NodeHeaderDescriptor.POS_INFINITY;
        return new PartitionTable(upper, ids.clone());
    }

    private static void checkBounds(long[] bounds) {
        if (bounds.length + 1 > MAX_PARTITIONS) {
            throw new IllegalArgumentException("at most " + MAX_PARTITIONS + " partitions: " + (bounds.length + 1));
        }
        for (int i = 0; i <= bounds.length; i++) {
            long previous = i == 0 ? NodeHeaderDescriptor.NEG_INFINITY : bounds[i - 1];
            long current = i == bounds.length ? NodeHeaderDescriptor.POS_INFINITY : bounds[i];
            if (current <= previous) {
                throw new IllegalArgumentException("partition bounds must be strictly ascending, above Long.MIN_VALUE and below"
                        + " Long.MAX_VALUE: " + Arrays.toString(bounds));
            }
        }
    }

    /**
     * A table from the inclusive upper bounds of all partitions but the last, strictly ascending.
     */
    public static PartitionTable ofUpperBounds(long... bounds) {
        checkBounds(bounds);
        int[] ids = new int[bounds.length + 1];
        Arrays.setAll(ids, i -> i);
        return of(bounds, ids);
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
        long words = (chunkLength - RegionHeaderDescriptor.ROOT_AREA_OFFSET - SuperblockDescriptor.PARTITION_BOUNDS_OFFSET)
                / Long.BYTES;
        return (int) Math.max(0, Math.min(MAX_PARTITIONS, words + 1));
    }

    /** How many partitions the table has (ranges, ids in use). */
    public int count() {
        return upper.length;
    }

    /** One above the highest id in use: arrays indexed by id need this length (ids below it may be unused). */
    public int idLimit() {
        return position.length;
    }

    /** Whether {@code id} names a partition of this table. */
    public boolean exists(int id) {
        return id >= 0 && id < position.length && position[id] >= 0;
    }

    /** The ids of all partitions, in key order. */
    public int[] ids() {
        return ids.clone();
    }

    /** Whether the ids are 0 to count - 1 in key order (a table no split or merge changed). */
    public boolean idsInKeyOrder() {
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] != i) {
                return false;
            }
        }
        return true;
    }

    /** The partition that holds {@code key}. */
    public int partitionOf(long key) {
        return ids[indexOf(key)];
    }

    /** The index (in key order) of the range that holds {@code key}. */
    private int indexOf(long key) {
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

    /** The index (in key order) of partition {@code id}'s range; fails clearly for an id not in the table. */
    private int positionOf(int id) {
        if (!exists(id)) {
            throw new IllegalArgumentException("partition " + id + " is not in the partition table " + this);
        }
        return position[id];
    }

    /** Exclusive lower bound of partition {@code p} ({@code Long.MIN_VALUE} for the first). */
    public long lowerExclusive(int p) {
        int i = positionOf(p);
        return i == 0 ? NodeHeaderDescriptor.NEG_INFINITY : upper[i - 1];
    }

    /** Inclusive upper bound of partition {@code p}. */
    public long upperInclusive(int p) {
        return upper[positionOf(p)];
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
        boolean first = positionOf(p) == 0;
        for (int w = 1; w < words; w++) {
            out[w] = first ? NodeHeaderDescriptor.NEG_INFINITY : NodeHeaderDescriptor.POS_INFINITY;
        }
    }

    /** The inclusive upper bound of partition {@code p} as a key of {@code words} words, into {@code out}. */
    public void upperInclusive(int p, long[] out, int words) {
        out[0] = upperInclusive(p);
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
     * is at or above that range's exclusive lower bound {@code (upper[i-1], MAX, ..., MAX)}, else -1.
     */
    private int ownerOf(long low0, boolean lowRestMaximal, long high0) {
        int i = indexOf(high0);
        if (i == 0) {
            return ids[0];
        }
        long bound = upper[i - 1];
        return low0 > bound || low0 == bound && lowRestMaximal ? ids[i] : -1;
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

    /**
     * This table with partition {@code id} narrowed to {@code (low, boundary]} and the rest of its range,
     * {@code (boundary, high]}, given to the new partition {@code newId}.
     *
     * @throws IllegalArgumentException when {@code boundary} does not lie strictly inside the partition's range, or
     *                                  {@code newId} is in use or not below {@link #MAX_PARTITIONS}
     */
    public PartitionTable split(int id, long boundary, int newId) {
        int i = positionOf(id);
        if (boundary <= lowerExclusive(id) || boundary >= upper[i]) {
            throw new IllegalArgumentException("split boundary " + boundary + " is not inside partition " + id + " ("
                    + lowerExclusive(id) + ", " + upper[i] + "]");
        }
        if (exists(newId) || newId < 0 || newId >= MAX_PARTITIONS) {
            throw new IllegalArgumentException("partition id " + newId + " is in use or outside [0, " + MAX_PARTITIONS + ")");
        }
        if (count() == MAX_PARTITIONS) {
            throw new IllegalArgumentException("the table has " + MAX_PARTITIONS + " partitions already");
        }
        long[] bounds = new long[upper.length];
        int[] newIds = new int[ids.length + 1];
        for (int j = 0, k = 0; j < upper.length; j++) {
            if (j == i) {
                bounds[k] = boundary;
                newIds[k++] = id;
                if (k < bounds.length) {
                    bounds[k] = upper[j];
                }
                newIds[k++] = newId;
            } else {
                if (k < bounds.length) {
                    bounds[k] = upper[j];
                }
                newIds[k++] = ids[j];
            }
        }
        return of(bounds, newIds);
    }

    /**
     * This table with partition {@code left} widened over its right neighbour {@code right}, whose id falls out of use.
     *
     * @throws IllegalArgumentException when {@code right}'s range does not follow {@code left}'s
     */
    public PartitionTable merge(int left, int right) {
        int i = positionOf(left);
        if (i + 1 >= ids.length || ids[i + 1] != right) {
            throw new IllegalArgumentException("partition " + right + " is not the right neighbour of partition " + left + " in " + this);
        }
        long[] bounds = new long[upper.length - 2];
        int[] newIds = new int[ids.length - 1];
        for (int j = 0, k = 0; j < ids.length; j++) {
            if (j == i) {
                continue; // left's bound goes; left takes right's range end
            }
            if (k < bounds.length) {
                bounds[k] = upper[j];
            }
            newIds[k++] = j == i + 1 ? left : ids[j];
        }
        return of(bounds, newIds);
    }

    /** Whether partition {@code id} exists in this table and in {@code other} with the same range. */
    public boolean sameRange(int id, PartitionTable other) {
        return exists(id) && other.exists(id) && lowerExclusive(id) == other.lowerExclusive(id)
                && upperInclusive(id) == other.upperInclusive(id);
    }

    /** The lowest id not in use, for the next split; -1 when the table has {@link #MAX_PARTITIONS} partitions. */
    public int freeId() {
        for (int id = 0; id < MAX_PARTITIONS; id++) {
            if (!exists(id)) {
                return id;
            }
        }
        return -1;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PartitionTable other && Arrays.equals(upper, other.upper) && Arrays.equals(ids, other.ids);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(upper) + Arrays.hashCode(ids);
    }

    @Override
    public String toString() {
        return idsInKeyOrder() ? "PartitionTable" + Arrays.toString(upper)
                : "PartitionTable" + Arrays.toString(upper) + " ids " + Arrays.toString(ids);
    }

    /**
     * Stores the partition table every compute node will read. Done once, by the node that formats or
     * bulk-loads the tree, before compute nodes open it; a table stored over an earlier one is committed as
     * {@link #commit} does.
     */
    public static void store(RemoteMemory memory, PartitionTable table) {
        Superblock.read(memory);
        long chunk = memory.chunkAllocator().chunkLength(0);
        if (table.count() > maxPartitions(chunk)) {
            throw new IllegalArgumentException(table.count() + " partitions do not fit the superblock in memory server 0's chunks of "
                    + chunk + " bytes, which hold " + maxPartitions(chunk) + "; format its region with larger chunks"
                    + " (dex.memory.chunk-size, 16 KiB or more holds " + MAX_PARTITIONS + ")");
        }
        for (int attempt = 0; ; attempt++) {
            long version = storedVersion(memory) & ~1L;
            if (changeable(memory) ? commit(memory, version, table) : storeInPlace(memory, version, table)) {
                return;
            }
            if (attempt > 1_000) {
                throw new IllegalStateException("the partition table kept changing while it was stored");
            }
        }
    }

    /**
     * A table stored over the table of {@code expected} in slot 0 where the chunks have no room for slot 1 (a format-time
     * rewrite: a loader's table over the memory node's): locks the version at {@code expected + 3}, which a reader of
     * {@code expected} takes as a rewrite of its slot (and a reader of the lock cannot read, so it waits), writes slot 0,
     * and unlocks at {@code expected + 4}, whose slot is 0 again. A writer that dies here leaves the table unreadable,
     * as a half-done format would.
     */
    private static boolean storeInPlace(RemoteMemory memory, long expected, PartitionTable table) {
        if (slotOf(expected) != 0 && expected != 0) {
            throw new IllegalStateException("the partition table's version " + expected + " names a slot the chunks cannot hold");
        }
        if (memory.compareAndSwap(SuperblockDescriptor.TABLE_VERSION_ADDRESS, expected, expected == 0 ? 1 : expected + 3)
                != expected) {
            return false;
        }
        writeSlot(memory, 0, table, rootArea(memory));
        memory.compareAndSwap(SuperblockDescriptor.TABLE_VERSION_ADDRESS, expected == 0 ? 1 : expected + 3,
                expected == 0 ? 2 : expected + 4);
        return true;
    }

    /** A partition table and the version it was read at. */
    public record Versioned(PartitionTable table, long version) {
    }

    /**
     * The slot that holds the table of even version {@code version}: versions 2, 6, 10, ... in slot 0 (where the first
     * table stored lies), 4, 8, 12, ... in slot 1.
     */
    static int slotOf(long version) {
        return (int) (((version >> 1) + 1) & 1);
    }

    /**
     * Replaces the table of version {@code expected} with {@code table}: locks the version (compare-and-swap to
     * {@code expected + 1}), writes the table to the slot of {@code expected + 2}, which no reader of {@code expected}
     * reads, then commits by compare-and-swap to {@code expected + 2}. A writer that dies holding the lock leaves the
     * old table readable (readers of an odd version read the table below it); the next writer that finds the lock
     * held for {@link #STALE_LOCK_NANOS} rolls it back to {@code expected + 4}, whose slot is the old table's, and
     * starts again from there.
     *
     * @return whether {@code table} is now the stored table; false when the stored version is no longer
     *         {@code expected} (another table was committed, or a stale lock rolled back): read the table again
     * @throws IllegalStateException when server 0's chunk 0 cannot hold the slot (chunks below
     *                               {@link #SPLIT_ROOT_AREA} bytes of root area hold one table, written once)
     */
    public static boolean commit(RemoteMemory memory, long expected, PartitionTable table) {
        if ((expected & 1) != 0) {
            throw new IllegalArgumentException("an odd table version is a lock, not a table: " + expected);
        }
        int slot = slotOf(expected + 2);
        long rootArea = rootArea(memory);
        long needed = slot == 1 ? SPLIT_ROOT_AREA
                : table.idsInKeyOrder() && rootArea < SLOT0_IDS_OFFSET + (long) table.count() * Short.BYTES
                        ? SuperblockDescriptor.PARTITION_BOUNDS_OFFSET + (long) (table.count() - 1) * Long.BYTES
                        : SLOT0_IDS_OFFSET + (long) table.count() * Short.BYTES;
        if (rootArea < needed) {
            throw new IllegalStateException("memory server 0's chunks of " + memory.chunkAllocator().chunkLength(0)
                    + " bytes have no room for a second partition table: a table that changes after format (a split, a merge,"
                    + " a rewrite) needs chunks of at least " + (RegionHeaderDescriptor.ROOT_AREA_OFFSET + SPLIT_ROOT_AREA)
                    + " bytes (dex.memory.chunk-size; the default, 1 MiB, has room)");
        }
        long lockedSince = 0;
        while (true) {
            long witnessed = memory.compareAndSwap(SuperblockDescriptor.TABLE_VERSION_ADDRESS, expected, expected + 1);
            if (witnessed == expected) {
                break;
            }
            if (witnessed != expected + 1) {
                return false;
            }
            // Another writer holds the lock on this version: it commits soon, or it died.
            long now = System.nanoTime();
            if (lockedSince == 0) {
                lockedSince = now;
            } else if (now - lockedSince > STALE_LOCK_NANOS) {
                memory.compareAndSwap(SuperblockDescriptor.TABLE_VERSION_ADDRESS, expected + 1, expected + 4);
                return false;
            }
            java.util.concurrent.locks.LockSupport.parkNanos(java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(1));
        }
        writeSlot(memory, slot, table, rootArea);
        return memory.compareAndSwap(SuperblockDescriptor.TABLE_VERSION_ADDRESS, expected + 1, expected + 2) == expected + 1;
    }

    /**
     * Whether the tree's table can change after format (a split, a merge): memory server 0's chunks hold both slots.
     * Then the ownership tables are made for every id a split may add ({@link OwnershipTable#ENTRIES}).
     */
    public static boolean changeable(RemoteMemory memory) {
        return rootArea(memory) >= SPLIT_ROOT_AREA;
    }

    private static long rootArea(RemoteMemory memory) {
        return memory.chunkAllocator().chunkLength(0) - RegionHeaderDescriptor.ROOT_AREA_OFFSET;
    }

    private static void writeSlot(RemoteMemory memory, int slot, PartitionTable table, long rootArea) {
        long[] bounds = table.upperBounds();
        int n = table.count();
        if (slot == 0) {
            if (bounds.length > 0) {
                memory.write(SuperblockDescriptor.PARTITION_BOUNDS_ADDRESS, longs(bounds), 0, bounds.length * Long.BYTES);
            }
            if (rootArea >= SLOT0_IDS_OFFSET + (long) n * Short.BYTES) {
                memory.write(SuperblockDescriptor.ADDRESS + SLOT0_IDS_OFFSET, shorts(table.ids), 0, n * Short.BYTES);
            }
            UnsafeBuffer count = new UnsafeBuffer(new byte[Long.BYTES]);
            count.putInt(0, n, STORED_ORDER);
            memory.write(SuperblockDescriptor.PARTITION_COUNT_ADDRESS, count, 0, Integer.BYTES);
        } else {
            long[] countAndBounds = new long[bounds.length + 1];
            countAndBounds[0] = n;
            System.arraycopy(bounds, 0, countAndBounds, 1, bounds.length);
            memory.write(SuperblockDescriptor.ADDRESS + SLOT1_COUNT_OFFSET, longs(countAndBounds), 0, countAndBounds.length * Long.BYTES);
            memory.write(SuperblockDescriptor.ADDRESS + SLOT1_IDS_OFFSET, shorts(table.ids), 0, n * Short.BYTES);
        }
    }

    private static UnsafeBuffer longs(long[] values) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Math.max(8, values.length * Long.BYTES)]);
        for (int i = 0; i < values.length; i++) {
            buffer.putLong(i * Long.BYTES, values[i], STORED_ORDER);
        }
        return buffer;
    }

    private static UnsafeBuffer shorts(int[] values) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Math.max(8, values.length * Short.BYTES)]);
        for (int i = 0; i < values.length; i++) {
            buffer.putShort(i * Short.BYTES, (short) values[i], STORED_ORDER);
        }
        return buffer;
    }

    /**
     * The partition table and its version, read consistently: the table of the stored version (of the version below
     * it while a writer holds the lock), taken only if no writer started to overwrite its slot meanwhile.
     */
    public static Versioned loadVersioned(RemoteMemory memory) {
        Superblock.read(memory);
        boolean bothSlots = changeable(memory);
        for (int attempt = 0; ; attempt++) {
            long seen = storedVersion(memory);
            long before = seen & ~1L;
            if (before == 0 && seen == 0) {
                throw new IllegalStateException("the tree has no partition table; store one with PartitionTable.store");
            }
            int slot = slotOf(before);
            if (before == 0) {
                slot = -1; // the first table is being stored: wait for it
            }
            if (slot < 0) {
                Thread.onSpinWait();
            } else if (slot == 1 && (!bothSlots || slotOneEmpty(memory))) {
                // A version whose table lies in slot 0 although it names slot 1: a tree stored before slots existed
                // (each store added 2), or an in-place store's lock on small chunks. Moved to the next version, which
                // names slot 0, by whoever reads it first; a lock is waited out.
                if ((seen & 1) == 0) {
                    memory.compareAndSwap(SuperblockDescriptor.TABLE_VERSION_ADDRESS, seen, seen + 2);
                }
            } else {
                PartitionTable table = null;
                try {
                    table = readSlot(memory, slot);
                } catch (IllegalArgumentException | IllegalStateException torn) {
                    if (storedVersion(memory) < before + 3) {
                        throw torn; // nobody rewrote the slot: the stored table itself is damaged
                    }
                }
                // The slot of `before` is written again only by the writer that locks before + 3.
                if (table != null && storedVersion(memory) < before + 3) {
                    return new Versioned(table, before);
                }
            }
            if (attempt > 10_000) {
                throw new IllegalStateException("the partition table is being rewritten and did not settle");
            }
            Thread.onSpinWait();
        }
    }

    /** Whether slot 1 holds no table (its count word is 0): never written. */
    private static boolean slotOneEmpty(RemoteMemory memory) {
        return memory.readLong(SuperblockDescriptor.ADDRESS + SLOT1_COUNT_OFFSET) == 0;
    }

    /** The partition table's version word: odd while a writer holds its lock ({@link #commit}), even otherwise. */
    public static long storedVersion(RemoteMemory memory) {
        return memory.readLong(SuperblockDescriptor.TABLE_VERSION_ADDRESS);
    }

    /** The stored partition table; fails clearly when none was stored. */
    public static PartitionTable load(RemoteMemory memory) {
        return loadVersioned(memory).table();
    }

    private static PartitionTable readSlot(RemoteMemory memory, int slot) {
        long rootArea = rootArea(memory);
        int n;
        long[] bounds;
        UnsafeBuffer idWords = null;
        if (slot == 0) {
            UnsafeBuffer count = new UnsafeBuffer(new byte[Integer.BYTES]);
            memory.read(SuperblockDescriptor.PARTITION_COUNT_ADDRESS, count, 0, Integer.BYTES);
            n = count.getInt(0, STORED_ORDER);
            checkCount(n);
            UnsafeBuffer buffer = new UnsafeBuffer(new byte[Math.max(8, (n - 1) * Long.BYTES)]);
            if (n > 1) {
                memory.read(SuperblockDescriptor.PARTITION_BOUNDS_ADDRESS, buffer, 0, (n - 1) * Long.BYTES);
            }
            bounds = new long[n - 1];
            for (int i = 0; i < bounds.length; i++) {
                bounds[i] = buffer.getLong(i * Long.BYTES, STORED_ORDER);
            }
            if (rootArea >= SLOT0_IDS_OFFSET + (long) n * Short.BYTES) {
                idWords = new UnsafeBuffer(new byte[n * Short.BYTES]);
                memory.read(SuperblockDescriptor.ADDRESS + SLOT0_IDS_OFFSET, idWords, 0, n * Short.BYTES);
            }
        } else {
            if (rootArea < SPLIT_ROOT_AREA) {
                throw new IllegalStateException("the partition table's version names its second slot, which memory server 0's"
                        + " chunks cannot hold: the superblock is damaged");
            }
            n = (int) memory.readLong(SuperblockDescriptor.ADDRESS + SLOT1_COUNT_OFFSET);
            checkCount(n);
            UnsafeBuffer buffer = new UnsafeBuffer(new byte[Math.max(8, (n - 1) * Long.BYTES)]);
            if (n > 1) {
                memory.read(SuperblockDescriptor.ADDRESS + SLOT1_BOUNDS_OFFSET, buffer, 0, (n - 1) * Long.BYTES);
            }
            bounds = new long[n - 1];
            for (int i = 0; i < bounds.length; i++) {
                bounds[i] = buffer.getLong(i * Long.BYTES, STORED_ORDER);
            }
            idWords = new UnsafeBuffer(new byte[n * Short.BYTES]);
            memory.read(SuperblockDescriptor.ADDRESS + SLOT1_IDS_OFFSET, idWords, 0, n * Short.BYTES);
        }
        int[] ids = new int[n];
        boolean allZero = true;
        for (int i = 0; idWords != null && i < n; i++) {
            ids[i] = idWords.getShort(i * Short.BYTES, STORED_ORDER) & 0xFFFF;
            allZero &= ids[i] == 0;
        }
        if (allZero) {
            // Slot 0 of a tree stored before ids existed (or where the chunk has no room for them): ids in key order.
            Arrays.setAll(ids, i -> i);
        }
        return of(bounds, ids);
    }

    private static void checkCount(int n) {
        if (n < 1 || n > MAX_PARTITIONS) {
            throw new IllegalStateException("the tree has no partition table; store one with PartitionTable.store");
        }
    }
}
