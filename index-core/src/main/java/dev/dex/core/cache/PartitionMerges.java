package dev.dex.core.cache;

import dev.dex.core.log.RedoLog;
import dev.dex.core.partition.PartitionTable;

/**
 * The merge of two neighbouring partitions this engine holds into one (docs/partition-splits.md, "A merge, as built"):
 * {@code left} = {@code (low, k]} and {@code right} = {@code (k, high]} become {@code left} = {@code (low, high]}, and
 * {@code right}'s id leaves the table (a later split may take it again). No tree node moves: only the table, the
 * ownership entries and this engine's cache change.
 *
 * <ol>
 *   <li>Both are paused as for a merge pass of leaves: none of their operations is in flight, those that come wait.</li>
 *   <li>Both are made durable (a checkpoint with the redo log, a write-back without): neither log holds anything remote
 *       memory does not, so {@code right}'s log has nothing to replay, and a replay of {@code left}'s after the merge
 *       starts past everything written before it.</li>
 *   <li>Every frame of both is dropped, under the old table.</li>
 *   <li>{@code left} is registered widened on every memory server at its epoch, then the table is committed
 *       ({@link TableChanges#commit}).</li>
 *   <li>This engine serves the new table. The frames that spanned both partitions (shared, under the old table) and now
 *       lie inside {@code left} are dropped too: they are read again as {@code left}'s own. {@code right} is no longer
 *       held ({@link HeldPartitions#mergedAway}): its log is given up, its free chains cut. {@code left} resumes;
 *       operations that waited on {@code right} enter {@code left} ({@link HeldPartitions#enter}).</li>
 * </ol>
 *
 * <p>A crash before the commit leaves the old table: each partition's next owner replays its own log. After it,
 * {@code left}'s next owner replays {@code left}'s log, which holds {@code right}'s keys only from after the merge;
 * nobody opens {@code right}'s log until a split reuses the id, and then it has nothing to replay.
 *
 * <pre>
 * Concurrency: one table change at a time per engine (HeldPartitions' monitor, as PartitionSplits). Both partitions are
 *   paused across the change, so no operation of theirs runs under either table while it is swapped; other partitions'
 *   ranges are the same in both tables, and their operations never descend into nodes inside the merged range.
 * </pre>
 */
final class PartitionMerges {
    private PartitionMerges() {
    }

    /** See {@link DexEngine#mergePartitions}. */
    static DexEngine.MergeReport merge(DexEngine engine, int left, int right) {
        HeldPartitions held = engine.held;
        synchronized (held) {
            long start = System.nanoTime();
            TableChanges.requireHeld(held, left, "the owner of both partitions merges them");
            TableChanges.requireHeld(held, right, "the owner of both partitions merges them");
            engine.partitions.merge(left, right); // refused (IAE) unless right is left's right neighbour
            TableChanges.requireChangeable(engine, left, "merged");
            TableChanges.requireChangeable(engine, right, "merged");
            TableChanges.pause(held, left, "merged");
            boolean rightPaused = false;
            boolean landed = false;
            try {
                TableChanges.pause(held, right, "merged");
                rightPaused = true;
                engine.merges.splitting(left);
                engine.merges.splitting(right);
                long pages = TableChanges.durable(engine, left, "merged") + TableChanges.durable(engine, right, "merged");
                long[] droppedLeft = new Flush(engine).dropPartition(left);
                long[] droppedRight = new Flush(engine).dropPartition(right);
                RedoLog log = held.log(left);
                PartitionTable.Versioned committed;
                try {
                    committed = TableChanges.commit(engine, left, log != null ? log.epoch() : 0, table -> table.merge(left, right),
                            "merged");
                } catch (IllegalStateException notLearned) {
                    if (held.partitionFailed(left)) {
                        // Whether the merge landed is not known: neither partition may be served from either table. Both
                        // are given up now (nothing of theirs is dirty): cold, they may get no batch that would.
                        held.cacheFailed(right, notLearned);
                        giveUp(held, left, right);
                    }
                    throw notLearned;
                }
                landed = true;
                held.mergedAway(right);
                long[] spanned = {0, 0};
                try {
                    spanned = new Flush(engine).dropPartition(left);
                } catch (RuntimeException failed) {
                    // Frames cached as shared that now lie inside left would stay: left is acquired again instead.
                    held.cacheFailed(left, failed);
                    giveUp(held, left);
                    throw new IllegalStateException("partitions " + left + " and " + right + " were merged, but " + left
                            + "'s cache could not be brought in line (" + failed + "); it is given up to be acquired again", failed);
                }
                return new DexEngine.MergeReport(left, right, committed.version(), pages + droppedLeft[0] + droppedRight[0]
                        + spanned[0], droppedLeft[1] + droppedRight[1] + spanned[1], System.nanoTime() - start);
            } finally {
                if (landed) {
                    held.mergedAway(right); // again, should anything after the commit have thrown first: never served again
                } else if (rightPaused) {
                    held.resumeAfterMerge(right);
                }
                held.resumeAfterMerge(left);
            }
        }
    }

    /** Gives up {@code partitions}, failed, as their entities would; a failure to do so is left to them. */
    private static void giveUp(HeldPartitions held, int... partitions) {
        for (int p : partitions) {
            try {
                held.abandon(p);
            } catch (RuntimeException later) {
                // the entity gives it up at its next batch (logFailed)
            }
        }
    }
}
