package dev.dex.core.cache;

import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.log.RedoLog;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;

/**
 * The split of a partition this engine holds into two (docs/partition-splits.md): partition p, keys
 * {@code (low, high]}, becomes p = {@code (low, k]} and a new partition q = {@code (k, high]}, which nobody holds yet.
 * No tree node moves: only the table, the ownership entries and this engine's cache change.
 *
 * <ol>
 *   <li>p is paused as for a merge pass: no operation is in flight on it, and those that come wait
 *       ({@link HeldPartitions#pauseForMerge}). An offloaded write the channel gave up on has waited out its run
 *       before its operation left, so no offload of p can still run either.</li>
 *   <li>Everything of p is made durable: with a redo log a checkpoint (every dirty page written back, the checkpoint
 *       moved past its last record), without one a write-back. So neither p's log nor this cache holds anything of q
 *       that remote memory does not. A batch's records that reach p's log only after this (appended at its commit)
 *       took their LSNs with their writes, before the checkpoint's: a replay of p never meets a key of q.</li>
 *   <li>Every frame of p is dropped (under the old table, so also the inner nodes that span k, which become
 *       shared). p starts cold; its merge notes and sweep start again.</li>
 *   <li>p is registered narrowed on every memory server, at its owner epoch, so an offload for a key of q under p is
 *       refused from now on.</li>
 *   <li>Commit: the table's compare-and-swap ({@link PartitionTable#commit}). Lost to another compute node's change
 *       of another partition: the engine reads that table and tries again; after {@link #COMMIT_ATTEMPTS} it gives up
 *       and registers p's old range again.</li>
 *   <li>This engine serves the new table, and p resumes; operations that waited for keys now in q are refused
 *       (PartitionNotHeldException for q), and q is acquired, cold, by whoever gets it next.</li>
 * </ol>
 *
 * <p>A crash at any step loses nothing: before the commit the table is the old one (p's next owner registers its old
 * range again), after it p's log replays from the checkpoint and q has nothing to replay.
 *
 * <pre>
 * Concurrency: one split at a time per engine (this class's monitor on the engine's HeldPartitions). p's pause
 *   orders the split against p's operations: the table is swapped only while none is in flight, and an operation
 *   that enters p after the pause re-checks its key against the table it then reads (HeldPartitions.enter). Other
 *   partitions' operations read the table at any time: their ranges are the same in both tables, and a node that spans
 *   partitions in the old table spans them in the new one too (a split only narrows p).
 * </pre>
 */
final class PartitionSplits {
    /** How long p's operations may take to drain before the split is given up (one may wait for a lock p's waiter holds). */
    static final long PAUSE_LIMIT_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    /** How long a split whose commit went unanswered reads the stored table to learn whether it landed. */
    static final long OUTCOME_NANOS = TimeUnit.SECONDS.toNanos(2);
    /** Commits lost to other compute nodes' table changes before the split gives up. */
    static final int COMMIT_ATTEMPTS = 8;

    private PartitionSplits() {
    }

