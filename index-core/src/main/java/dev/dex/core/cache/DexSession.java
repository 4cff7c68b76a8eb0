package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;

import java.util.SplittableRandom;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.engine.WordKeySession;
import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.core.tree.RestartBudget;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.GlobalAddress;

/**
 * One thread's operations on a {@link DexEngine}: the point operations and scans, and the descent, optimistic
 * lock coupling over cached frames (paper Algorithm 1). Its collaborators, each one session's own: the path and
 * its latches ({@link SessionPath}), the IO markers ({@link Markers}), misses resolved, read and admitted
 * ({@link Admission}), free frames with cooling and eviction ({@link FrameSupply}), splits and the refresh of
 * stale shared nodes ({@link StructureChanges}), the write at the leaf ({@link LeafWrites}), offloading
 * ({@link Offloader}), group commit ({@link GroupCommit}) and statistics ({@link SessionCounters}).
 *
 * <p>The path of the current operation is kept per depth: either a frame with the version read from its
 * lock ({@code path.frameAt[d] >= 0}), or an uncached image in this session's scratch buffer. Every decision
 * taken from a frame's image is validated against its version before it has an effect; any failed
 * validation, lost try-lock or IO marker restarts the operation from the root.
 *
 * <p>Concurrency: not thread-safe: one session per thread, and so are its collaborators. What it shares with
 * other sessions it takes by the frames' optimistic version locks, the mapping table's IO markers and the
 * engine's partition counts (see HeldPartitions). Allocation-free on the hot path.
 */
public final class DexSession extends WordKeySession {
    private static final int RESTART = -1;
    private static final int H = TreeSettings.MAX_HEIGHT;

    private final DexEngine engine;
    private final FrameArena arena;

    /** The current operation's path and the latches on its nodes. */
    private final SessionPath path;
    /** Splits, root splits and the refresh of stale shared nodes on the current path. */
    private final StructureChanges changes;
    /** What a miss or a frame found in the mapping table puts into the cache, and how it is linked in. */
    private final Admission admission;
    /** The write at the end of the path, and its record for the redo log. */
    private final LeafWrites leafWrites;
    /** This session's remote side: validated reads, remote locks. */
    private final RemoteNodes remote;
    /** The IO markers this thread holds (paper's I/O flags), released when the operation ends or restarts. */
    private final Markers markers;
    /** This thread's free frames, and the cooling and eviction that refill them. */
    private final FrameSupply frames;
    private long value;
    private final SessionCounters counters = new SessionCounters();
    /** The current operation's key (the caller's array, or a cut copy), a scan's next key and where its part ends. */
    private long[] opKey;
    private final long[] scanKey;
    private final long[] scanStop;
    /** Offloading of misses to the memory side (paper §6), with its cost model. */
    private final Offloader offloader;
    /** The operation in progress, for offloading: a LeafOps code, or Admission.NO_OFFLOAD. */
    private int opCode;
    private long opValue;
    /** The key the current descent searches for: {@link #opKey}, or a scan's next key. */
    private long[] descendKey;
    /** The key of this session's descent, for other sessions' offloaded writes. */
    private final PublishedKey activeKey;

    private final RestartBudget budget = new RestartBudget("a lock is held and never released");

    /** The partition of the lookup or write in progress. */
    private int opPartition;
    /** Set on the session that replays a log while its partition is acquired: it enters and does not log. */
    private boolean recovering;

    /** Makes this the session that replays a log: see {@link #recovering} and {@link Admission#admitEveryLeaf}. */
    void recover() {
        recovering = true;
        admission.admitEveryLeaf();
    }
    /** This session's records of writes on their way to their partitions' redo logs (group commit). */
    private final GroupCommit log;

    DexSession(DexEngine engine, long tag) {
        super(engine.keys.words());
        this.engine = engine;
        this.arena = engine.arena;
        this.scanKey = new long[words];
        this.scanStop = new long[words];
        this.remote = new RemoteNodes(engine.memory, tag, engine::lockHolderGone, engine.pendingUnlocks);
        FrameWriter writer = new FrameWriter(engine);
        SplittableRandom random = new SplittableRandom(tag * 0x9E3779B97F4A7C15L);
        this.frames = new FrameSupply(engine, writer, random, counters::count);
        this.markers = new Markers(engine.mapping, engine.exclusion, H + 4);
        this.offloader = new Offloader(engine, this, markers, random, counters::count);
        this.activeKey = new PublishedKey(engine.offloadChannel != null, engine.keys);
        this.log = new GroupCommit(engine, markers);
        this.path = new SessionPath(engine, markers, remote);
        this.changes = new StructureChanges(engine, path, remote, writer, counters::count);
        this.admission = new Admission(engine, path, markers, frames, writer, remote, offloader, random, counters::count, changes);
        this.leafWrites = new LeafWrites(engine, path, markers, remote, writer, log);
    }

