package dev.dex.core.log;

import static dev.dex.core.log.RedoLogDescriptor.CAPACITY_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.CHECKPOINT_EPOCH_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.CHECKPOINT_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.DIRECTORY_POINTER_ADDRESS;
import static dev.dex.core.log.RedoLogDescriptor.EPOCH_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.HEADER_LENGTH;
import static dev.dex.core.log.RedoLogDescriptor.KEY_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.LSN_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.MAGIC;
import static dev.dex.core.log.RedoLogDescriptor.MAGIC_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.OWNER_CLIENT_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.OWNER_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.PARTITION_OFFSET;
import static dev.dex.core.log.RedoLogDescriptor.RECORD_EPOCH_OFFSET;

import java.nio.ByteOrder;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;

/**
 * One partition's redo log, opened by the compute node that acquires the partition: a ring of fixed-size
 * records in a memory node's region ({@link RedoLogDescriptor}). A write is acknowledged only once its
 * record is in the log; write-back of dirty pages advances the checkpoint, behind which the ring is reused.
 * See {@code docs/durability.md}.
 *
 * <pre>
 * Concurrency:
 *   LSNs are taken by {@link #assign} (an atomic counter) by the session that applied the write, while it
 *   still holds the lock (frame lock, remote lock or IO marker) that orders writes of the same key, so
 *   LSN order is the order in which each key's writes took effect. Records are appended by any thread, in
 *   runs of consecutive LSNs, in any order; {@link #awaitDurable} waits until every record up to an LSN
 *   is in the log (the durable watermark, advanced under this object's monitor), so no acknowledged
 *   record ever lies behind a hole a replay would stop at. A slot is reused only once the record one lap
 *   earlier is written (or was skipped, being behind the checkpoint when its append came): a record whose LSN
 *   was handed out but not yet written keeps its slot, however far the checkpoint moved. An append writes only
 *   the records at or after the checkpoint, so never more than the ring holds and never past its end. The
 *   checkpoint only moves forward (monitor). The owner
 *   serializes whole checkpoints (flush, then checkpointed) on checkpointLock(), a monitor of its own, so a
 *   checkpoint's page write-backs never hold up appends and waits on this object's monitor.
 * </pre>
 */
public final class RedoLog {
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;
    /** Records read per remote read during a replay. */
    private static final int REPLAY_READ_RECORDS = 1024;

    /** What a replay does with a record: {@code key} holds the key's words (reused for the next record). */
    @FunctionalInterface
    public interface Replayer {
        void apply(int op, long[] key, long value);
    }

    private final RemoteMemory memory;
    /** The width of the keys in the records, and the records' layout (RedoLogDescriptor). */
    private final KeyFormat keys;
    private final int recordLength;
    private final int valueOffset;
    private final int opOffset;
    private final int checksumOffset;
    private final int partition;
    private final long address;
    private final int capacity;
    private final long epoch;
    private final long awaitNanos;
    private final AtomicLong next = new AtomicLong();
    private volatile long checkpoint;
    /** The epoch stored with the checkpoint: a replay accepts no older record. */
    private long checkpointEpoch;
    /** Every record up to this LSN is in the log; written under the monitor. */
    private volatile long durable;
    /** Runs appended ahead of the watermark: first LSN to last LSN; under the monitor. */
    private final TreeMap<Long, Long> ahead = new TreeMap<>();
    private volatile Throwable failure;
    private final UnsafeBuffer checkpointWords = new UnsafeBuffer(new byte[2 * Long.BYTES]);
    /** Set when the owner gave the partition up without a checkpoint (see DexEngine.abandon). */
    private volatile boolean abandoned;
    /** Serializes checkpoints of this partition; never held while waiting for records. */
    private final Object checkpointLock = new Object();
    /** The fabric identity of a previous owner that had not given the partition up, or 0. */
    private final long previousOwner;
    /** Whether that previous owner was fenced on every memory node (false where the fabric cannot fence). */
    private final boolean previousOwnerFenced;

