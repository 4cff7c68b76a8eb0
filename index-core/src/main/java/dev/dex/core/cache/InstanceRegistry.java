package dev.dex.core.cache;

import java.nio.ByteOrder;
import java.util.concurrent.ConcurrentHashMap;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.log.RedoLog;
import dev.dex.core.log.RedoLogDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * Which cluster member runs each engine instance, kept in remote memory, so that any compute node can tell whether
 * the holder of a remote lock it meets is still alive, whenever that holder died: the lock's tag names the instance,
 * this registry names its member, and the cluster's membership says whether that member is still in the cluster
 * ({@link DexEngine#instanceLiveness}). A member that left the cluster never comes back under the same unique id, so
 * its instances' locks may be taken over.
 *
 * <pre>
 * log directory word 2048 (RedoLogDescriptor.INSTANCES_POINTER_OFFSET): address of the registry, 0 until the first
 * instance registers; the registry (whole chunks on the first memory server):
 *   0          8          16                64
 *   +----------+----------+-------- ... ----+---------------------------------------------------
 *   | magic    | entries  | unused          | entries: 16 bytes each, instance i at 64 + 16 x (i mod entries)
 *   +----------+----------+-------- ... ----+---------------------------------------------------
 *   entry:
 *   0               8               16
 *   +---------------+---------------+
 *   | instance      | member uid    |
 *   +---------------+---------------+
 * </pre>
 *
 * <p>An instance registers with one 16-byte write when its compute node opens the engine, before it can take any
 * lock; an entry whose instance word is another instance (a later one that took the same slot, or none) answers
 * "unknown", and a lock of an unknown holder is never taken over on this account. {@value #ENTRIES} entries: an
 * instance's entry lasts as long as fewer than that many engines opened after it.
 *
 * <p>Concurrency: thread-safe. Lookups are cached per instance (an instance's member never changes) in a
 * concurrent map; a lookup that misses reads the entry with one verb.
 */
final class InstanceRegistry {
    static final long MAGIC = 0x31534E4958454400L; // "\0DEXINS1"
    static final int ENTRIES = 1 << 16;
    static final int HEADER_LENGTH = 64;
    static final int ENTRY_LENGTH = 16;
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    private final RemoteMemory memory;
    private final ConcurrentHashMap<Long, Long> members = new ConcurrentHashMap<>();
    private volatile long table;

    InstanceRegistry(RemoteMemory memory) {
        this.memory = memory;
    }

    /** Records that {@code instance} runs on the member with unique id {@code memberUid} (not 0). */
    void register(long instance, long memberUid) {
        if (memberUid == 0) {
            throw new IllegalArgumentException("a member's unique id is never 0");
        }
        UnsafeBuffer entry = new UnsafeBuffer(new byte[ENTRY_LENGTH]);
        entry.putLong(0, instance, ORDER);
        entry.putLong(Long.BYTES, memberUid, ORDER);
        memory.write(entryAddress(table(true), instance), entry, 0, ENTRY_LENGTH);
        members.put(instance, memberUid);
    }

    /** The unique id of the member that runs {@code instance}, or 0 when the registry does not know it. */
    long memberOf(long instance) {
        Long known = members.get(instance);
        if (known != null) {
            return known;
        }
        long at = table(false);
        if (at == 0) {
            return 0;
        }
        UnsafeBuffer entry = new UnsafeBuffer(new byte[ENTRY_LENGTH]);
        memory.read(entryAddress(at, instance), entry, 0, ENTRY_LENGTH);
        if (entry.getLong(0, ORDER) != instance || entry.getLong(Long.BYTES, ORDER) == 0) {
            return 0;
        }
        long uid = entry.getLong(Long.BYTES, ORDER);
        members.put(instance, uid);
        return uid;
    }

    private static long entryAddress(long table, long instance) {
        return table + HEADER_LENGTH + Math.floorMod(instance, ENTRIES) * (long) ENTRY_LENGTH;
    }

    /** The registry's address: created (by compare-and-swap) when {@code create}, else 0 while there is none. */
    private long table(boolean create) {
        long at = table;
        if (at != 0) {
            return at;
        }
        // The directory's partition words are checked by each log that is opened; here only the instances' word.
        long directory = create ? RedoLog.directory(memory, 0)
                : memory.readLong(RedoLogDescriptor.DIRECTORY_POINTER_ADDRESS);
        if (directory == 0) {
            return 0;
        }
        long pointer = directory + RedoLogDescriptor.INSTANCES_POINTER_OFFSET;
        at = memory.readLong(pointer);
        if (at == 0 && create) {
            int server = memory.memoryServerIds()[0];
            long chunk = memory.chunkAllocator().chunkLength(server);
            long bytes = HEADER_LENGTH + (long) ENTRIES * ENTRY_LENGTH;
            long created = memory.chunkAllocator().allocateChunks(server, (int) ((bytes + chunk - 1) / chunk));
            UnsafeBuffer header = new UnsafeBuffer(new byte[16]);
            header.putLong(0, MAGIC, ORDER);
            header.putLong(8, ENTRIES, ORDER);
            memory.write(created, header, 0, 16);
            long found = memory.compareAndSwap(pointer, 0, created);
            at = found == 0 ? created : found;
        }
        if (at != 0) {
            UnsafeBuffer header = new UnsafeBuffer(new byte[16]);
            memory.read(at, header, 0, 16);
            if (header.getLong(0, ORDER) != MAGIC || header.getLong(8, ORDER) != ENTRIES) {
                throw new IllegalStateException("the engine instances' registry at " + dev.dex.rdma.GlobalAddress.toString(at)
                        + " is corrupt (magic or size wrong)");
            }
            table = at;
        }
        return at;
    }
}
