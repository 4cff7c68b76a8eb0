package dev.dex.core.partition;

import java.nio.ByteOrder;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * Which owner epoch may offload into which partition, kept on every memory server, so that a memory server
 * can refuse an offloaded operation of anyone but a partition's current owner without a message to another
 * server (see {@code docs/security.md}, "Offload ownership"). Little-endian, as every fabric layout.
 *
 * <pre>
 * every memory server, root area word at offset 56 (its region's byte 64 + 56 = 120; unused by the superblock
 * on server 0): the address of this server's ownership table, 0 until a compute node first acquires a partition
 *
 * ownership table (whole chunks on that server): a 64-byte header, one 32-byte entry per partition id (1,024 where
 * the partition table can change, PartitionTable.changeable, else the tree's partitions), partition p at 64 + 32 x p,
 * then one 8-byte free-leaf head per partition, partition p at (free heads) + 8 x p
 *   0                   8                16          24           32         64
 *   +-------------------+----------------+-----------+------------+----------+---------------------------------
 *   | tree incarnation  | entries        | key bytes | free heads | unused   | entries ... | free-leaf heads ...
 *   +-------------------+----------------+-----------+------------+----------+---------------------------------
 *   entry:
 *   0               8                 16                24        32
 *   +---------------+-----------------+-----------------+---------+
 *   | owner epoch   | low (exclusive) | high (inclusive)| state   |
 *   +---------------+-----------------+-----------------+---------+
 * </pre>
 *
 * <ul>
 *   <li><b>tree incarnation</b>: memory server 0's region incarnation when the table was made. The tree lives on
 *       server 0 (its superblock, the redo logs' directory): a server 0 formatted anew is a new tree whose logs
 *       count epochs from 1 again, so a server that kept its region replaces a table of another incarnation with
 *       a fresh one rather than hold the new tree's owners to the old tree's epochs.</li>
 *   <li><b>key bytes</b>: the width of the tree's keys (0 in tables made before widths existed: 8). A request's key
 *       must have it: a node is never read or written in the layout of another width.</li>
 *   <li><b>free heads</b>: where the free-leaf heads start, from the table's start (0 in tables made before they
 *       existed: such a server keeps no free leaves across owners). A partition's head is the address of the
 *       first leaf of the chain of leaves on this server that merges freed in it, 0 when there is none; only
 *       the partition's owner reads and writes it ({@code FreeLeaves}, docs/merges.md).</li>
 *   <li><b>low, high</b> are bounds on a key's first word (its first 8 bytes), as the partition table keeps them.</li>
 *   <li><b>state</b> is {@link #REGISTERED} once an owner wrote the partition's bounds (0 before).</li>
 *   <li><b>low, high</b>: the partition's key range, {@code (low, high]}, from the partition table the owner read.
 *       A split narrows them: its owner registers the narrowed range before it commits the split's table
 *       ({@code PartitionSplits}).</li>
 *   <li><b>owner epoch</b>: the epoch of the partition's latest owner, the redo log's (bumped by every acquire;
 *       0 without redo logging). Only ever raised, by compare-and-swap, by the owner that took that epoch,
 *       on every memory server before it serves anything.</li>
 * </ul>
 *
 * <p>A memory server runs an offloaded phase only if the request names a partition whose entry is registered,
 * carries that entry's epoch, and its key lies in the entry's range ({@link #refusal}). So a superseded owner
 * (an older epoch) cannot offload into a partition it lost, on any fabric; an owner cannot offload keys of
 * another partition; and a member that never acquired a partition does not know its epoch. Without redo
 * logging every epoch is 0: only the range is checked then.
 *
 * <p>Concurrency: {@link #register} runs on a compute thread during an acquire; the entry's words are written
 * with the fabric's verbs, the epoch last, by compare-and-swap. {@link #refusal} runs on memory-side threads and
 * reads each word with a volatile load; an owner registers on every server before it sends an offload, so its
 * own offloads see its entry whole. Thread-safe; no state of its own.
 */
public final class OwnershipTable {
    /** Root-area offset of the word that holds a server's table address. */
    public static final int TABLE_POINTER_ROOT_OFFSET = 56;
    /** Region offset of that word on every server. */
    public static final long TABLE_POINTER_OFFSET = RegionHeaderDescriptor.ROOT_AREA_OFFSET + TABLE_POINTER_ROOT_OFFSET;

    /** Table header: the tree incarnation it belongs to. */
    public static final int INCARNATION_OFFSET = 0;
    /** Table header: how many entries follow (the tree's partitions when the table was made). */
    public static final int ENTRIES_OFFSET = 8;
    /** Table header: the width of the tree's keys in bytes (0: 8). */
    public static final int KEY_BYTES_OFFSET = 16;
    /** Table header: where the free-leaf heads start, from the table's start (0: the table keeps none). */
    public static final int FREE_HEADS_OFFSET = 24;
    public static final int HEADER_LENGTH = 64;
    public static final int ENTRY_LENGTH = 32;
    public static final int EPOCH_OFFSET = 0;
    public static final int LOW_OFFSET = 8;
    public static final int HIGH_OFFSET = 16;
    public static final int STATE_OFFSET = 24;
    /** {@code state}: an owner wrote the entry's bounds. */
    public static final long REGISTERED = 1;
    /** Most entries a table holds: one per partition the superblock can hold. */
    public static final int ENTRIES = PartitionTable.MAX_PARTITIONS;

    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    private OwnershipTable() {
    }

    /**
     * Records on every memory server that {@code partition}, keys {@code (low, high]}, is now owned at
     * {@code epoch}: creates a server's table where it has none yet (or one of another tree incarnation), writes the
     * bounds, then raises the entry's epoch. Called by a new owner before it serves (or offloads) anything of the
     * partition. Epoch 0 (no redo log: no epochs) sets the entry's epoch to 0, whatever it held. The bounds are the
     * first words of keys {@code keyBytes} wide (the width the tables of a tree share).
     *
     * @throws IllegalStateException when a server's entry already holds a later epoch: another compute node
     *                               acquired the partition after this one
     */
    public static void register(RemoteMemory memory, int partitions, int partition, long epoch, long low, long high, int keyBytes) {
        if (partitions < 1 || partitions > ENTRIES || partition < 0 || partition >= partitions) {
            throw new IllegalArgumentException("partition " + partition + " of " + partitions + " is outside [0, "
                    + Math.min(partitions, ENTRIES) + ")");
        }
        long incarnation = memory.readLong(GlobalAddress.of(0, RegionHeaderDescriptor.INCARNATION_OFFSET));
        UnsafeBuffer words = new UnsafeBuffer(new byte[3 * Long.BYTES]);
        for (int server : memory.memoryServerIds()) {
            long entry = table(memory, server, incarnation, partitions, keyBytes) + HEADER_LENGTH + (long) partition * ENTRY_LENGTH;
            words.putLong(0, low, ORDER);
            words.putLong(Long.BYTES, high, ORDER);
            words.putLong(2 * Long.BYTES, REGISTERED, ORDER);
            memory.write(entry + LOW_OFFSET, words, 0, 3 * Long.BYTES);
            if (epoch == 0) {
                words.putLong(0, 0, ORDER);
                memory.write(entry + EPOCH_OFFSET, words, 0, Long.BYTES);
                continue;
            }
            long seen = memory.readLong(entry + EPOCH_OFFSET);
            while (seen < epoch) {
                long witnessed = memory.compareAndSwap(entry + EPOCH_OFFSET, seen, epoch);
                if (witnessed == seen) {
                    seen = epoch;
                } else {
                    seen = witnessed;
                }
            }
            if (seen > epoch) {
                throw new IllegalStateException("partition " + partition + " was acquired at epoch " + seen
                        + " after this compute node took epoch " + epoch + " (memory server " + server + ")");
            }
        }
    }

    /**
     * A server's table of tree incarnation {@code incarnation} with room for {@code partitions} entries, created
     * (whole chunks on it, sized for the tree's partitions) by whoever needs it first; a table of another
     * incarnation (server 0 was formatted anew, this server kept its region), or a smaller one, is replaced.
     */
    private static long table(RemoteMemory memory, int server, long incarnation, int partitions, int keyBytes) {
        long pointer = GlobalAddress.of(server, TABLE_POINTER_OFFSET);
        UnsafeBuffer header = new UnsafeBuffer(new byte[4 * Long.BYTES]);
        while (true) {
            long table = memory.readLong(pointer);
            if (table != 0) {
                memory.read(table + INCARNATION_OFFSET, header, 0, 3 * Long.BYTES);
                long width = header.getLong(2 * Long.BYTES, ORDER);
                if (header.getLong(0, ORDER) == incarnation && header.getLong(Long.BYTES, ORDER) >= partitions
                        && storedWidth(width) == keyBytes) {
                    return table;
                }
            }
            long heads = HEADER_LENGTH + (long) partitions * ENTRY_LENGTH;
            long length = heads + (long) partitions * Long.BYTES;
            long chunk = memory.chunkAllocator().chunkLength(server);
            int chunks = (int) ((length + chunk - 1) / chunk);
            long created = memory.chunkAllocator().allocateChunks(server, chunks);
            header.putLong(0, incarnation, ORDER);
            header.putLong(Long.BYTES, partitions, ORDER);
            header.putLong(2 * Long.BYTES, keyBytes, ORDER);
            header.putLong(3 * Long.BYTES, heads, ORDER);
            memory.write(created + INCARNATION_OFFSET, header, 0, 4 * Long.BYTES);
            // Losing this race costs the chunks just taken (once per server and tree); the winner's table is used.
            memory.compareAndSwap(pointer, table, created);
        }
    }

    /**
     * The address of {@code partition}'s free-leaf head on memory server {@code server}, or 0 when that server's
     * table keeps none (a table made before free heads existed) or has no table yet. Read by the partition's owner,
     * which registered the partition there ({@link #register}) first.
     */
    public static long freeHead(RemoteMemory memory, int server, int partition) {
        long table = memory.readLong(GlobalAddress.of(server, TABLE_POINTER_OFFSET));
        if (table == 0) {
            return 0;
        }
        UnsafeBuffer header = new UnsafeBuffer(new byte[3 * Long.BYTES]);
        memory.read(table + ENTRIES_OFFSET, header, 0, 3 * Long.BYTES);
        long heads = header.getLong(2 * Long.BYTES, ORDER);
        if (heads == 0 || partition < 0 || partition >= header.getLong(0, ORDER)) {
            return 0;
        }
        return table + heads + (long) partition * Long.BYTES;
    }

    /**
     * Memory side: why memory server {@code serverId} must not run an offloaded phase for {@code key} that names
     * {@code partition} and {@code epoch}, or null when it may.
     */
    public static String refusal(Region region, int serverId, int partition, long epoch, long key) {
        return refusal(region, serverId, partition, epoch, new long[] {key});
    }

    /** {@link #refusal(Region, int, int, long, long)} of a key of any width, its words {@code key}. */
    public static String refusal(Region region, int serverId, int partition, long epoch, long[] key) {
        if (partition < 0 || partition >= ENTRIES) {
            return "partition " + partition + " does not exist";
        }
        long table = region.getLongVolatile(TABLE_POINTER_OFFSET);
        if (table == 0) {
            return "no partition was acquired on memory server " + serverId + " yet";
        }
        long start = GlobalAddress.offset(table);
        if (GlobalAddress.serverId(table) != serverId || (start & (Long.BYTES - 1)) != 0 || !region.contains(start, HEADER_LENGTH)) {
            return "memory server " + serverId + "'s ownership table address " + GlobalAddress.toString(table) + " is corrupt";
        }
        if (partition >= region.getLongVolatile(start + ENTRIES_OFFSET)) {
            return "partition " + partition + " does not exist";
        }
        long entry = start + HEADER_LENGTH + (long) partition * ENTRY_LENGTH;
        if (!region.contains(entry, ENTRY_LENGTH)) {
            return "memory server " + serverId + "'s ownership table at " + GlobalAddress.toString(table) + " is corrupt";
        }
        if (region.getLongVolatile(entry + STATE_OFFSET) != REGISTERED) {
            return "partition " + partition + " has no owner";
        }
        long current = region.getLongVolatile(entry + EPOCH_OFFSET);
        if (current != epoch) {
            return "partition " + partition + " is owned at epoch " + current + ", not " + epoch;
        }
        int width = storedWidth(region.getLongVolatile(start + KEY_BYTES_OFFSET));
        if (width != key.length * 8) {
            return "a key of " + key.length * 8 + " bytes; the tree's keys are " + width + " bytes";
        }
        long low = region.getLongVolatile(entry + LOW_OFFSET);
        long high = region.getLongVolatile(entry + HIGH_OFFSET);
        if (!PartitionTable.contains(low, high, key)) {
            return "key " + (key.length == 1 ? Long.toString(key[0]) : "0x" + Long.toHexString(key[0] ^ Long.MIN_VALUE) + "...")
                    + " lies outside partition " + partition + " (" + low + ", " + high + "]";
        }
        return null;
    }

    /** The width a table's header names, or -1 for a damaged one (no request matches it). */
    private static int storedWidth(long width) {
        try {
            return KeyFormat.stored(width).bytes();
        } catch (IllegalArgumentException damaged) {
            return -1;
        }
    }
}