    private RedoLog(RemoteMemory memory, KeyFormat keys, int partition, long address, int capacity, long epoch, long checkpoint,
                    long checkpointEpoch, long awaitNanos, long previousOwner, boolean previousOwnerFenced) {
        this.keys = keys;
        this.recordLength = RedoLogDescriptor.recordLength(keys.bytes());
        this.valueOffset = RedoLogDescriptor.valueOffset(keys.bytes());
        this.opOffset = RedoLogDescriptor.opOffset(keys.bytes());
        this.checksumOffset = RedoLogDescriptor.checksumOffset(keys.bytes());
        this.previousOwner = previousOwner;
        this.previousOwnerFenced = previousOwnerFenced;
        this.checkpointEpoch = checkpointEpoch;
        this.memory = memory;
        this.partition = partition;
        this.address = address;
        this.capacity = capacity;
        this.epoch = epoch;
        this.checkpoint = checkpoint;
        this.durable = checkpoint - 1;
        this.next.set(checkpoint);
        this.awaitNanos = awaitNanos;
    }

    /**
     * Opens {@code partition}'s log as its new owner: finds it (or creates it, {@code logBytes} long, on
     * memory server {@code partition mod servers}), takes its owner word by compare-and-swap and fences the
     * previous owner named there, which did not give the partition up ({@link #previousOwner()}): on fabrics
     * that can fence, nothing that owner sends is applied after this returns. Then bumps the epoch by
     * compare-and-swap. Call {@link #replay} next.
     *
     * @param owner the new owner's tag (the engine instance), recorded in the header for diagnostics
     */
    public static RedoLog open(RemoteMemory memory, int partition, int partitions, long owner, long logBytes,
                               long awaitNanos) {
        return open(memory, partition, partitions, owner, logBytes, awaitNanos, KeyFormat.EIGHT);
    }

    /** {@link #open(RemoteMemory, int, int, long, long, long)} for an index of keys in {@code keys}. */
    public static RedoLog open(RemoteMemory memory, int partition, int partitions, long owner, long logBytes,
                               long awaitNanos, KeyFormat keys) {
        long slot = directory(memory, partitions) + RedoLogDescriptor.slotOffset(partition);
        long log = memory.readLong(slot);
        if (log == 0) {
            long created = create(memory, partition, logBytes, RedoLogDescriptor.recordLength(keys.bytes()));
            long found = memory.compareAndSwap(slot, 0, created);
            log = found == 0 ? created : found;
        }
        UnsafeBuffer header = new UnsafeBuffer(new byte[HEADER_LENGTH]);
        memory.read(log, header, 0, HEADER_LENGTH);
        if (header.getLong(MAGIC_OFFSET, ORDER) != MAGIC || header.getInt(PARTITION_OFFSET, ORDER) != partition) {
            throw new IllegalStateException("the redo log of partition " + partition + " at " + GlobalAddress.toString(log)
                    + " is corrupt (magic or partition number wrong)");
        }
        int capacity = header.getInt(CAPACITY_OFFSET, ORDER);
        // The owner word first, by compare-and-swap: each new owner takes it from exactly one predecessor,
        // whom it fences, so of two owners that take over one after the other the second fences the first
        // even when the first has not finished its takeover. Before anything of the log is read: an owner
        // that did not give the partition up may still be appending records or writing pages; once fenced,
        // nothing of it lands any more.
        long self = memory.clientId();
        long previous;
        if (self == 0) {
            previous = 0; // a fabric without identities: nothing to record, nothing to fence
        } else {
            while (true) {
                long seen = memory.readLong(log + OWNER_CLIENT_OFFSET);
                if (seen == self || memory.compareAndSwap(log + OWNER_CLIENT_OFFSET, seen, self) == seen) {
                    previous = seen == self ? 0 : seen;
                    break;
                }
            }
        }
        try {
            boolean fenced = previous != 0 && memory.fence(previous);
            long epoch;
            while (true) {
                long seen = memory.readLong(log + EPOCH_OFFSET);
                if (memory.compareAndSwap(log + EPOCH_OFFSET, seen, seen + 1) == seen) {
                    epoch = seen + 1;
                    break;
                }
            }
            UnsafeBuffer ownerWord = new UnsafeBuffer(new byte[Long.BYTES]);
            ownerWord.putLong(0, owner, ORDER);
            memory.write(log + OWNER_OFFSET, ownerWord, 0, Long.BYTES);
            // Checkpoint LSN and epoch in one read, as they are written together.
            UnsafeBuffer checkpointWords = new UnsafeBuffer(new byte[2 * Long.BYTES]);
            memory.read(log + CHECKPOINT_OFFSET, checkpointWords, 0, 2 * Long.BYTES);
            return new RedoLog(memory, keys, partition, log, capacity, epoch, checkpointWords.getLong(0, ORDER),
                    checkpointWords.getLong(CHECKPOINT_EPOCH_OFFSET - CHECKPOINT_OFFSET, ORDER), awaitNanos, previous, fenced);
        } catch (RuntimeException failed) {
            // Not opened: the owner word goes back to the previous owner (best effort), so the next attempt fences
            // that one again and not this one. Nothing of the partition was written meanwhile (an epoch raised by a
            // lost compare-and-swap is raised again by the next owner, and the owner word is only a diagnostic).
            if (self != 0) {
                try {
                    memory.compareAndSwap(log + OWNER_CLIENT_OFFSET, self, previous);
                } catch (RuntimeException alsoUnreachable) {
                    failed.addSuppressed(alsoUnreachable);
                }
            }
            throw failed;
        }
    }

