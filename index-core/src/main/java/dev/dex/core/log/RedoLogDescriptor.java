package dev.dex.core.log;

import dev.dex.core.tree.SuperblockDescriptor;

/**
 * Layout of the per-partition redo logs in the memory nodes' regions (little-endian). See
 * {@code docs/durability.md}.
 *
 * <pre>
 * superblock word at offset 40 (server 0): address of the log directory, 0 until the first log exists
 *
 * log directory (one chunk): one 8-byte word per partition, the address of its log or 0 ({@link #slotOffset}); at
 * 2048 the address of the engine instances' registry or 0. Partitions 256 and up (trees of more than the 256
 * partitions the first layout had room for) have their words after it, so a directory written then reads the same.
 *   0          8                    2040         2048        2056          2064                 8 * partitions + 8
 *   +----------+-------- ... -------+------------+-----------+-------------+-------- ... --------+
 *   | log p=0  |                    | log p=255  | instances | log p=256   |                     |
 *   +----------+-------- ... -------+------------+-----------+-------------+-------- ... --------+
 *
 * a log (one or more adjacent chunks on memory server p mod servers):
 *   0          8            12           16         24         32               40                 48             56       64
 *   +----------+------------+------------+----------+----------+----------------+------------------+--------------+--------+----------
 *   | magic    | partition  | capacity   | epoch    | owner    | checkpoint LSN | checkpoint epoch | owner client | unused | records ...
 *   +----------+------------+------------+----------+----------+----------------+------------------+--------------+--------+----------
 *
 * a record (32 + W bytes for keys of W bytes: 40 for 8-byte keys), the record of LSN l in slot l mod capacity:
 *   0          8          16              16+W       24+W     28+W       32+W
 *   +----------+----------+---------------+----------+--------+----------+
 *   | LSN      | epoch    | key (W bytes) | value    | op     | CRC32C   |
 *   +----------+----------+---------------+----------+--------+----------+
 * </pre>
 * The offsets below are those of 8-byte keys; {@link #recordLength}, {@link #valueOffset}, {@link #opOffset} and
 * {@link #checksumOffset} give every width's; {@link #RECORD_LENGTH} is the shortest record.
 *
 * <ul>
 *   <li><b>epoch</b> in the header is bumped by compare-and-swap by every owner that acquires the
 *       partition; the owner's records carry it, and a replay stops at a record whose epoch is lower
 *       than one it already replayed (a record a previous owner wrote on an earlier lap).</li>
 *   <li><b>checkpoint LSN</b>: every write with a lower LSN is in the tree's remote pages; a replay starts
 *       there. LSNs start at 1. <b>checkpoint epoch</b>: the epoch of the owner that stored it (the two are
 *       written together); a replay accepts no record of an older epoch, so records a crashed owner left
 *       beyond a hole are never applied once a later owner has moved the checkpoint past that hole.</li>
 *   <li><b>owner</b>: the engine instance of the latest owner (for diagnostics). <b>owner client</b>: the
 *       fabric identity of the owner while it holds the partition, 0 once it gave the partition up (release
 *       or abandon) or when its fabric has no identities. A new owner that finds another identity there
 *       fences it on every memory node before it replays the log: that owner did not give the partition
 *       up (it crashed, was downed or cut off) and must not write after the takeover.</li>
 *   <li><b>CRC32C</b> covers the record up to the checksum, bytes {@code [0, 28 + W)}; a record whose checksum
 *       or LSN does not match ends the replay (the torn or unwritten tail).</li>
 * </ul>
 */
public final class RedoLogDescriptor {
    /** "DEXLOG01" in ASCII, little-endian. */
    public static final long MAGIC = 0x3130474F4C584544L;

    public static final long DIRECTORY_POINTER_ADDRESS = SuperblockDescriptor.ADDRESS + SuperblockDescriptor.LOG_DIRECTORY_OFFSET;
    /** Offset in the log directory of the word that points to the engine instances' registry. */
    public static final int INSTANCES_POINTER_OFFSET = 2048;


    /** Offset in the log directory of partition {@code partition}'s word: past the instances' word from 256 on. */
    public static long slotOffset(int partition) {
        long offset = (long) partition * Long.BYTES;
        return offset < INSTANCES_POINTER_OFFSET ? offset : offset + Long.BYTES;
    }

    /** Bytes of the log directory of a tree of {@code partitions} partitions (0: only the instances' word). */
    public static long directoryLength(int partitions) {
        return Math.max(INSTANCES_POINTER_OFFSET + Long.BYTES, partitions == 0 ? 0 : slotOffset(partitions - 1) + Long.BYTES);
    }

    public static final int MAGIC_OFFSET = 0;
    public static final int PARTITION_OFFSET = 8;
    public static final int CAPACITY_OFFSET = 12;
    public static final int EPOCH_OFFSET = 16;
    public static final int OWNER_OFFSET = 24;
    public static final int CHECKPOINT_OFFSET = 32;
    public static final int CHECKPOINT_EPOCH_OFFSET = 40;
    public static final int OWNER_CLIENT_OFFSET = 48;
    public static final int HEADER_LENGTH = 64;

    public static final int RECORD_LENGTH = 40;
    public static final int LSN_OFFSET = 0;
    public static final int RECORD_EPOCH_OFFSET = 8;
    public static final int KEY_OFFSET = 16;
    public static final int VALUE_OFFSET = 24;
    public static final int OP_OFFSET = 32;

    /** Record op: the key now maps to the value (insert, update, put). */
    public static final int PUT = 1;
    /** Record op: the key is absent now. */
    public static final int DELETE = 2;

    private RedoLogDescriptor() {
    }

    /** The length of a record of keys {@code keyBytes} wide. */
    public static int recordLength(int keyBytes) {
        return 32 + keyBytes;
    }

    public static int valueOffset(int keyBytes) {
        return KEY_OFFSET + keyBytes;
    }

    public static int opOffset(int keyBytes) {
        return KEY_OFFSET + keyBytes + Long.BYTES;
    }

    public static int checksumOffset(int keyBytes) {
        return opOffset(keyBytes) + Integer.BYTES;
    }
}
