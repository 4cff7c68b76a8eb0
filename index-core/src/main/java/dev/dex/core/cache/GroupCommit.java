package dev.dex.core.cache;

import java.util.zip.CRC32C;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.log.RedoLog;
import dev.dex.core.log.RedoLogDescriptor;
import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.rdma.VerbBatch;

/**
 * One session's writes on their way to their partitions' redo logs ({@code docs/durability.md}): each write takes
 * its LSN while it still holds the lock that orders it, its record waits here, and a commit puts the records of a
 * batch in the log with one fabric write (group commit) and returns once they are durable. A batch's reads wait
 * too, for the writes they may have seen.
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession}, so by one thread; the records buffer is that thread's. The logs
 * are shared: RedoLog hands out LSNs and orders appends itself. A write's records are committed while its
 * partition is entered, or, from a batch's commit, after tryEnter; a partition given up meanwhile is seen by its
 * log having changed (release: the pages are written back, so the writes are durable; abandon: they are not, and
 * the commit says so).
 * </pre>
 */
final class GroupCommit {
    private final DexEngine engine;
    /** The session's IO markers, released before a write outside a batch waits for its commit. */
    private final Markers markers;
    /** Inside a batch: records are kept until {@link #commit}; outside, every write commits its own. */
    private boolean batching;
    /** Records of this session not yet in the log, all of {@link #pendingLog}, ascending LSNs. */
    private UnsafeBuffer pending;
    /** The length of one record: every log of the index has keys of its width. */
    private final int recordLength;
    private int pendingCount;
    private RedoLog pendingLog;
    private int pendingPartition;
    private final CRC32C crc = new CRC32C();
    /** The verbs of {@link #writeBeside}: a page write and its record; replaced when a run of it threw. */
    private VerbBatch beside = new VerbBatch(2);
    /** The log and LSN of the record {@link #writeBeside} wrote beside its page; waited for by {@link #afterWrite}. */
    private RedoLog besideLog;
    private long besideLsn;
    /**
     * The logs of the partitions this batch read ({@code reads} of them), and for each the last LSN its reads may have
     * seen (see noteRead); waited for at the commit, never in the middle of a batch.
     */
    private RedoLog[] readLogs = new RedoLog[4];
    private long[] readUpTo = new long[4];
    private int reads;

    GroupCommit(DexEngine engine, Markers markers) {
        this.engine = engine;
        this.markers = markers;
        this.recordLength = RedoLogDescriptor.recordLength(engine.keys.bytes());
        this.pending = new UnsafeBuffer(new byte[64 * recordLength]);
    }

    /**
     * After a write took effect: outside a batch, releases the operation's IO markers and makes the write durable
     * now, still inside the operation (counted in its partition, so a release waits for this commit).
     */
    void afterWrite() {
        if (!batching) {
            markers.releaseAll();
            writePending(true);
        }
    }

    /**
     * Records a write that has just taken effect, while the lock that orders it with other writes of the
     * same key is still held: it takes its LSN now, and its record waits in this session until
     * {@link #commit}. Nothing when the partition is not logged.
     */
    void record(int partition, long[] key, long newValue, int op) {
        RedoLog log = engine.held.logs.get(partition);
        if (log == null) {
            return;
        }
        // write() committed records of another partition or an older log before it took any lock.
        if ((pendingCount + 1) * recordLength > pending.capacity()) {
            UnsafeBuffer larger = new UnsafeBuffer(new byte[pending.capacity() * 2]);
            larger.putBytes(0, pending, 0, pendingCount * recordLength);
            pending = larger;
        }
        long lsn = log.assign();
        int record = op == LeafOps.DELETE ? RedoLogDescriptor.DELETE : RedoLogDescriptor.PUT;
        log.encode(pending, pendingCount * recordLength, lsn, record, key, op == LeafOps.DELETE ? 0 : newValue, crc);
        pendingCount++;
        pendingLog = log;
        pendingPartition = partition;
    }

    /**
     * Whether the write about to be recorded on {@code partition} may go {@link #writeBeside beside} its page write at
     * {@code page}: outside a batch, with no other record pending, on a partition that is logged, and with the page on
     * the log's memory server. The write takes its LSN before its page write; were the page on another server, a page
     * write that hangs there would leave a hole in the log and hold up every commit of the partition, where before it
     * held up only its own operation. On the log's server a hang stops the log all the same.
     */
    boolean canWriteBeside(int partition, long page) {
        RedoLog log;
        return !batching && pendingCount == 0 && (log = engine.held.logs.get(partition)) != null
                && dev.dex.rdma.GlobalAddress.serverId(page) == log.serverId();
    }