    /**
     * The log directory's address, created (one chunk on the first server) by whoever needs it first. Its word at
     * {@link RedoLogDescriptor#INSTANCES_POINTER_OFFSET}, between the words of partitions 255 and 256, points to the
     * engine instances' registry ({@code InstanceRegistry}).
     *
     * @throws IllegalStateException when a chunk cannot hold the words of {@code partitions} partitions (0: only the
     *                               instances' word)
     */
    public static long directory(RemoteMemory memory, int partitions) {
        long directory = memory.readLong(DIRECTORY_POINTER_ADDRESS);
        // Checked also for a directory that exists: one made for the instances' word alone is a chunk of its server's
        // length, which must hold this tree's partition words too.
        int server = directory != 0 ? dev.dex.rdma.GlobalAddress.serverId(directory) : memory.memoryServerIds()[0];
        if (memory.chunkAllocator().chunkLength(server) < RedoLogDescriptor.directoryLength(partitions)) {
            throw new IllegalStateException("a chunk cannot hold the log directory of " + partitions + " partitions");
        }
        if (directory != 0) {
            return directory;
        }
        long created = memory.chunkAllocator().allocateChunk(server);
        long found = memory.compareAndSwap(DIRECTORY_POINTER_ADDRESS, 0, created);
        return found == 0 ? created : found;
    }

    private static long create(RemoteMemory memory, int partition, long logBytes, int recordLength) {
        int[] servers = memory.memoryServerIds();
        int server = servers[partition % servers.length];
        long chunk = memory.chunkAllocator().chunkLength(server);
        long chunks = Math.max(1, (logBytes + chunk - 1) / chunk);
        if (chunks > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("redo log of " + logBytes + " bytes is too long");
        }
        long log = memory.chunkAllocator().allocateChunks(server, (int) chunks);
        long records = (chunks * chunk - HEADER_LENGTH) / recordLength;
        if (records < 2) {
            throw new IllegalArgumentException("a redo log of " + logBytes + " bytes holds fewer than two records");
        }
        UnsafeBuffer header = new UnsafeBuffer(new byte[HEADER_LENGTH]);
        header.putLong(MAGIC_OFFSET, MAGIC, ORDER);
        header.putInt(PARTITION_OFFSET, partition, ORDER);
        header.putInt(CAPACITY_OFFSET, (int) Math.min(Integer.MAX_VALUE, records), ORDER);
        header.putLong(CHECKPOINT_OFFSET, 1, ORDER);
        memory.write(log, header, 0, HEADER_LENGTH);
        return log;
    }

