package dev.dex.core.cache;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;

import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.log.RedoLog;
import dev.dex.core.log.RedoLogDescriptor;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.OwnershipTable;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.PartitionedEngine.ReleaseReport;
import dev.dex.rdma.RemoteMemory;

/**
 * The logical partitions one {@link DexEngine} holds (paper §5, logical repartitioning, on the compute side): the gate
 * every operation passes to enter its key's partition, and the takeover and handoff of a partition: acquire (cold
 * cache; with redo logging the log's epoch is bumped and its records replayed), checkpoints, release (every dirty page
 * written back, every frame dropped) and abandon (frames dropped unwritten). Also the partitions whose cache failed
 * ({@link #cacheFailed}): not entered, not written back, to be given up and acquired again.
 *
 * <pre>
 * Concurrency:
 *   state[p] is set by acquire and cleared by release or abandon; each operation on p increments inFlight[p] and
 *   re-checks state[p], so release, after clearing state[p], waits for inFlight[p] to drain and then owns every frame
 *   of p (other threads only try-lock them, for cooling, and back off). During acquire's replay state[p] is
 *   RECOVERING: only the recovery session enters.
 *   logs[p] is set by acquire before state[p] becomes HELD and cleared by release after its final checkpoint; a
 *   session that committed after its operation left the partition waits until release cleared it (release writes
 *   every page back, so those writes are durable). Checkpoints of one partition are serialized on its log's
 *   checkpointLock().
 *   poisoned[p] goes to 1 (cacheFailed) before state[p] goes to FAILED, and back to 0 only once p's frames are
 *   dropped; poisonedCount lets the write-back path skip the check while no partition failed.
 * </pre>
 */
final class HeldPartitions {
    private final DexEngine engine;
    private final RemoteMemory memory;
    private final KeyFormat keys;
    private final RedoLogSettings redoLog;
    private final WriteFailures writeFailures;
    private final long instanceId;
    /** The partition table the engine serves ({@code engine.partitions}), its version, and a newer one's adoption. */
    final ServedTable served;

    /**
     * state[p] values: not held, held, being recovered by acquire (only its replay session enters), and failed: held,
     * but its cache could not be kept in step with remote memory ({@link #cacheFailed}); no operation enters it, and
     * it is to be given up ({@link #abandon}) and acquired again.
     */
    static final int NOT_HELD = 0;
    static final int HELD = 1;
    static final int RECOVERING = 2;
    static final int FAILED = 3;
    /**
     * Held, and paused for a merge pass ({@link Merges}): no operation is in flight, and one that comes waits in
     * {@link #tryEnter} until the pass ends, so that the pass owns the partition's nodes alone.
     */
    static final int MERGING = 4;

    /** poisoned[p] is 1 from {@link #cacheFailed} until p's frames are dropped: none of them is written back. */
    private final AtomicIntegerArray poisoned;
    private final AtomicInteger poisonedCount = new AtomicInteger();
    /** Why each failed partition failed. */
    private final AtomicReferenceArray<Throwable> failures;
    /** {@link WriteFailures#count} when each partition was acquired. */
    private final AtomicLongArray writeFailuresAtAcquire;
    /**
     * Per partition, the leaves its misses still admit whatever P_A says, after a warm-up ({@link DexEngine#warm});
     * decremented by the admissions, cleared at a release.
     */
    private final java.util.concurrent.atomic.AtomicIntegerArray leafBoost;
    /** How long a release keeps trying to write a partition's pages back before it discards them. */
    static final long RELEASE_RETRY_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(2);

    /** The redo log of each held partition, when logging. */
    final AtomicReferenceArray<RedoLog> logs;

    private final AtomicIntegerArray state;
    private final AtomicLongArray inFlight;
    /**
     * The entries of the ownership tables this engine makes: one per id a split may add where the table can change,
     * else 0 (as many as the table's ids: chunks too small for a second table cannot hold 1,024 entries either).
     */
    private final int ownershipEntries;

    HeldPartitions(DexEngine engine, PartitionTable.Versioned table) {
        this.engine = engine;
        this.memory = engine.memory;
        this.keys = engine.keys;
        this.redoLog = engine.redoLog;
        this.writeFailures = engine.writeFailures;
        this.instanceId = engine.instanceId;
        this.served = new ServedTable(engine, table);
        this.ownershipEntries = PartitionTable.changeable(memory) ? OwnershipTable.ENTRIES : 0;
        int count = PartitionTable.MAX_PARTITIONS; // ids, not ranges: a split adds ids (PartitionSplits)
        this.logs = new AtomicReferenceArray<>(count);
        this.state = new AtomicIntegerArray(count);
        this.inFlight = new AtomicLongArray(count);
        this.poisoned = new AtomicIntegerArray(count);
        this.failures = new AtomicReferenceArray<>(count);
        this.writeFailuresAtAcquire = new AtomicLongArray(count);
        this.leafBoost = new java.util.concurrent.atomic.AtomicIntegerArray(count);
    }