    // ==== operations ======================================================================================

    @Override
    public boolean lookup(long[] userKey) {
        long[] key = opKey = checkedKey(engine.keys, userKey);
        int partition = opPartition = engine.held.enter(key);
        try {
            beginOp(LeafOps.LOOKUP, 0);
            while (true) {
                int d = descend(key, false, false);
                if (d == Admission.OFFLOADED) {
                    if (offloader.found()) {
                        value = offloader.value();
                    }
                    return offloader.found();
                }
                if (d != RESTART) {
                    NodeView leaf = path.viewAt[d];
                    int pos = leaf.search(key);
                    long found = pos >= 0 ? leaf.value(pos) : 0;
                    if (path.frameAt[d] == NO_FRAME || arena.validate(path.frameAt[d], path.versionAt[d])) {
                        value = pos >= 0 ? found : value;
                        return pos >= 0;
                    }
                }
                restart();
            }
        } finally {
            markers.releaseAll();
            activeKey.clear();
            log.noteRead(partition);
            engine.held.exit(partition);
        }
    }

    @Override
    public long value() {
        return value;
    }

    @Override
    public int scan(long[] startKey, int count, long[] keys, long[] values) {
        long[] key = scanKey;
        startScan(startKey, count, keys, values, key);
        int partition = engine.held.enter(key);
        int n = 0;
        try {
            beginOp(Admission.NO_OFFLOAD, 0);
            while (n < count) {
                int p = engine.partitions.partitionOf(key);
                if (p != partition && onePartition) {
                    break;
                }
                if (p != partition) {
                    // A batch's commit waits for the writes this part may have read, as for every partition it reads.
                    log.noteRead(partition);
                    engine.held.exit(partition);
                    partition = -1;
                    if (!engine.held.tryEnter(p, key)) {
                        int now = engine.partitions.partitionOf(key); // p merged away while the scan waited for it
                        if (now == p || !engine.held.tryEnter(now, key)) {
                            break;
                        }
                        p = now;
                    }
                    partition = p;
                }
                admission.prefetch.want(count - n, partition); // its next leaf is read with those after it
                int d = descend(key, false, false);
                if (d == RESTART) {
                    restart();
                    continue;
                }
                NodeView leaf = path.viewAt[d]; // it stops at the leaf's high fence or its partition's end, the first
                engine.partitions.upperInclusive(partition, scanStop, words);
                if (leaf.compareHighFence(scanStop) > 0) {
                    leaf.highFence(scanStop);
                }
                int m = LeafOps.copyRange(leaf, key, scanStop, keys, values, n, count);
                if (path.frameAt[d] != NO_FRAME && !arena.validate(path.frameAt[d], path.versionAt[d])) {
                    restart();
                    continue;
                }
                markers.releaseAll();
                n = m;
                if (engine.keys.isPosInfinity(scanStop, 0)) {
                    break;
                }
                admission.prefetch.ahead(path, d, count - n, partition); // the next leaves, read together
                System.arraycopy(scanStop, 0, key, 0, words);
                IndexSession.successor(key, words);
            }
            return n;
        } finally {
            admission.prefetch.clear();
            markers.releaseAll();
            activeKey.clear();
            if (partition >= 0) {
                log.noteRead(partition);
                engine.held.exit(partition);
            }
        }
    }

    /**
     * A descent of {@link DexEngine#warm} (its partition entered by the caller; {@code again} after a false): to the
     * node above the leaves over {@code key}, nothing offloaded, its high fence into {@code fence}; false: again.
     */
    boolean warmStep(long[] key, long[] fence, boolean again) {
        if (!again) { // as a scan's, its misses are never offloaded
            beginOp(Admission.NO_OFFLOAD, 0);
        }
        int d = descend(key, false, true);
        if (d != RESTART) {
            path.viewAt[d].highFence(fence);
        }
        boolean done = d != RESTART && (path.frameAt[d] == NO_FRAME || arena.validate(path.frameAt[d], path.versionAt[d]));
        if (!done) {
            restart();
        }
        markers.releaseAll();
        activeKey.clear();
        return done;
    }

    @Override
    public void close() {
        try {
            commit();
        } finally {
            engine.closed(this, markers);
        }
    }

    /** The key this session's operation descends to ({@link Offloader}). */
    PublishedKey activeKey() {
        return activeKey;
    }

    /** This session's statistics, which the engine sums and resets. */
    SessionCounters counters() {
        return counters;
    }

    /** This thread's free frames: given back to the engine on close, and listed by the validator. */
    FrameSupply frames() {
        return frames;
    }

