package dev.dex.core.cache;

import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

import dev.dex.core.partition.PartitionTable;

/**
 * The commit of a change of the partition table that this engine makes to a partition it holds, paused: a split
 * ({@link PartitionSplits}) or a merge ({@link PartitionMerges}). The partition is registered with its new range on every
 * memory server first, then the table is committed by compare-and-swap ({@link PartitionTable#commit}); a commit lost
 * to another compute node's change of another partition reads that table and tries again.
 *
 * <p>Only the holder of a partition changes its range, so the stored range of the partition tells whether a commit
 * whose answer was lost landed: the new range, it did (whatever landed on top since); the old one at the same version,
 * it did not.
 *
 * <pre>
 * Concurrency: called under HeldPartitions' monitor (one table change at a time per engine), with the partition paused;
 * other engines' changes are ordered by the stored table's compare-and-swap.
 * </pre>
 */
final class TableChanges {
    /** How long a change whose commit went unanswered reads the stored table to learn whether it landed. */
    static final long OUTCOME_NANOS = TimeUnit.SECONDS.toNanos(2);
    /** Commits lost to other compute nodes' table changes before the change gives up. */
    static final int COMMIT_ATTEMPTS = 8;

    /** How long a partition's operations may take to drain before the change is given up (one may wait for a lock a waiter holds). */
    static final long PAUSE_LIMIT_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    private TableChanges() {
    }

    /** Refuses a change of {@code partition}, unless this engine holds it ({@code who}: who may change it). */
    static void requireHeld(HeldPartitions held, int partition, String who) {
        held.checkPartition(partition);
        if (!held.holds(partition)) {
            throw new IllegalStateException("partition " + partition + " is not held by this compute node: only " + who);
        }
    }

    /**
     * Refuses the change of {@code partition}'s range: when the table cannot change (server 0's chunks have no room for
     * its second slot), or when a write of this engine failed since it acquired the partition (such a write may still
     * land, and the next owner of the keys it changes would not fence this engine against it).
     */
    static void requireChangeable(DexEngine engine, int partition, String what) {
        if (!PartitionTable.changeable(engine.memory)) {
            throw new IllegalStateException("the partition table cannot change: memory server 0's chunks have no room for a"
                    + " second table (dex.memory.chunk-size must be at least " + (PartitionTable.SPLIT_ROOT_AREA
                    + dev.dex.rdma.RegionHeaderDescriptor.ROOT_AREA_OFFSET) + " bytes); partition " + partition + " is not " + what);
        }
        if (engine.held.writesFailedSinceAcquire(partition)) {
            throw new IllegalStateException("a write of this compute node failed since it acquired partition " + partition
                    + ": not " + what + " until the partition is acquired again");
        }
    }

    /**
     * Makes the paused {@code partition} durable: a checkpoint with its redo log (every dirty page written back, the
     * checkpoint moved past its last record), a write-back without; its pages written. Refused when its cache failed.
     */
    static long durable(DexEngine engine, int partition, String what) {
        long pages = engine.held.log(partition) != null ? engine.held.checkpoint(partition)
                : new Flush(engine).writeBackPartition(partition);
        if (engine.held.poisoned(partition)) {
            throw new IllegalStateException("partition " + partition + "'s cache failed: not " + what);
        }
        return pages;
    }

    /** Pauses the held {@code partition} as for a merge pass, or refuses the change; {@code resumeAfterMerge} must follow. */
    static void pause(HeldPartitions held, int partition, String what) {
        if (!held.pauseForMerge(partition, PAUSE_LIMIT_NANOS)) {
            throw new IllegalStateException("partition " + partition + " could not be paused (a merge pass runs, or its"
                    + " operations did not drain within " + TimeUnit.NANOSECONDS.toMillis(PAUSE_LIMIT_NANOS) + " ms): not " + what);
        }
    }

    /**
     * Commits {@code change} of the table served for {@code partition} (held, paused, registered at {@code epoch}) and
     * serves the table committed, which is returned.
     *
     * @param what the change, for messages ("split", "merged")
     * @throws IllegalStateException when it did not land ({@code partition}'s old range is registered again), or when
     *                               whether it landed could not be learned (then {@code partition} is failed, to be
     *                               acquired again from whatever table is stored)
     */
    static PartitionTable.Versioned commit(DexEngine engine, int partition, long epoch, UnaryOperator<PartitionTable> change,
                                           String what) {
        HeldPartitions held = engine.held;
        PartitionTable before = engine.partitions;
        for (int attempt = 1; ; attempt++) {
            PartitionTable.Versioned served = held.served.current(false);
            PartitionTable next = change.apply(served.table());
            PartitionTable.Versioned landed;
            try {
                held.registerOwnership(partition, epoch, next);
                landed = PartitionTable.commit(engine.memory, served.version(), next)
                        ? new PartitionTable.Versioned(next, served.version() + 2) : null;
            } catch (RuntimeException unanswered) {
                landed = outcome(engine, partition, epoch, before, next, served.version(), unanswered, what);
            }
            if (landed != null) {
                held.served.adopt(landed);
                return landed;
            }
            try {
                held.served.adoptStored(-1);
            } catch (RuntimeException unread) {
                restore(engine, partition, epoch, before);
                throw unread;
            }
            if (attempt == COMMIT_ATTEMPTS || !engine.partitions.sameRange(partition, before)) {
                restore(engine, partition, epoch, before);
                throw new IllegalStateException("partition " + partition + " was not " + what + ": the partition table kept"
                        + " changing under " + attempt + " attempts to commit it");
            }
        }
    }

    /**
     * The change did not land: {@code partition}'s range in {@code before} is registered again; if that fails too, its
     * entry may still say the new range, and the partition is failed, to be acquired again (which registers it).
     */
    private static void restore(DexEngine engine, int partition, long epoch, PartitionTable before) {
        try {
            engine.held.registerOwnership(partition, epoch, before);
        } catch (RuntimeException unregistered) {
            engine.held.cacheFailed(partition, unregistered);
        }
    }

    /**
     * A verb of the registration or the commit failed: whether the commit landed is learned by reading the stored table
     * again (for up to {@link #OUTCOME_NANOS}). Landed: the stored table. Not landed at the same version: the old range
     * is registered again and the change fails. Another change landed instead: null, the caller tries again. Not
     * learned: the partition is failed ({@code cacheFailed}), so its owner gives it up and acquires it again from
     * whatever table is stored; serving it with either range could give keys two owners.
     */
    private static PartitionTable.Versioned outcome(DexEngine engine, int partition, long epoch, PartitionTable before,
                                                    PartitionTable next, long version, RuntimeException failure, String what) {
        long deadline = System.nanoTime() + OUTCOME_NANOS;
        while (true) {
            try {
                PartitionTable.Versioned stored = PartitionTable.loadVersioned(engine.memory);
                if (stored.table().sameRange(partition, next)) {
                    return stored;
                }
                if (stored.version() == version) {
                    restore(engine, partition, epoch, before);
                    throw new IllegalStateException("partition " + partition + " was not " + what + ": " + failure.getMessage(),
                            failure);
                }
                return null;
            } catch (dev.dex.rdma.FabricException again) {
                if (System.nanoTime() - deadline > 0) {
                    engine.held.cacheFailed(partition, failure);
                    throw new IllegalStateException("partition " + partition + "'s change (" + what + ") may or may not have"
                            + " been committed (" + failure.getMessage() + "); the partition is given up to be acquired again"
                            + " from the stored table", failure);
                }
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
            }
        }
    }
}