    /** Whether no operation may treat a node of {@code partition} as owned: the engine does not hold it. */
    boolean notHeld(int partition) {
        return state.get(partition) == NOT_HELD;
    }

    /** See {@link DexEngine#acquireReport}. */
    DexEngine.AcquireReport acquire(int partition) {
        checkPartition(partition);
        long start = System.nanoTime();
        if (held(state.get(partition))) {
            return new DexEngine.AcquireReport(partition, 0, 0, 0, 0, 0, false);
        }
        served.adoptIfMoved(-1);
        if (!engine.partitions.exists(partition)) {
            throw new IllegalArgumentException("partition " + partition + " is not in the partition table (version " + served.version()
                    + "): " + engine.partitions);
        }
        if (!engine.splitsToRepair.isEmpty() && !engine.repairLeftovers()) {
            // A node may be wider than its slot in remote memory: whoever serves its keys from a stale parent would
            // write them where no reader finds them.
            throw new IllegalStateException("a split this compute node could not finish is not repaired yet; partition "
                    + partition + " is not served until it is");
        }
        Flush flush = new Flush(engine);
        flush.dropPartition(partition);
        // Cached nodes over the partition's leaves that span it may be older than a merge of its previous owner (one
        // may still point to a leaf merged away): re-read when next needed (docs/merges.md).
        flush.dropSpanningParents(partition);
        writeFailuresAtAcquire.set(partition, writeFailures.count());
        if (!redoLog.enabled()) {
            // No epochs without the log: the memory servers check only that an offload's key is the partition's.
            registerOwnership(partition, 0);
            state.set(partition, HELD);
            return new DexEngine.AcquireReport(partition, 0, 0, 0, System.nanoTime() - start, 0, false);
        }
        state.set(partition, RECOVERING);
        RedoLog opened = null;
        try {
            RedoLog log = RedoLog.open(memory, partition, engine.partitions.idLimit(), instanceId, redoLog.bytes(), redoLog.awaitNanos(), keys);
            opened = log;
            // The previous owner is fenced now: a split of this partition it was committing has landed or never will.
            // Read the table again, so that the range registered and served is the one stored.
            if (served.adoptIfMoved(partition)) {
                if (!engine.partitions.exists(partition)) {
                    throw new IllegalStateException("partition " + partition + " left the partition table during its takeover");
                }
            }
            // Every memory server learns the new epoch before anything of the partition runs (the replay may
            // offload): from now on it refuses the offloads of every earlier owner.
            registerOwnership(partition, log.epoch());
            logs.set(partition, log);
            long replayed;
            try (DexSession recovery = engine.newSession()) {
                recovery.recover();
                replayed = log.replay((op, key, value) -> replayRecord(recovery, op, key, value));
            }
            long pages = checkpoint(partition);
            state.set(partition, HELD);
            return new DexEngine.AcquireReport(partition, log.epoch(), replayed, pages, System.nanoTime() - start, log.previousOwner(),
                    log.previousOwnerFenced());
        } catch (RuntimeException | Error e) {
            // Nothing of the takeover counts: what the replay cached is discarded (not written back: the log still
            // holds it, and a write now could fail as well), and the partition is free for the next owner.
            logs.set(partition, null);
            try {
                new Flush(engine, false).dropPartition(partition);
            } finally {
                clearPoison(partition);
                state.set(partition, NOT_HELD);
            }
            if (opened != null) {
                giveUpUnlessWritesFailed(partition, opened);
            }
            throw e;
        }
    }