    /** See {@link DexEngine#split}. */
    static DexEngine.SplitReport split(DexEngine engine, int partition, long boundary) {
        HeldPartitions held = engine.held;
        synchronized (held) {
            long start = System.nanoTime();
            held.checkPartition(partition);
            if (!held.holds(partition)) {
                throw new IllegalStateException("partition " + partition + " is not held by this compute node: only its owner splits it");
            }
            if (engine.partitions.freeId() < 0) {
                throw new IllegalStateException("the table has " + PartitionTable.MAX_PARTITIONS + " partitions: no split");
            }
            engine.partitions.split(partition, boundary, engine.partitions.freeId()); // a bad boundary is refused here
            if (!PartitionTable.changeable(engine.memory)) {
                throw new IllegalStateException("the partition table cannot change: memory server 0's chunks have no room for a"
                        + " second table (dex.memory.chunk-size must be at least " + (PartitionTable.SPLIT_ROOT_AREA
                        + dev.dex.rdma.RegionHeaderDescriptor.ROOT_AREA_OFFSET) + " bytes); partition " + partition + " is not split");
            }
            if (held.writesFailedSinceAcquire(partition)) {
                // Such a write may still land; the new partition's first owner would not fence this node against it.
                throw new IllegalStateException("a write of this compute node failed since it acquired partition " + partition
                        + ": not split until the partition is acquired again");
            }
            if (!held.pauseForMerge(partition, PAUSE_LIMIT_NANOS)) {
                throw new IllegalStateException("partition " + partition + " could not be paused (a merge pass runs, or its"
                        + " operations did not drain within " + TimeUnit.NANOSECONDS.toMillis(PAUSE_LIMIT_NANOS) + " ms): not split");
            }
            try {
                engine.merges.splitting(partition);
                RedoLog log = held.log(partition);
                long pages = log != null ? held.checkpoint(partition) : new Flush(engine).writeBackPartition(partition);
                if (held.poisoned(partition)) {
                    throw new IllegalStateException("partition " + partition + "'s cache failed: not split");
                }
                long[] dropped = new Flush(engine).dropPartition(partition);
                long epoch = log != null ? log.epoch() : 0;
                PartitionTable before = engine.partitions;
                for (int attempt = 1; ; attempt++) {
                    PartitionTable table = engine.partitions;
                    long version = held.served.version();
                    int added = table.freeId();
                    PartitionTable next = table.split(partition, boundary, added);
                    boolean committed;
                    try {
                        held.registerOwnership(partition, epoch, next);
                        committed = PartitionTable.commit(engine.memory, version, next);
                    } catch (RuntimeException unanswered) {
                        committed = outcome(engine, partition, epoch, next, version, unanswered);
                    }
                    if (committed) {
                        held.served.adopt(new PartitionTable.Versioned(next, version + 2));
                        return new DexEngine.SplitReport(partition, added, boundary, version + 2, pages + dropped[0], dropped[1],
                                System.nanoTime() - start);
                    }
                    held.served.adoptStored(-1);
                    if (attempt == COMMIT_ATTEMPTS || !engine.partitions.exists(partition)
                            || engine.partitions.upperInclusive(partition) != before.upperInclusive(partition)) {
                        held.registerOwnership(partition, epoch, engine.partitions);
                        throw new IllegalStateException("partition " + partition + " was not split: the partition table kept"
                                + " changing under " + attempt + " attempts to commit it");
                    }
                }
            } finally {
                held.resumeAfterMerge(partition);
            }
        }
    }

    /**
     * A verb of the registration or the commit failed: whether the commit landed is learned by reading the stored table
     * again (for up to {@link #OUTCOME_NANOS}). Landed: the split counts. Not landed: p's old range is registered again
     * and the split fails. Not learned: p is failed ({@code cacheFailed}), so its owner gives it up and acquires it again
     * from whatever table is stored; serving it with either range could give its keys two owners.
     */
    private static boolean outcome(DexEngine engine, int partition, long epoch, PartitionTable next, long version,
                                   RuntimeException failure) {
        long deadline = System.nanoTime() + OUTCOME_NANOS;
        while (true) {
            try {
                PartitionTable.Versioned stored = PartitionTable.loadVersioned(engine.memory);
                if (stored.version() == version + 2 && stored.table().equals(next)) {
                    return true;
                }
                if (stored.version() == version || stored.table().exists(partition)
                        && stored.table().upperInclusive(partition) != next.upperInclusive(partition)) {
                    engine.held.registerOwnership(partition, epoch, engine.partitions);
                    throw new IllegalStateException("partition " + partition + " was not split: " + failure.getMessage(), failure);
                }
                // Another change landed first: the caller reads it and tries again.
                return false;
            } catch (dev.dex.rdma.FabricException again) {
                if (System.nanoTime() - deadline > 0) {
                    engine.held.cacheFailed(partition, failure);
                    throw new IllegalStateException("partition " + partition + "'s split may or may not have been committed ("
                            + failure.getMessage() + "); the partition is given up to be acquired again from the stored table",
                            failure);
                }
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
            }
        }
    }

    /**
     * See {@link DexEngine#splitBoundary}: the first word of the high fence of the leaf that holds {@code key}, read from
     * remote memory (a descent of one-sided reads, not cached), when it lies strictly inside the partition; otherwise
     * that of its low fence, when it does; else {@link Long#MIN_VALUE}: the partition is that one leaf, and splitting it
     * would split the leaf between two partitions.
     */
    static long boundary(DexEngine engine, int partition, long key) {
        PartitionTable table = engine.partitions;
        long low = table.lowerExclusive(partition);
        long high = table.upperInclusive(partition);
        NodeView node = new NodeView(engine.keys).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        long[] search = new long[engine.keys.words()];
        search[0] = key;
        long address = engine.rootAddress.get();
        for (int depth = 0; depth < 64; depth++) {
            engine.memory.read(address, node.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
            if (node.isLeaf()) {
                break;
            }
            address = node.child(node.childIndex(search));
        }
        // Leaf boundaries only: a boundary inside a leaf would make the leaf span two partitions, shared, and every operation
        // on its keys would then go to remote memory (a hot leaf's above all: the bench measured 1.2 reads an operation).
        for (long candidate : new long[] {node.highFence(), node.lowFence()}) {
            if (candidate > low && candidate < high) {
                return candidate;
            }
        }
        return Long.MIN_VALUE;
    }
}
