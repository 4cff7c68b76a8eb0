package dev.dex.core.cache;

import dev.dex.core.log.RedoLog;
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
 *       of another partition: the engine reads that table and tries again; after {@link TableChanges#COMMIT_ATTEMPTS} it gives up
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
    private PartitionSplits() {
    }

    /** See {@link DexEngine#split}. */
    static DexEngine.SplitReport split(DexEngine engine, int partition, long boundary) {
        HeldPartitions held = engine.held;
        synchronized (held) {
            long start = System.nanoTime();
            TableChanges.requireHeld(held, partition, "its owner splits it");
            if (engine.partitions.freeId() < 0) {
                throw new IllegalStateException("the table has " + PartitionTable.MAX_PARTITIONS + " partitions: no split");
            }
            engine.partitions.split(partition, boundary, engine.partitions.freeId()); // a bad boundary is refused here
            TableChanges.requireChangeable(engine, partition, "split");
            TableChanges.pause(held, partition, "split");
            try {
                engine.merges.splitting(partition);
                RedoLog log = held.log(partition);
                long pages = TableChanges.durable(engine, partition, "split");
                long[] dropped = new Flush(engine).dropPartition(partition);
                // A boundary inside a leaf: the leaf is cut there first (LeafCuts), so that the boundary is a leaf's.
                final long at = LeafCuts.cut(engine, partition, boundary);
                if (at == Long.MIN_VALUE) {
                    throw new IllegalStateException("partition " + partition + " is one leaf, which cannot be cut at " + boundary
                            + ": not split");
                }
                long epoch = log != null ? log.epoch() : 0;
                int[] added = new int[1];
                PartitionTable.Versioned committed;
                try {
                    committed = TableChanges.commit(engine, partition, epoch, table -> {
                        added[0] = table.freeId();
                        return table.split(partition, at, added[0]);
                    }, "split");
                } catch (IllegalStateException notLearned) {
                    if (held.partitionFailed(partition)) {
                        try {
                            held.abandon(partition); // clean, paused: given up now rather than at its entity's next batch
                        } catch (RuntimeException later) {
                            // its entity gives it up at its next batch (logFailed)
                        }
                    }
                    throw notLearned;
                }
                return new DexEngine.SplitReport(partition, added[0], at, committed.version(), pages + dropped[0], dropped[1],
                        System.nanoTime() - start);
            } finally {
                held.resumeAfterMerge(partition);
            }
        }
    }

    /**
     * See {@link DexEngine#splitBoundary}: the first word of the high fence of the leaf that holds {@code key}, read from
     * remote memory (a descent of one-sided reads, not cached), when it lies strictly inside the partition; otherwise
     * that of its low fence, when it does; else (the partition is that one leaf) the key to cut the leaf after for
     * {@code key} ({@link LeafCuts#cutKey}; the split cuts it first), or {@link Long#MIN_VALUE} when it cannot be cut.
     */
    static long boundary(DexEngine engine, int partition, long key) {
        PartitionTable table = engine.partitions;
        long low = table.lowerExclusive(partition);
        long high = table.upperInclusive(partition);
        NodeView node = LeafCuts.view(engine);
        NodeView parent = LeafCuts.view(engine);
        long[] search = new long[engine.keys.words()];
        search[0] = key;
        LeafCuts.Found found = LeafCuts.find(engine, LeafCuts.remote(engine), search, node, parent);
        if (found == null) {
            return Long.MIN_VALUE; // a node on the way stayed locked: no boundary now
        }
        // Leaf boundaries: a boundary inside a leaf would make the leaf span two partitions, shared, and every operation
        // on its keys would then go to remote memory (a hot leaf's above all: the bench measured 1.2 reads an operation).
        long fence = LeafCuts.fenceInside(node, low, high);
        if (fence != Long.MIN_VALUE) {
            return fence;
        }
        // The partition is this one leaf: the split cuts it at the key first (LeafCuts), if it can be cut.
        return LeafCuts.cutKey(engine, partition, node, found.parent() == 0 ? null : parent, key);
    }
}