    /**
     * Applies one redo record during a takeover, again (up to {@link RedoLog#REPLAY_READ_ATTEMPTS} times, 1 ms apart)
     * when it failed with a verb that went unanswered while no writing verb of this engine failed: that is a read (a
     * descent's miss), which changed nothing, and a replayed put or delete is idempotent, so applying the record again
     * is what applying it once would have been. Without this a takeover was all or nothing: any one failed verb among the
     * thousands of a long log's replay gave the whole acquire up, to start again from the log's first record, so at a
     * steady rate of failed verbs a partition with a long log could never be taken over (seen in FaultModelTest, at
     * one verb in 250: hundreds of acquires in 30 s, none through). A record whose failure came after a writing verb
     * of the replaying thread failed (a split's write-through, which the structure change undoes or marks for repair)
     * is not retried here and the takeover is given up as before, and so is one that met a fence or a lost memory
     * server. Other threads' failed writes do not count: they are not the replayed record's writes, and what they leave
     * (a half-done structure change, a remote lock pending release) any operation of this engine may meet and handles;
     * counting them (as a first version did) let
     * a steady rate of failed writes elsewhere in the engine turn the retry off, and the takeover could again never
     * get through (ReplayReadFailureTest). (A page evicted during the replay whose write-back fails does not
     * fail the record: the frame stays dirty and cached, the record goes on without a new frame, and the final
     * checkpoint writes it or gives the takeover up.)
     */
    private void replayRecord(DexSession recovery, int op, long[] key, long value) {
        RedoLog.retryingReads(() -> {
            if (op == RedoLogDescriptor.DELETE) {
                recovery.delete(key);
            } else {
                recovery.put(key, value);
            }
        }, writeFailures::countOnThisThread);
    }

    /**
     * Clears {@code log}'s owner word, so the next owner does not fence this engine, unless a writing verb of this
     * engine failed since it acquired {@code partition}: such a write may still land later (its answer was lost,
     * not necessarily the write), so the next owner must fence this engine before it replays.
     *
     * @return whether the owner word was cleared
     */
    private boolean giveUpUnlessWritesFailed(int partition, RedoLog log) {
        if (writeFailures.since(writeFailuresAtAcquire.get(partition))) {
            return false;
        }
        return log.giveUp();
    }

    /**
     * Records on every memory server that this engine owns {@code partition} at {@code epoch} ({@link OwnershipTable}),
     * also where this engine never offloads: it supersedes an earlier owner's offloads all the same.
     */
    void registerOwnership(int partition, long epoch) {
        registerOwnership(partition, epoch, engine.partitions);
    }

    /** {@link #registerOwnership(int, long)} with {@code partition}'s range in {@code table}. */
    void registerOwnership(int partition, long epoch, PartitionTable table) {
        OwnershipTable.register(memory, ownershipEntries > 0 ? ownershipEntries : table.idLimit(), partition, epoch, table.lowerExclusive(partition),
                table.upperInclusive(partition), keys.bytes());
    }

    /** See {@link DexEngine#checkpoint}. */
    long checkpoint(int partition) {
        checkPartition(partition);
        RedoLog log = logs.get(partition);
        if (log == null) {
            return 0;
        }
        synchronized (log.checkpointLock()) {
            // Every write below this LSN took effect (and marked its page dirty) before it took its LSN. One kind takes its
            // LSN first: an uncached owned leaf's write whose record goes beside its page (GroupCommit.writeBeside), whose
            // page write may still be in flight. Its page is not cached, and it is acknowledged only once that write
            // completed, so a crash that loses the write loses no acknowledged write.
            long lsn = log.nextLsn();
            long pages = new Flush(engine).writeBackPartition(partition);
            if (poisoned(partition)) {
                // Some of its dirty pages were not written back: the log must keep every record.
                throw new IllegalStateException("partition " + partition + " is being given up (its cache failed): no checkpoint");
            }
            log.checkpointed(lsn);
            return pages;
        }
    }

    /** {@link DexEngine#repair}'s write-back: a checkpoint of every held partition (a write-back where it does not log). */
    void writeBackAll() {
        for (int p = 0; p < state.length(); p++) {
            if (tryEnter(p)) {
                try {
                    if (logs.get(p) != null) {
                        checkpoint(p);
                    } else {
                        new Flush(engine).writeBackPartition(p);
                    }
                } finally {
                    exit(p);
                }
            }
        }
    }

    /** Whether a writing verb of this engine failed since it acquired {@code partition} (it may still land). */
    boolean writesFailedSinceAcquire(int partition) { return writeFailures.since(writeFailuresAtAcquire.get(partition)); }

    /** See {@link DexEngine#checkpointAll}. */
    long checkpointAll() {
        long pages = 0;
        RuntimeException first = null;
        for (int p = 0; p < logs.length(); p++) {
            RedoLog log = logs.get(p);
            if (log != null && log.length() > 0 && tryEnter(p)) {
                try {
                    pages += checkpoint(p);
                } catch (RuntimeException failed) {
                    first = first == null ? failed : first;
                } finally {
                    exit(p);
                }
            }
        }
        if (first != null) {
            throw first;
        }
        return pages;
    }