    @Override
    protected boolean write(long[] userKey, long newValue, int op) {
        long[] key = opKey = checkedKey(engine.keys, userKey);
        int partition = opPartition = engine.held.enter(key, recovering);
        try {
            // A batch that moves to another partition (or whose partition was released meanwhile) commits what it
            // has so far: records of one commit go to one log. No lock is held here.
            log.commitIfElsewhere(partition);
            beginOp(op, newValue);
            while (true) {
                int d = descend(key, LeafOps.mayAdd(op), false);
                if (d == Admission.OFFLOADED) {
                    leafWrites.offloaded(partition, key, newValue, op, offloader.found(), !recovering);
                    log.afterWrite();
                    return LeafOps.result(op, offloader.found());
                }
                if (d != RESTART) {
                    int result = leafWrites.apply(d, key, newValue, op, partition, !recovering);
                    if (result != LeafWrites.RESTART) {
                        log.afterWrite();
                        return result == 1;
                    }
                }
                restart();
            }
        } finally {
            markers.releaseAll();
            activeKey.clear();
            engine.held.exit(partition);
            engine.merges.afterOp(partition);
        }
    }

    // ==== redo log =========================================================================================

    /** A batch's writes are acknowledged together by {@link #commit}: one fabric write to the partition's log. */
    @Override
    public void beginBatch() {
        log.beginBatch();
    }

    /** Returns once this session's writes are in their partition's redo log ({@link GroupCommit#commit}). */
    @Override
    public void commit() {
        log.commit();
    }

    // ==== traversal =======================================================================================

    /**
     * Fills the path from the root to the leaf covering {@code key}. With {@code splitFull}, the first
     * full node met is split (a leaf only if the key is absent) and the walk restarts. With {@code aboveLeaves}, it
     * ends at the node above the leaves instead.
     *
     * @return the leaf's depth (or that node's), or RESTART
     */
    private int descend(long[] key, boolean splitFull, boolean aboveLeaves) {
        descendKey = key;
        // Before anything of the descent is read: an offloaded write into a subtree this key lies in is not sent
        // while this operation may hold images of that subtree (OffloadExclusion, Offloader).
        activeKey.publish(key);
        if (!enterRoot()) {
            return RESTART;
        }
        for (int d = 0; d < H - 1; d++) {
            NodeView node = path.viewAt[d];
            int f = path.frameAt[d];
            boolean covers = node.covers(key);
            boolean leaf = node.isLeaf();
            boolean full = splitFull && node.isFull() && (!leaf || node.search(key) < 0);
            if (f != NO_FRAME && !arena.validate(f, path.versionAt[d])) {
                return RESTART;
            }
            if (!covers) {
                changes.fenceMismatch(d);
                return RESTART;
            }
            if (full) {
                changes.split(d);
                return RESTART;
            }
            if (leaf || aboveLeaves && node.level() == 1) {
                return d;
            }
            int index = node.childIndex(key);
            long child = node.child(index);
            if (f != NO_FRAME && !arena.validate(f, path.versionAt[d])) {
                return RESTART;
            }
            path.childIndexAt[d] = index;
            if (GlobalAddress.isSwizzled(child)) {
                int cf = (int) GlobalAddress.unswizzle(child);
                long cv = arena.readLock(cf);
                if (cv < 0 || !arena.validate(f, path.versionAt[d])) {
                    return RESTART;
                }
                path.setFrame(d + 1, cf, cv);
                counters.count(CacheStats.HITS);
            } else {
                int resolved = resolve(child, d + 1);
                if (resolved == Admission.RESOLVE_RESTART) {
                    return RESTART;
                }
                if (resolved == Admission.OFFLOADED) {
                    return Admission.OFFLOADED;
                }
            }
        }
        throw new IllegalStateException("tree deeper than " + H + " levels");
    }

    private boolean enterRoot() {
        int entered = admission.enterCachedRoot();
        if (entered == Admission.ROOT_NOT_CACHED) {
            return resolve(engine.rootAddress.get(), 0) == Admission.RESOLVE_SET;
        }
        if (entered == Admission.ROOT_SET) {
            counters.count(CacheStats.HITS);
            return true;
        }
        return false;
    }

    /** {@link Admission#resolve} for the operation in progress. */
    private int resolve(long address, int d) {
        return admission.resolve(address, d, opCode, opKey, opValue, opPartition, descendKey);
    }

    // ==== bookkeeping =====================================================================================

    private void beginOp(int op, long newValue) {
        budget.reset();
        opCode = op;
        opValue = newValue;
        offloader.begin();
        admission.begin();
    }

    private void restart() {
        markers.releaseAll();
        counters.count(CacheStats.RESTARTS);
        budget.backOff();
    }
}