    public int partition() {
        return partition;
    }

    /**
     * The fabric identity of the owner before this one when it had not given the partition up (it crashed,
     * was downed or cut off), or 0.
     */
    public long previousOwner() {
        return previousOwner;
    }

    /** Whether {@link #previousOwner()} was fenced on every memory node; false where the fabric cannot fence. */
    public boolean previousOwnerFenced() {
        return previousOwnerFenced;
    }

    /**
     * Records that this owner gave the partition up (released it, or abandoned it and writes nothing more), so
     * the next owner does not fence it. Clears the owner word only while it still names this owner. Best
     * effort: returns false when the memory node cannot be reached (the next owner then fences this one).
     */
    public boolean giveUp() {
        long self = memory.clientId();
        if (self == 0) {
            return true;
        }
        try {
            memory.compareAndSwap(address + OWNER_CLIENT_OFFSET, self, 0);
            return true;
        } catch (RuntimeException unreachable) {
            return false;
        }
    }

    /** Whether an append failed for good: the log has a hole, and every later commit fails until a new owner opens it. */
    public boolean failed() {
        return failure != null;
    }

    /** Why the log failed ({@link #fail}), or null. */
    public Throwable failure() {
        return failure;
    }

    /**
     * Records that records handed out will never be written ({@code cause}): the log has a hole from then on, every
     * waiter fails at once, and the partition must be given up and acquired again, whose replay stops at the hole.
     * Called by the owner when an append kept failing.
     */
    public void fail(Throwable cause) {
        if (failure == null) {
            failure = cause;
        }
        synchronized (this) {
            notifyAll();
        }
    }

    /** Marks that this owner gave the partition up without writing its pages back. */
    public void abandon() {
        abandoned = true;
        synchronized (this) {
            notifyAll();
        }
    }

    /** Whether this owner gave the partition up without writing its pages back: unwritten records stay so. */
    public boolean abandoned() {
        return abandoned;
    }

    /** The monitor under which the owner takes this partition's checkpoints, one at a time. */
    public Object checkpointLock() {
        return checkpointLock;
    }

    /** This owner's epoch. */
    public long epoch() {
        return epoch;
    }

    /** Records the ring holds. */
    public int capacity() {
        return capacity;
    }

    public long checkpoint() {
        return checkpoint;
    }

    /** The LSN the next write will take. */
    public long nextLsn() {
        return next.get();
    }

    /** Every record up to this LSN is in the log. */
    public long durableLsn() {
        return durable;
    }

    /** Records between the checkpoint and the last one assigned: what a replay would read now. */
    public long length() {
        return next.get() - checkpoint;
    }

    /**
     * How many times a replay tries a read that goes unanswered before it gives the takeover up ({@link
     * #retryingReads}).
     */
    public static final int REPLAY_READ_ATTEMPTS = 8;