    /** See {@link DexEngine#log}. */
    RedoLog log(int partition) {
        checkPartition(partition);
        return logs.get(partition);
    }

    /** Lets the next {@code leaves} leaf misses of {@code partition} be admitted whatever P_A says (a warm-up's). */
    void boostLeaves(int partition, int leaves) {
        leafBoost.set(partition, leaves);
    }

    /** Whether a leaf miss of {@code partition} (-1: none) is admitted by its boost, which it then uses up by one. */
    boolean takeLeafBoost(int partition) {
        return partition >= 0 && leafBoost.get(partition) > 0 && leafBoost.getAndDecrement(partition) > 0;
    }

    /** The partitions held now. */
    int heldCount() {
        int n = 0;
        for (int p = 0; p < state.length(); p++) {
            n += held(state.get(p)) ? 1 : 0;
        }
        return n;
    }

    /** See {@link DexEngine#holds}. */
    boolean holds(int partition) {
        checkPartition(partition);
        return held(state.get(partition));
    }

    /** Whether a partition in state {@code s} is held: serving, or paused for a merge pass. */
    private static boolean held(int s) { return s == HELD || s == MERGING; }

    /** Registers an operation on {@code key}'s partition; fails if the partition is not held. */
    int enter(long[] key) {
        return enter(key, false);
    }

    /** {@link #enter}; a recovery session enters a partition that is being recovered as well. */
    int enter(long[] key, boolean recovery) {
        PartitionTable table = engine.partitions;
        for (int round = 1; ; round++) {
            int p = table.partitionOf(key);
            boolean entered = recovery ? tryEnterRecovering(p) : tryEnter(p);
            PartitionTable now = engine.partitions;
            if (entered && (now == table || now.partitionOf(key) == p)) {
                return p;
            }
            if (entered) {
                exit(p);
            }
            if (now == table || now.partitionOf(key) == p || round == 3) {
                throw new PartitionNotHeldException(now.partitionOf(key), key);
            }
            // p split or merged while this operation waited for it (PartitionSplits, PartitionMerges): the key is another
            // partition's now, which this engine may hold (a merge's).
            table = now;
        }
    }

    /**
     * {@link #tryEnter(int)} for an operation on {@code key}, which was in {@code p} by the table read before: false
     * also when p split meanwhile and gave the key away.
     */
    boolean tryEnter(int p, long[] key) {
        if (!tryEnter(p)) {
            return false;
        }
        if (engine.partitions.partitionOf(key) != p) {
            exit(p);
            return false;
        }
        return true;
    }

    boolean tryEnter(int p) {
        while (true) {
            int s = state.get(p);
            if (s == MERGING) {
                awaitMerged(p);
                continue;
            }
            if (s != HELD) {
                return false;
            }
            inFlight.incrementAndGet(p);
            s = state.get(p);
            if (s == HELD) {
                return true;
            }
            inFlight.decrementAndGet(p);
            if (s != MERGING) {
                return false;
            }
        }
    }

    /**
     * Pauses the held {@code p} for a merge pass: no operation enters it from now on (they wait in {@link #tryEnter}),
     * and those in flight drain. A partition whose operations do not drain within {@code limitNanos} (one may wait for
     * something a waiter of this pause holds) is not paused.
     *
     * @return whether p is paused; then {@link #resumeAfterMerge} must follow
     */
    boolean pauseForMerge(int p, long limitNanos) {
        if (!state.compareAndSet(p, HELD, MERGING)) {
            return false;
        }
        long deadline = System.nanoTime() + limitNanos;
        while (inFlight.get(p) != 0) {
            if (System.nanoTime() - deadline > 0) {
                resumeAfterMerge(p);
                return false;
            }
            Thread.onSpinWait();
        }
        // Its cache failed meanwhile (an operation of it that was draining, DexEngine.cacheFailed): no pass.
        return state.get(p) == MERGING;
    }

    /**
     * The paused {@code partition} was merged into its left neighbour (PartitionMerges): not held any more, its waiting
     * operations enter the neighbour ({@link #enter}); its log, checkpointed, is given up; its notes and free chains go.
     */
    void mergedAway(int partition) {
        RedoLog log = logs.getAndSet(partition, null);
        if (state.getAndSet(partition, NOT_HELD) == NOT_HELD) {
            return;
        }
        leafBoost.set(partition, 0);
        try {
            engine.merges.mergedAway(partition);
            if (log != null) {
                giveUpUnlessWritesFailed(partition, log); // else the id's next owner fences this engine, and replays nothing
            }
        } catch (RuntimeException bestEffort) {
            // a chain left uncut, or the owner word left set: see PartitionMerges
        }
    }

