package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;
import static dev.dex.core.cache.FrameHeaderDescriptor.SHARED;

import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.RemoteNodes;

/**
 * One session's writes at the leaf its descent found (paper Algorithm 1, the write at the end of the path): in a
 * cached leaf under the frame's write lock, marked dirty for lazy write-back; in an uncached shared leaf under the
 * remote lock, written through; in an uncached owned leaf written through as its owner. Every write that takes
 * effect is recorded for the partition's redo log ({@link GroupCommit#record}) while the lock that orders it with
 * other writes of the key is still held; outside a batch, an uncached owned leaf's record goes to the log beside its
 * page write ({@link GroupCommit#writeBeside}).
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession}, so by one thread, on its {@link SessionPath}. A cached leaf is
 * changed only after a try-upgrade at the version the descent read (a failure restarts the operation); an
 * uncached shared leaf only under its remote lock at the version read; an uncached owned leaf only with its IO
 * marker held (taken by the descent), which keeps this compute node's other threads away from it.
 * </pre>
 */
final class LeafWrites {
    /** {@link #apply} outcome: the operation restarts from the root. */
    static final int RESTART = -1;

    private final FrameArena arena;
    private final SessionPath path;
    private final Markers markers;
    private final RemoteNodes remote;
    private final FrameWriter writer;
    private final GroupCommit log;
    private final Merges merges;

    LeafWrites(DexEngine engine, SessionPath path, Markers markers, RemoteNodes remote, FrameWriter writer, GroupCommit log) {
        this.arena = engine.arena;
        this.path = path;
        this.markers = markers;
        this.remote = remote;
        this.writer = writer;
        this.log = log;
        this.merges = engine.merges;
    }

    /**
     * Applies write {@code op} (a {@link LeafOps} code) to the leaf at depth {@code d}.
     *
     * @param partition the partition whose log records it
     * @param logged    false while a log is replayed: nothing is recorded
     * @return 1 (the operation's result is true), 0 (false), or {@link #RESTART}; a full leaf that must take the
     *         key restarts (the descent splits it)
     */
    int apply(int d, long[] key, long newValue, int op, int partition, boolean logged) {
        NodeView leaf = path.viewAt[d];
        int f = path.frameAt[d];
        int pos = leaf.search(key);
        boolean present = pos >= 0;
        if (!LeafOps.changes(op, present)) {
            if (f != NO_FRAME && !arena.validate(f, path.versionAt[d])) {
                return RESTART;
            }
            // Its answer (present, or absent) rests on what the leaf holds, perhaps another batch's write not yet in the
            // log: a batch's commit waits for that as for a read's (GroupCommit#noteRead).
            log.noteRead(partition);
            return 0;
        }
        if (!present && leaf.isFull()) {
            return RESTART;
        }
        int result = LeafOps.result(op, present) ? 1 : 0;
        if (f != NO_FRAME) {
            if (!arena.tryUpgrade(f, path.versionAt[d])) {
                return RESTART;
            }
            if (arena.flag(f, SHARED)) {
                arena.unlock(f);
                throw new IllegalStateException("a shared leaf is cached: " + leaf);
            }
            LeafOps.apply(leaf, pos, op, key, newValue);
            writer.markDirty(f);
            tookEffect(partition, leaf, key, newValue, op, logged);
            arena.unlock(f);
            return result;
        }
        long address = leaf.address();
        if (path.sharedAt[d]) {
            long version = leaf.version();
            if (remote.lock(address, version) != RemoteNodes.LOCKED) {
                return RESTART;
            }
            try {
                LeafOps.apply(leaf, pos, op, key, newValue);
                remote.writeLocked(address, leaf, version + 1);
                tookEffect(partition, leaf, key, newValue, op, logged);
            } finally {
                // Also when the write failed (it may or may not have taken effect; either image is a whole node).
                remote.release(address);
            }
        } else {
            LeafOps.apply(leaf, pos, op, key, newValue);
            leaf.version(leaf.version() + 1);
            if (logged && log.canWriteBeside(partition, address)) {
                // The record first (its LSN, under the IO marker that orders the leaf's writes), then page and record
                // together: one round trip.
                record(partition, key, newValue, op, true);
                log.writeBeside(remote, address, leaf);
                noteDelete(partition, leaf, key, op);
            } else {
                remote.writeUnlocked(address, leaf);
                tookEffect(partition, leaf, key, newValue, op, logged);
            }
        }
        markers.releaseAll();
        return result;
    }

    /** A write to {@code leaf} took effect: it is recorded, and a leaf a delete left sparse is noted for a merge ({@link Merges}). */
    private void tookEffect(int partition, NodeView leaf, long[] key, long newValue, int op, boolean logged) {
        record(partition, key, newValue, op, logged);
        noteDelete(partition, leaf, key, op);
    }

    /** A delete that took effect notes its leaf for a merge if it left it sparse ({@link Merges}). */
    private void noteDelete(int partition, NodeView leaf, long[] key, int op) {
        if (op == LeafOps.DELETE) {
            merges.noteUnderfull(partition, leaf, key);
        }
    }

    /**
     * After the memory node ran write {@code op} offloaded ({@code found}: whether it found the key): a change is recorded
     * (the write's exclusion range and the missed node's marker, held until the operation ends, still order it with
     * other writes of its keys); no change is noted as a read, as in {@link #apply}.
     */
    void offloaded(int partition, long[] key, long newValue, int op, boolean found, boolean logged) {
        if (LeafOps.changes(op, found)) {
            record(partition, key, newValue, op, logged);
        } else {
            log.noteRead(partition);
        }
    }

    /** Records a write that has just taken effect, unless this is a replay ({@code logged} false). */
    void record(int partition, long[] key, long newValue, int op, boolean logged) {
        if (logged) {
            log.record(partition, key, newValue, op);
        }
    }
}