    /**
     * Runs a replay's {@code step} again (up to {@link #REPLAY_READ_ATTEMPTS} times, 1 ms apart) when it fails with a
     * verb that went unanswered and {@code writesFailed} (a count of the engine's failed writing verbs) did not change
     * during the attempt: the step then failed on a read, which changed nothing, so one failed read need not give a
     * whole takeover up to start again from the first record. A fence or a lost memory server is not retried. Used for
     * a batch of records ({@link #replay}) and for a record's own descent ({@code HeldPartitions.replayRecord}).
     */
    public static void retryingReads(Runnable step, java.util.function.LongSupplier writesFailed) {
        for (int attempt = 1; ; attempt++) {
            long before = writesFailed.getAsLong();
            try {
                step.run();
                return;
            } catch (dev.dex.rdma.FabricException failed) {
                if (failed.isFinal() || writesFailed.getAsLong() != before || attempt >= REPLAY_READ_ATTEMPTS) {
                    throw failed;
                }
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
        }
    }

    /**
     * Applies the records from the checkpoint on, in LSN order, and stops at the first that is not whole
     * (checksum), not the one expected (LSN: unwritten, or a previous lap), or older than the previous one
     * (epoch). Later writes continue after the last record applied.
     *
     * @return records applied
     */
    public long replay(Replayer replayer) {
        long lsn = checkpoint;
        long lastEpoch = checkpointEpoch;
        UnsafeBuffer records = new UnsafeBuffer(new byte[REPLAY_READ_RECORDS * recordLength]);
        CRC32C crc = new CRC32C();
        long[] key = new long[keys.words()];
        scan:
        while (lsn - checkpoint < capacity) {
            int slot = (int) (lsn % capacity);
            int n = (int) Math.min(Math.min(REPLAY_READ_RECORDS, capacity - slot), capacity - (lsn - checkpoint));
            long address = slotAddress(slot);
            int length = n * recordLength;
            retryingReads(() -> memory.read(address, records, 0, length), () -> 0); // a read only: no write to watch
            for (int i = 0; i < n; i++, lsn++) {
                int at = i * recordLength;
                long recordEpoch = records.getLong(at + RECORD_EPOCH_OFFSET, ORDER);
                if (records.getLong(at + LSN_OFFSET, ORDER) != lsn || checksum(crc, records, at) != records.getInt(at + checksumOffset, ORDER)
                        || recordEpoch < lastEpoch || recordEpoch >= epoch) {
                    break scan;
                }
                lastEpoch = recordEpoch;
                for (int w = 0; w < key.length; w++) {
                    key[w] = records.getLong(at + KEY_OFFSET + w * Long.BYTES, ORDER);
                }
                replayer.apply(records.getInt(at + opOffset, ORDER), key, records.getLong(at + valueOffset, ORDER));
            }
        }
        long applied = lsn - checkpoint;
        next.set(lsn);
        synchronized (this) {
            durable = lsn - 1;
        }
        return applied;
    }

    /** Takes the next LSN, for a write that has just taken effect (see the class comment). */
    public long assign() {
        return next.getAndIncrement();
    }

    /** The length of one record of this log ({@link RedoLogDescriptor#recordLength}). */
    public int recordLength() {
        return recordLength;
    }

    /** Encodes record {@code lsn} of this owner, of the key with the words {@code key}, into {@code buffer} at {@code offset}. */
    public void encode(MutableDirectBuffer buffer, int offset, long lsn, int op, long[] key, long value, CRC32C crc) {
        buffer.putLong(offset + LSN_OFFSET, lsn, ORDER);
        buffer.putLong(offset + RECORD_EPOCH_OFFSET, epoch, ORDER);
        for (int w = 0; w < keys.words(); w++) {
            buffer.putLong(offset + KEY_OFFSET + w * Long.BYTES, key[w], ORDER);
        }
        buffer.putLong(offset + valueOffset, value, ORDER);
        buffer.putInt(offset + opOffset, op, ORDER);
        buffer.putInt(offset + checksumOffset, checksum(crc, buffer, offset), ORDER);
    }

    private int checksum(CRC32C crc, DirectBuffer buffer, int offset) {
        crc.reset();
        byte[] array = buffer.byteArray();
        if (array != null) {
            crc.update(array, buffer.wrapAdjustment() + offset, checksumOffset);
        } else {
            for (int i = 0; i < checksumOffset; i++) {
                crc.update(buffer.getByte(offset + i));
            }
        }
        return (int) crc.getValue();
    }

    /** Whether a record with LSN {@code lsn} fits in the ring without overwriting one the checkpoint still needs. */
    public boolean hasRoom(long lsn) {
        return lsn < checkpoint + capacity;
    }

    /**
     * Writes {@code count} encoded records with consecutive LSNs from {@code firstLsn} (one fabric write, two
     * where the ring wraps). The caller made sure the ring has room for the last ({@link #hasRoom}). Records behind
     * the checkpoint are not written (their writes are in the pages already, and their slots may be another lap's
     * by now), so at most a ring's worth is. Waits first until every record one lap earlier than these is written or
     * skipped, so no write can land over a newer record, nor a newer one over a record not yet written. A failed
     * write throws and may be tried again with the same records (the slots are still theirs); the owner calls
     * {@link #fail} when it gives up.
     */
    public void append(long firstLsn, DirectBuffer records, int offset, int count) {
        long last = firstLsn + count - 1;
        if (abandoned) {
            throw new IllegalStateException("partition " + partition + " was given up: its log takes no more records");
        }
        if (!hasRoom(last)) {
            throw new IllegalStateException("redo log of partition " + partition + " has no room for LSN " + last);
        }
        long skip = Math.max(0, Math.min(count, checkpoint - firstLsn));
        long from = firstLsn + skip;
        int n = (int) (count - skip);
        if (n > capacity) {
            throw new IllegalStateException("redo log of partition " + partition + ": " + n + " records after the checkpoint"
                    + " do not fit its " + capacity + " slots");
        }
        if (skip > 0) {
            // The records behind the checkpoint are done: the wait below may be for one of them.
            completed(firstLsn, from - 1);
        }
        if (n > 0) {
            awaitWritten(last - capacity);
            int slot = (int) (from % capacity);
            int first = Math.min(n, capacity - slot);
            int at = offset + (int) skip * recordLength;
            // Owned writes: only this owner writes its log's slots, so a write cut by a failover may run again there.
            dev.dex.rdma.OwnedWrites.write(memory, slotAddress(slot), records, at, first * recordLength);
            if (first < n) {
                dev.dex.rdma.OwnedWrites.write(memory, slotAddress(0), records, at + first * recordLength, (n - first) * recordLength);
            }
            completed(from, last);
        }
    }

    /**
     * Adds the write of {@link #append} to {@code batch}, to go beside other verbs of the caller (a page write), when it
     * needs no wait and no skip: the ring has room, the records lie after the checkpoint in one run of slots, and
     * every record one lap earlier is written. Returns false, adding nothing, otherwise (call {@link #append}). Once the
     * batch completed, {@link #appended} records the write; a write that failed may be appended again, to the same
     * slots, by {@link #append} (which, unlike a batch, runs it once more after a failover: {@code OwnedWrites}).
     */
    public boolean appendInto(VerbBatch batch, long firstLsn, DirectBuffer records, int offset, int count) {
        long last = firstLsn + count - 1;
        int slot = (int) (firstLsn % capacity);
        // Read once, the fields may be stale when the write lands. The watermark and the room only grow, so a stale
        // read of them only refuses. A checkpoint that passed firstLsn meanwhile makes the write one append() would
        // skip; it is harmless: the slot is not reused before this record is marked written (the wait for the record
        // one lap earlier, awaitWritten).
        if (abandoned || failure != null || !hasRoom(last) || firstLsn < checkpoint || slot + count > capacity
                || durable < last - capacity) {
            return false;
        }
        batch.write(slotAddress(slot), records, offset, count * recordLength);
        return true;
    }

    /** The memory server that holds this log. */
    public int serverId() {
        return GlobalAddress.serverId(address);
    }

    /** The write {@link #appendInto} added has completed: records {@code firstLsn..firstLsn+count-1} are in the log. */
    public void appended(long firstLsn, int count) {
        completed(firstLsn, firstLsn + count - 1);
    }

    /**
     * Waits until every record up to {@code lsn} was written or skipped (the watermark itself, not the checkpoint):
     * before a slot is reused.
     */
    private void awaitWritten(long lsn) {
        if (durable >= lsn) {
            return;
        }
        long deadline = System.nanoTime() + awaitNanos;
        synchronized (this) {
            while (durable < lsn) {
                if (failure != null) {
                    throw new IllegalStateException("redo log of partition " + partition + " lost an append", failure);
                }
                if (abandoned) {
                    throw new IllegalStateException("partition " + partition + " was given up before record " + lsn
                            + " reached its log");
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new IllegalStateException("redo log of partition " + partition + ": the slot of record " + (lsn + capacity)
                            + " still waits for record " + lsn + " after " + TimeUnit.NANOSECONDS.toMillis(awaitNanos)
                            + " ms (written up to " + durable + ")");
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, Math.min(left, TimeUnit.MILLISECONDS.toNanos(10)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted while waiting for the redo log", e);
                }
            }
        }
    }

    private synchronized void completed(long first, long last) {
        if (first != durable + 1) {
            ahead.put(first, last);
            return;
        }
        long upTo = last;
        Long more;
        while ((more = ahead.remove(upTo + 1)) != null) {
            upTo = more;
        }
        durable = upTo;
        notifyAll();
    }

    /**
     * Waits until every record up to {@code lsn} is in the log, or behind the checkpoint (its page written
     * back).
     *
     * @throws IllegalStateException when an append of this log failed (the records behind it never will be
     *                               durable) or the wait took longer than the configured limit
     */
    public void awaitDurable(long lsn) {
        for (int spin = 0; spin < 64; spin++) {
            if (durable >= lsn || checkpoint > lsn) {
                return;
            }
            Thread.onSpinWait();
        }
        long deadline = System.nanoTime() + awaitNanos;
        synchronized (this) {
            // A record below the checkpoint is durable whatever became of its append: its page is written back.
            while (durable < lsn && checkpoint <= lsn) {
                if (abandoned) {
                    throw new IllegalStateException("partition " + partition + " was given up before record " + lsn
                            + " reached its log");
                }
                if (failure != null) {
                    throw new IllegalStateException("redo log of partition " + partition + " lost an append", failure);
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new IllegalStateException("redo log of partition " + partition + ": record " + lsn
                            + " not durable after " + TimeUnit.NANOSECONDS.toMillis(awaitNanos) + " ms (durable up to " + durable + ")");
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, Math.min(left, TimeUnit.MILLISECONDS.toNanos(10)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted while waiting for the redo log", e);
                }
            }
        }
    }

    /**
     * Records that every write with an LSN below {@code lsn} is in the tree's remote pages: the replay
     * starts there from now on and the ring may reuse the slots behind it. Stored with this owner's epoch,
     * also when the LSN did not move (the first checkpoint of a takeover).
     */
    public synchronized void checkpointed(long lsn) {
        if (lsn < checkpoint || lsn == checkpoint && checkpointEpoch == epoch) {
            return;
        }
        // LSN and epoch in one write: a replay from here accepts no record of an owner before this one.
        checkpointWords.putLong(0, lsn, ORDER);
        checkpointWords.putLong(Long.BYTES, epoch, ORDER);
        dev.dex.rdma.OwnedWrites.write(memory, address + CHECKPOINT_OFFSET, checkpointWords, 0, 2 * Long.BYTES);
        checkpoint = lsn;
        checkpointEpoch = epoch;
        notifyAll();
    }

    private long slotAddress(int slot) {
        return address + HEADER_LENGTH + (long) slot * recordLength;
    }

    @Override
    public String toString() {
        return "RedoLog{partition=" + partition + ", epoch=" + epoch + ", checkpoint=" + checkpoint + ", next=" + next.get()
                + ", durable=" + durable + ", capacity=" + capacity + '}';
    }
}