    /** Ends the pause of {@link #pauseForMerge} (a partition whose cache failed meanwhile stays failed). */
    void resumeAfterMerge(int p) {
        state.compareAndSet(p, MERGING, HELD);
    }

    private void awaitMerged(int p) {
        for (int spins = 0; state.get(p) == MERGING || engine.merges.passing(p); spins++) {
            if (spins < 64) {
                Thread.onSpinWait();
            } else {
                java.util.concurrent.locks.LockSupport.parkNanos(20_000);
            }
        }
    }

    private boolean tryEnterRecovering(int p) {
        if (state.get(p) != RECOVERING) {
            return false;
        }
        inFlight.incrementAndGet(p);
        return true;
    }

    void exit(int p) {
        inFlight.decrementAndGet(p);
    }

    /** See {@link DexEngine#release}. */
    ReleaseReport release(int partition) {
        checkPartition(partition);
        long start = System.nanoTime();
        while (true) {
            awaitMerged(partition);
            if (state.get(partition) == FAILED) {
                abandon(partition);
                return new ReleaseReport(partition, System.nanoTime() - start, 0, 0, 0);
            }
            if (state.compareAndSet(partition, HELD, NOT_HELD)) {
                break;
            }
            int now = state.get(partition);
            if (!held(now) && now != FAILED) {
                return new ReleaseReport(partition, System.nanoTime() - start, 0, 0, 0);
            }
            // A merge pass paused it between the wait and the swap (and may have ended since): round again.
        }
        leafBoost.set(partition, 0);
        engine.merges.forget(partition);
        awaitDrained(partition);
        long[] work = writeBackAndDrop(partition);
        RedoLog log = logs.get(partition);
        if (log != null) {
            // Every page is written back: the next owner's replay has nothing to do. Should this write fail, the
            // next owner replays records whose writes are in the pages already, which changes nothing.
            try {
                synchronized (log.checkpointLock()) {
                    log.checkpointed(log.nextLsn());
                }
            } catch (dev.dex.rdma.FabricException notMoved) {
                // see above
            }
            giveUpUnlessWritesFailed(partition, log);
            logs.set(partition, null);
        }
        return new ReleaseReport(partition, System.nanoTime() - start, work[0], work[0] * dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH, work[1]);
    }

    /** A release's write-back and drop of every frame of {@code partition}, tried again while pages fail to be written. */
    private long[] writeBackAndDrop(int partition) {
        long deadline = System.nanoTime() + RELEASE_RETRY_NANOS;
        Flush flush = new Flush(engine);
        while (true) {
            try {
                // Written back in batches first (their round trips overlap), so the drop finds the pages clean.
                flush.writeBackPartition(partition);
                return flush.dropPartition(partition);
            } catch (dev.dex.rdma.FabricException failed) {
                if (failed instanceof dev.dex.rdma.FencedException || System.nanoTime() - deadline > 0) {
                    RedoLog log = logs.get(partition);
                    if (log != null) {
                        log.abandon();
                    }
                    Flush discard = new Flush(engine, false);
                    discard.dropPartition(partition);
                    logs.set(partition, null);
                    throw new IllegalStateException("partition " + partition + " was released, but its pages could not be"
                            + " written back (" + failed.getMessage() + "); " + (log != null
                            ? "its writes are in its redo log, which the next owner replays after it fenced this compute node"
                            : discard.discardedDirty() + " dirty pages were discarded and their writes lost (no redo log)"),
                            failed);
                }
                parkBriefly();
            }
        }
    }

    private static void parkBriefly() {
        java.util.concurrent.locks.LockSupport.parkNanos(java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(10));
    }

    /**
     * The cache of {@code partition} can no longer be trusted to match remote memory (a structure change whose
     * writes failed left an owned node that remote memory may not have, see StructureChanges): no operation
     * enters it any more, none of its frames is written back, and {@link #logFailed} tells its owner to give it up
     * ({@link #abandon}, which drops its frames) and acquire it again (which replays its redo log). Nothing for a
     * partition this engine does not hold, or -1 (a node that spans partitions).
     */
    void cacheFailed(int partition, Throwable cause) {
        if (partition < 0) {
            return;
        }
        if (poisoned.compareAndSet(partition, 0, 1)) {
            poisonedCount.incrementAndGet();
        }
        failures.set(partition, cause);
        if (!state.compareAndSet(partition, HELD, FAILED) && !state.compareAndSet(partition, MERGING, FAILED)) {
            state.compareAndSet(partition, RECOVERING, FAILED);
        }
    }