    /**
     * The write-through of an uncached owned leaf whose write was just {@link #record recorded}, the only record
     * pending (see {@link #canWriteBeside}): the page write and the record go to the fabric together, so the write
     * waits for one round trip, not two (docs/durability.md, "A record beside its page"). Both are writes only this
     * owner makes, to different places; neither needs the other first (a crash after either alone leaves a write that
     * was not acknowledged, and a replay of its record only redoes it). When the record cannot go without a wait
     * ({@link RedoLog#appendInto}), the page goes alone and the record follows in {@link #afterWrite}, as without this.
     * A record whose write failed stays pending too: afterWrite writes it again, to the same slot, with the retries
     * (and a failover's second run) of {@link #appendAndWait}. Called with the leaf's IO marker held; on success
     * nothing here waits for another session (the wait for the records before it is afterWrite's, after the markers
     * are released).
     *
     * @throws RuntimeException the page write's failure (or the transport's), thrown once the markers are released
     *                          and the record is in the log or its log failed: its LSN is handed out, and a record left
     *                          pending would stall the partition's later commits
     */
    void writeBeside(RemoteNodes remote, long address, NodeView leaf) {
        VerbBatch batch = beside;
        RuntimeException failed;
        try {
            // Empty here: every run clears it at its end, or replaces it when it threw.
            int page = remote.writeUnlocked(batch, address, leaf);
            long lsn = lsnOf(0);
            RedoLog log = pendingLog;
            boolean withRecord = log.appendInto(batch, lsn, pending, 0, 1);
            remote.submit(batch);
            if (withRecord && batch.failure(page + 1) == null) {
                log.appended(lsn, 1);
                dropPending();
                besideLog = log;
                besideLsn = lsn;
            }
            failed = batch.failure(page);
            batch.clear();
        } catch (RuntimeException thrown) {
            beside = new VerbBatch(2); // this one may be left started
            failed = thrown;
        }
        if (failed != null) {
            markers.releaseAll();
            try {
                writePending(true);
            } catch (RuntimeException alsoFailed) {
                failed.addSuppressed(alsoFailed);
            }
            throw failed;
        }
    }

    /**
     * Starts a batch: the writes that follow are acknowledged together by {@link #commit}, which puts their
     * records in the partition's log with one fabric write (group commit). A batch writes one partition.
     */
    void beginBatch() {
        batching = true;
    }

    /** Whether a batch is open: records wait for {@link #commit}. */
    boolean batching() {
        return batching;
    }

    /**
     * Before a write on {@code partition}: a batch whose records belong to another partition, or to a log its
     * partition has since given up, commits them first (records of one commit go to one log).
     */
    void commitIfElsewhere(int partition) {
        if (pendingCount > 0 && (pendingPartition != partition || pendingLog != engine.held.logs.get(partition))) {
            writePending(false);
        }
    }

    /**
     * Ends a batch (or the current write outside one): returns once the records of this session's writes
     * are in their partition's redo log, so they survive a crash of this compute node. A full log is
     * checkpointed first; a log more than half full is checkpointed afterwards, which bounds a takeover's
     * replay.
     *
     * @throws IllegalStateException when the records could not be written: the writes are not durable
     */
    void commit() {
        batching = false;
        int n = reads;
        reads = 0;
        writePending(false);
        // The batch's reads may have returned writes of other batches: answer them only once those are durable too, so
        // no answered value can vanish with a crash. Only now, after this session's own records went to their log: a
        // wait in the middle of a batch (as for a scan that crossed into another partition) could wait for this
        // session's own records, still pending, or for those of another session waiting likewise for these: a hang.
        for (int i = 0; i < n; i++) {
            RedoLog log = readLogs[i];
            readLogs[i] = null;
            log.awaitDurable(readUpTo[i]);
        }
    }

    /**
     * Notes that a read of this batch (nothing outside one) ran on {@code partition}: it may have seen any write that took an LSN
     * before it finished (a write takes its LSN before it releases the lock readers validate against).
     */
    void noteRead(int partition) {
        RedoLog log = engine.held.logs.get(partition);
        if (!batching || log == null) {
            return;
        }
        long upTo = log.nextLsn() - 1;
        for (int i = 0; i < reads; i++) {
            if (readLogs[i] == log) {
                readUpTo[i] = Math.max(readUpTo[i], upTo);
                return;
            }
        }
        if (reads == readLogs.length) {
            readLogs = java.util.Arrays.copyOf(readLogs, reads * 2);
            readUpTo = java.util.Arrays.copyOf(readUpTo, reads * 2);
        }
        readLogs[reads] = log;
        readUpTo[reads] = upTo;
        reads++;
    }

    /**
     * Makes this session's pending records durable (see {@link #commit}); the batch, if any, goes on.
     *
     * @param entered the caller is inside an operation on the records' partition (so it cannot be released
     *                or abandoned meanwhile, and must not wait for that)
     */
    void writePending(boolean entered) {
        RedoLog wroteBeside = besideLog;
        besideLog = null;
        if (pendingCount == 0) {
            if (wroteBeside != null) {
                // Written beside its page (writeBeside), inside this operation: durable once the records before it are.
                awaitDurable(wroteBeside, wroteBeside.partition(), besideLsn);
            }
            return;
        }
        RedoLog log = pendingLog;
        int p = pendingPartition;
        int count = pendingCount;
        if (entered) {
            if (engine.held.logs.get(p) != log) {
                dropPending();
                throw notDurable(p);
            }
            appendAndWait(log, p, count);
            return;
        }
        if (engine.held.tryEnter(p)) {
            try {
                if (engine.held.logs.get(p) != log) {
                    dropPending();
                    throw notDurable(p); // given up, and held again under a newer log
                }
                appendAndWait(log, p, count);
            } finally {
                engine.held.exit(p);
            }
            return;
        }
        dropPending();
        if (engine.held.partitionFailed(p) && engine.held.logs.get(p) == log) {
            // Its cache failed (a structure change whose writes failed, DexEngine.cacheFailed): the partition is given up
            // unwritten, which its owner does only once this batch is answered, so these records will never reach the
            // log. The wait below would last its whole deadline. Fail the log instead, so that every other waiter
            // fails at once too; the replay of the next owner stops at the hole, before these unacknowledged writes.
            IllegalStateException lost = notDurable(p);
            lost.initCause(engine.held.failure(p));
            log.fail(lost);
            throw lost;
        }
        // Not held since the writes. Released: the release wrote every page back before it dropped the log, so
        // they are durable. Abandoned (DexEngine.abandon): the pages were discarded, and these records are lost.
        long deadline = System.nanoTime() + engine.redoLog.awaitNanos();
        while (engine.held.logs.get(p) == log) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("partition " + p + " was released but its release did not finish;"
                        + " the writes are not known to be durable");
            }
            Thread.onSpinWait();
        }
        if (log.abandoned()) {
            throw notDurable(p);
        }
    }

    /** Forgets the pending records: they are in the log, or their log is no more this partition's. */
    private void dropPending() {
        pendingCount = 0;
        pendingLog = null;
    }

    private static IllegalStateException notDurable(int p) {
        return new IllegalStateException("partition " + p + " was given up before these writes reached its log;"
                + " they are not durable");
    }

    /**
     * Appends the pending records (runs of consecutive LSNs) and waits until they are durable. Their LSNs are handed
     * out, so nothing after them can become durable until they are in the log: a checkpoint or append that fails
     * is tried again (the same records go to the same slots) for up to {@link #APPEND_RETRY_NANOS} (a lost answer or a
     * broken connection is usually over at once; a memory node that stays away is for the partition's recovery, and
     * a worker thread must not wait for it), and then the log is failed
     * ({@link RedoLog#fail}: every waiter fails at once, the partition is given up and acquired again). The records
     * leave this session only once they are written or the log failed.
     */
    private void appendAndWait(RedoLog log, int p, int count) {
        long last = lsnOf(count - 1);
        long deadline = System.nanoTime() + Math.min(engine.redoLog.awaitNanos(), APPEND_RETRY_NANOS);
        int written = 0;
        while (true) {
            try {
                while (!log.hasRoom(last)) {
                    engine.checkpoint(p);
                }
                for (int i = written + 1; i <= count; i++) {
                    if (i == count || lsnOf(i) != lsnOf(i - 1) + 1) {
                        log.append(lsnOf(written), pending, written * recordLength, i - written);
                        written = i;
                    }
                }
                break;
            } catch (RuntimeException failed) {
                boolean retry = failed instanceof dev.dex.rdma.FabricException && !(failed instanceof dev.dex.rdma.FencedException)
                        && System.nanoTime() - deadline < 0 && !log.failed() && !log.abandoned() && !engine.held.poisoned(p);
                if (!retry) {
                    log.fail(failed);
                    dropPending();
                    throw failed;
                }
                java.util.concurrent.locks.LockSupport.parkNanos(java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(1));
            }
        }
        dropPending();
        awaitDurable(log, p, last);
    }

    /** Waits until record {@code last} of {@code p}'s log is durable; then checkpoints a log more than half full. */
    private void awaitDurable(RedoLog log, int p, long last) {
        log.awaitDurable(last);
        if (log.length() > log.capacity() / 2) {
            try {
                engine.checkpoint(p);
            } catch (dev.dex.rdma.FabricException notNow) {
                // The records are durable; the checkpoint only bounds the next replay, and comes again with the next commit.
            }
        }
    }

    /** How long a failed append or log-full checkpoint is tried again before the log is failed. */
    static final long APPEND_RETRY_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(1);

    private long lsnOf(int record) {
        return pending.getLong(record * recordLength + RedoLogDescriptor.LSN_OFFSET, java.nio.ByteOrder.LITTLE_ENDIAN);
    }
}