    private void clearPoison(int partition) {
        if (poisoned.compareAndSet(partition, 1, 0)) {
            poisonedCount.decrementAndGet();
        }
    }

    /**
     * Whether the dirty frame showing {@code node} may be written back: not when its partition's cache failed
     * ({@link #cacheFailed}), whose frames are dropped unwritten. One volatile read while no partition failed.
     */
    boolean mayWriteBack(NodeView node) {
        if (poisonedCount.get() == 0) {
            return true;
        }
        int owner = engine.partitions.ownerOf(node);
        return owner < 0 || poisoned.get(owner) == 0;
    }

    /** Whether {@code partition}'s cache failed and its frames are not written back. */
    boolean poisoned(int partition) {
        return poisoned.get(partition) != 0;
    }

    /** See {@link DexEngine#logFailed}. */
    boolean logFailed(int partition) {
        checkPartition(partition);
        if (state.get(partition) == FAILED) {
            return true;
        }
        RedoLog log = logs.get(partition);
        return log != null && log.failed();
    }

    /** See {@link DexEngine#partitionFailed}. */
    boolean partitionFailed(int partition) {
        checkPartition(partition);
        return state.get(partition) == FAILED;
    }

    /** See {@link DexEngine#failure}. */
    Throwable failure(int partition) {
        checkPartition(partition);
        Throwable failure = failures.get(partition);
        if (failure != null && state.get(partition) == FAILED) {
            return failure;
        }
        RedoLog log = logs.get(partition);
        return log == null ? null : log.failure();
    }

    /** See {@link DexEngine#abandon}. */
    long abandon(int partition) {
        checkPartition(partition);
        while (true) {
            while (state.get(partition) == RECOVERING || state.get(partition) == MERGING || engine.merges.passing(partition)) {
                Thread.yield(); // an acquire still replaying, or a merge pass: let it finish, then give the partition up
            }
            boolean failed = state.get(partition) == FAILED;
            if (!redoLog.enabled() && !failed) {
                return release(partition).framesDropped();
            }
            if (state.compareAndSet(partition, HELD, NOT_HELD) || state.compareAndSet(partition, FAILED, NOT_HELD)) {
                break;
            }
            int now = state.get(partition);
            if (!held(now) && now != FAILED) {
                return 0;
            }
        }
        engine.merges.forget(partition);
        RedoLog log = logs.get(partition);
        if (log != null) {
            // Before the drain: commits in flight fail at once instead of waiting for records that will not come.
            log.abandon();
        }
        awaitDrained(partition);
        Flush discard = new Flush(engine, false);
        long[] work;
        try {
            work = discard.dropPartition(partition);
        } finally {
            clearPoison(partition);
            logs.set(partition, null);
        }
        if (log != null) {
            // Nothing of p is written from here on: the next owner need not fence this engine, unless a write failed.
            giveUpUnlessWritesFailed(partition, log);
        }
        if (!redoLog.enabled() && discard.discardedDirty() > 0) {
            throw new IllegalStateException("partition " + partition + " was given up because its cache could not be kept"
                    + " in step with remote memory (" + failures.get(partition) + "); " + discard.discardedDirty()
                    + " dirty pages were discarded and their writes lost (no redo log)");
        }
        return work[1];
    }

    /** See {@link DexEngine#close}. */
    void close() {
        RuntimeException first = null;
        for (int p = 0; p < state.length(); p++) {
            if (state.get(p) == NOT_HELD) {
                continue;
            }
            try {
                release(p);
            } catch (RuntimeException failed) {
                if (first == null) {
                    first = failed;
                } else {
                    first.addSuppressed(failed);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** Waits until no operation is in flight on {@code partition} (after its held flag was cleared). */
    private void awaitDrained(int partition) {
        while (inFlight.get(partition) != 0) {
            Thread.onSpinWait();
        }
    }

    void checkPartition(int partition) {
        if (partition < 0 || partition >= PartitionTable.MAX_PARTITIONS) {
            throw new IllegalArgumentException("partition " + partition + " outside [0, " + PartitionTable.MAX_PARTITIONS + ")");
        }
    }
}
