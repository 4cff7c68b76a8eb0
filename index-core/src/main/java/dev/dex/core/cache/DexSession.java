package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.HOT;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;
import static dev.dex.core.cache.FrameHeaderDescriptor.SHARED;
import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;
import static dev.dex.core.node.NodeHeaderDescriptor.checkKey;
import static dev.dex.core.node.NodeHeaderDescriptor.POS_INFINITY;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.SplittableRandom;

import org.agrona.collections.IntArrayList;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.node.LeafNodeDescriptor;
import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.core.tree.RestartBudget;
import dev.dex.core.tree.TreeConfig;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;

/**
 * One thread's operations on a {@link DexEngine}: the point operations and scans, optimistic lock coupling
 * over cached frames (paper Algorithm 1), and the decision how a cache miss is resolved. Its collaborators, each
 * one session's own: the path and its latches ({@link SessionPath}), the IO markers ({@link Markers}), misses
 * read and admitted ({@link Admission}), free frames with cooling and eviction ({@link FrameSupply}), splits and
 * the refresh of stale shared nodes ({@link StructureChanges}), offloading ({@link Offloader}) and group commit
 * ({@link GroupCommit}).
 *
 * <p>The path of the current operation is kept per depth: either a frame with the version read from its
 * lock ({@code frameAt[d] >= 0}), or an uncached image in this session's scratch buffer. Every decision
 * taken from a frame's image is validated against its version before it has an effect; any failed
 * validation, lost try-lock or IO marker restarts the operation from the root.
 *
 * <p>Concurrency: not thread-safe: one session per thread, and so are its collaborators. What it shares with
 * other sessions it takes by the frames' optimistic version locks, the mapping table's IO markers and the
 * engine's partition counts (see DexEngine). Allocation-free on the hot path.
 */
public final class DexSession implements IndexSession {
    private static final int RESTART = -1;
    /** {@link #descend} outcome: the operation was completed by offloading; see {@link Offloader#found}. */
    private static final int OFFLOADED = -2;
    /** {@link #resolve} outcomes. */
    private static final int RESOLVE_RESTART = 0;
    private static final int RESOLVE_SET = 1;
    private static final int OP_SCAN = -1;
    private static final int H = TreeConfig.MAX_HEIGHT;
    /** Counter slots, published with opaque stores: this session writes them, others only sum them. */
    private static final VarHandle COUNTERS = MethodHandles.arrayElementVarHandle(long[].class);

    private final DexEngine engine;
    private final FrameArena arena;
    private final MappingTable mapping;
    private final PartitionTable partitions;
    private final RemoteNodes remote;
    private final FrameWriter writer;

    /** The current operation's path and the latches on its nodes; the arrays below are its, by another name. */
    private final SessionPath path;
    private final int[] frameAt;
    private final long[] versionAt;
    private final boolean[] sharedAt;
    private final int[] childIndexAt;
    private final NodeView[] viewAt;
    /** Splits, root splits and the refresh of stale shared nodes on the current path. */
    private final StructureChanges changes;
    /** What a miss or a frame found in the mapping table puts into the cache, and how it is linked in. */
    private final Admission admission;

    /** The IO markers this thread holds (paper's I/O flags), released when the operation ends or restarts. */
    private final Markers markers;
    /** This thread's free frames, and the cooling and eviction that refill them. */
    private final FrameSupply frames;
    private final SplittableRandom random;

    private long value;
    private final long[] counters = new long[CacheStats.COUNTERS];

    /** Offloading of misses to the memory side (paper §6), with its cost model. */
    private final Offloader offloader;
    /** The operation in progress, for offloading: a LeafOps code, or OP_SCAN. */
    private int opCode;
    private long opKey;
    private long opValue;
    /** The key the current descent searches for. */
    private long descendKey;
    private final RestartBudget budget = new RestartBudget("a lock is held and never released");

    /** The partition of the lookup or write in progress. */
    private int opPartition;
    /** Set on the session that replays a log while its partition is acquired: it enters and does not log. */
    boolean recovering;
    /** This session's records of writes on their way to their partitions' redo logs (group commit). */
    private final GroupCommit log;

    DexSession(DexEngine engine, long tag) {
        this.engine = engine;
        this.arena = engine.arena;
        this.mapping = engine.mapping;
        this.partitions = engine.partitions;
        this.remote = new RemoteNodes(engine.memory, tag, engine::lockHolderGone);
        this.writer = new FrameWriter(engine);
        this.random = new SplittableRandom(tag * 0x9E3779B97F4A7C15L);
        this.frames = new FrameSupply(engine, writer, random, this::count);
        this.markers = new Markers(engine.mapping, H + 4);
        this.offloader = new Offloader(engine, markers, random, this::count);
        this.log = new GroupCommit(engine);
        this.path = new SessionPath(engine, markers, remote);
        this.frameAt = path.frameAt;
        this.versionAt = path.versionAt;
        this.sharedAt = path.sharedAt;
        this.childIndexAt = path.childIndexAt;
        this.viewAt = path.viewAt;
        this.changes = new StructureChanges(engine, path, remote, writer, this::count);
        this.admission = new Admission(engine, path, markers, frames, writer, remote, offloader, random, this::count);
    }

    // ==== operations ======================================================================================

    @Override
    public boolean lookup(long key) {
        checkKey(key);
        int partition = engine.enter(key);
        opPartition = partition;
        try {
            beginOp(LeafOps.LOOKUP, key, 0);
            while (true) {
                int d = descend(key, false);
                if (d == OFFLOADED) {
                    if (offloader.found()) {
                        value = offloader.value();
                    }
                    return offloader.found();
                }
                if (d != RESTART) {
                    NodeView leaf = viewAt[d];
                    int pos = leaf.search(key);
                    long found = pos >= 0 ? leaf.value(pos) : 0;
                    if (frameAt[d] == NO_FRAME || arena.validate(frameAt[d], versionAt[d])) {
                        if (pos >= 0) {
                            value = found;
                        }
                        return pos >= 0;
                    }
                }
                restart();
            }
        } finally {
            markers.releaseAll();
            noteRead(partition);
            engine.exit(partition);
        }
    }

    @Override
    public long value() {
        return value;
    }

    @Override
    public boolean insert(long key, long value) {
        return write(key, value, LeafOps.INSERT);
    }

    @Override
    public boolean update(long key, long value) {
        return write(key, value, LeafOps.UPDATE);
    }

    @Override
    public boolean put(long key, long value) {
        return write(key, value, LeafOps.PUT);
    }

    @Override
    public boolean delete(long key) {
        return write(key, 0, LeafOps.DELETE);
    }

    @Override
    public int scan(long startKey, int count, long[] keys, long[] values) {
        if (count < 0 || keys.length < count || values.length < count) {
            throw new IllegalArgumentException("scan of " + count + " entries needs arrays of at least that length");
        }
        long key = Math.max(startKey, NEG_INFINITY + 1);
        int partition = engine.enter(key);
        int first = partition;
        int n = 0;
        try {
            beginOp(OP_SCAN, key, 0);
            while (n < count) {
                int p = partitions.partitionOf(key);
                if (p != partition) {
                    engine.exit(partition);
                    partition = -1;
                    if (!engine.tryEnter(p)) {
                        break;
                    }
                    partition = p;
                }
                int d = descend(key, false);
                if (d == RESTART) {
                    restart();
                    continue;
                }
                NodeView leaf = viewAt[d];
                long stop = Math.min(leaf.highFence(), partitions.upperInclusive(partition));
                int pos = leaf.search(key);
                if (pos < 0) {
                    pos = -pos - 1;
                }
                int m = n;
                for (int c = Math.min(leaf.count(), LeafNodeDescriptor.CAPACITY); pos < c && m < count; pos++, m++) {
                    long k = leaf.key(pos);
                    if (k > stop) {
                        break;
                    }
                    keys[m] = k;
                    values[m] = leaf.value(pos);
                }
                if (frameAt[d] != NO_FRAME && !arena.validate(frameAt[d], versionAt[d])) {
                    restart();
                    continue;
                }
                markers.releaseAll();
                n = m;
                if (stop == POS_INFINITY) {
                    break;
                }
                key = stop + 1;
            }
            return n;
        } finally {
            markers.releaseAll();
            noteRead(first);
            if (partition >= 0) {
                engine.exit(partition);
            }
        }
    }

    @Override
    public void close() {
        try {
            commit();
        } finally {
            engine.closed(this);
        }
    }

    /** Operations restarted so far. */
    public long restarts() {
        return counter(CacheStats.RESTARTS);
    }

    long counter(int slot) {
        return (long) COUNTERS.getOpaque(counters, slot);
    }

    void resetStats() {
        // Racy by design: a reset while the session runs may lose a few counts of the current instant.
        for (int i = 0; i < counters.length; i++) {
            COUNTERS.setOpaque(counters, i, 0L);
        }
    }

    void count(int slot) {
        COUNTERS.setOpaque(counters, slot, counters[slot] + 1);
    }

    /** Gives this session's free frames back to the engine (on close). */
    void returnFreeFrames() {
        frames.returnAll();
    }

    IntArrayList freeFrames() {
        return frames.free();
    }

    private boolean write(long key, long newValue, int op) {
        checkKey(key);
        int partition = engine.enter(key, recovering);
        opPartition = partition;
        try {
            // A batch that moves to another partition (or whose partition was released meanwhile) commits what it
            // has so far: records of one commit go to one log. No lock is held here.
            log.commitIfElsewhere(partition);
            beginOp(op, key, newValue);
            while (true) {
                int d = descend(key, LeafOps.mayAdd(op));
                if (d == OFFLOADED) {
                    if (LeafOps.changes(op, offloader.found())) {
                        // The memory node applied it; the markers on its path still order it with other writes.
                        logged(key, newValue, op);
                    }
                    return committed(LeafOps.result(op, offloader.found()));
                }
                if (d != RESTART) {
                    int result = writeLeaf(d, key, newValue, op);
                    if (result != RESTART) {
                        return committed(result == 1);
                    }
                }
                restart();
            }
        } finally {
            markers.releaseAll();
            engine.exit(partition);
        }
    }

    /** Applies a write to the leaf at depth {@code d}: 1 = true, 0 = false, or RESTART. */
    private int writeLeaf(int d, long key, long newValue, int op) {
        NodeView leaf = viewAt[d];
        int f = frameAt[d];
        int pos = leaf.search(key);
        boolean present = pos >= 0;
        if (!LeafOps.changes(op, present)) {
            return f == NO_FRAME || arena.validate(f, versionAt[d]) ? 0 : RESTART;
        }
        if (!present && leaf.isFull()) {
            return RESTART;
        }
        int result = LeafOps.result(op, present) ? 1 : 0;
        if (f != NO_FRAME) {
            if (!arena.tryUpgrade(f, versionAt[d])) {
                return RESTART;
            }
            if (arena.flag(f, SHARED)) {
                arena.unlock(f);
                throw new IllegalStateException("a shared leaf is cached: " + leaf);
            }
            LeafOps.apply(leaf, pos, op, key, newValue);
            writer.markDirty(f);
            logged(key, newValue, op);
            arena.unlock(f);
            return result;
        }
        long address = leaf.address();
        if (sharedAt[d]) {
            long version = leaf.version();
            if (remote.lock(address, version) != RemoteNodes.LOCKED) {
                return RESTART;
            }
            LeafOps.apply(leaf, pos, op, key, newValue);
            remote.writeLocked(address, leaf, version + 1);
            logged(key, newValue, op);
            remote.unlock(address);
        } else {
            LeafOps.apply(leaf, pos, op, key, newValue);
            leaf.version(leaf.version() + 1);
            remote.writeUnlocked(address, leaf);
            logged(key, newValue, op);
        }
        markers.releaseAll();
        return result;
    }

    // ==== redo log =========================================================================================

    /**
     * Records a write that has just taken effect, while the lock that orders it with other writes of the
     * same key is still held ({@link GroupCommit#record}). Nothing when this is a replay.
     */
    private void logged(long key, long newValue, int op) {
        if (!recovering) {
            log.record(opPartition, key, newValue, op);
        }
    }

    private boolean committed(boolean result) {
        if (!log.batching()) {
            markers.releaseAll();
            // Still inside the operation (counted in its partition): a release waits for this commit.
            log.writePending(true);
        }
        return result;
    }

    /**
     * Starts a batch: the writes that follow are acknowledged together by {@link #commit}, which puts their
     * records in the partition's log with one fabric write (group commit). A batch writes one partition.
     */
    @Override
    public void beginBatch() {
        log.beginBatch();
    }

    /**
     * Ends a batch (or the current write outside one): returns once the records of this session's writes
     * are in their partition's redo log, so they survive a crash of this compute node ({@link GroupCommit#commit}).
     *
     * @throws IllegalStateException when the records could not be written: the writes are not durable
     */
    @Override
    public void commit() {
        log.commit();
    }

    /** Notes, inside a batch, that a read of it ran on {@code partition} ({@link GroupCommit#noteRead}). */
    private void noteRead(int partition) {
        if (log.batching() && !recovering) {
            log.noteRead(partition);
        }
    }

    // ==== traversal =======================================================================================

    /**
     * Fills the path from the root to the leaf covering {@code key}. With {@code splitFull}, the first
     * full node met is split (a leaf only if the key is absent) and the walk restarts.
     *
     * @return the leaf's depth, or RESTART
     */
    private int descend(long key, boolean splitFull) {
        descendKey = key;
        if (!enterRoot()) {
            return RESTART;
        }
        for (int d = 0; d < H - 1; d++) {
            NodeView node = viewAt[d];
            int f = frameAt[d];
            boolean covers = node.covers(key);
            boolean leaf = node.isLeaf();
            boolean full = splitFull && node.isFull() && (!leaf || node.search(key) < 0);
            if (f != NO_FRAME && !arena.validate(f, versionAt[d])) {
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
            if (leaf) {
                return d;
            }
            int index = node.childIndex(key);
            long child = node.child(index);
            if (f != NO_FRAME && !arena.validate(f, versionAt[d])) {
                return RESTART;
            }
            childIndexAt[d] = index;
            if (GlobalAddress.isSwizzled(child)) {
                int cf = (int) GlobalAddress.unswizzle(child);
                long cv = arena.readLock(cf);
                if (cv < 0 || !arena.validate(f, versionAt[d])) {
                    return RESTART;
                }
                path.setFrame(d + 1, cf, cv);
                hit();
            } else {
                int resolved = resolve(child, d + 1);
                if (resolved == RESOLVE_RESTART) {
                    return RESTART;
                }
                if (resolved == OFFLOADED) {
                    return OFFLOADED;
                }
            }
        }
        throw new IllegalStateException("tree deeper than " + H + " levels");
    }

    private boolean enterRoot() {
        int rf = engine.rootFrame.get();
        long root = engine.rootAddress.get();
        if (rf != NO_FRAME) {
            long v = arena.readLock(rf);
            if (v < 0) {
                return false;
            }
            boolean current = arena.address(rf) == root && arena.state(rf) == HOT;
            if (!arena.validate(rf, v)) {
                return false;
            }
            if (!current) {
                if (engine.rootFrame.compareAndSet(rf, NO_FRAME)) {
                    arena.unpin(rf);
                }
                return false;
            }
            path.setFrame(0, rf, v);
            hit();
            return true;
        }
        return resolve(root, 0) == RESOLVE_SET;
    }

    /**
     * Resolves an unswizzled pointer at depth {@code d}: a frame found in the mapping table (reheated or
     * swizzled when it can be), or a remote read under the node's IO marker followed by admission or by
     * use of the uncached image.
     *
     * @return RESOLVE_SET when depth {@code d} is set, RESOLVE_RESTART to restart, or OFFLOADED when
     *         the rest of the operation was offloaded
     */
    private int resolve(long address, int d) {
        long mapped = mapping.get(address);
        if (mapped == MappingTable.IO) {
            return RESOLVE_RESTART;
        }
        if (mapped >= 0) {
            return admission.useMapped((int) mapped, address, d) ? RESOLVE_SET : RESOLVE_RESTART;
        }
        boolean sharedGuess = d == 0 ? partitions.count() > 1 : path.childRangeShared(d - 1);
        int level = d == 0 ? -1 : viewAt[d - 1].level() - 1;
        if (d > 0 && frameAt[d - 1] != NO_FRAME && !arena.validate(frameAt[d - 1], versionAt[d - 1])) {
            return RESOLVE_RESTART;
        }
        miss();
        if (!sharedGuess && opCode != OP_SCAN && d > 0 && frameAt[d - 1] != NO_FRAME && offloader.eligible(level)
                && offloader.wants(level)) {
            return offloader.run(address, frameAt[d - 1], versionAt[d - 1], level, opCode, opKey, opValue, opPartition)
                    ? OFFLOADED : RESOLVE_RESTART;
        }
        return admission.miss(address, d, sharedGuess, descendKey) ? RESOLVE_SET : RESOLVE_RESTART;
    }

    // ==== bookkeeping =====================================================================================

    private void hit() {
        count(CacheStats.HITS);
    }

    private void miss() {
        count(CacheStats.MISSES);
    }

    private void beginOp(int op, long key, long newValue) {
        budget.reset();
        opCode = op;
        opKey = key;
        opValue = newValue;
        offloader.begin();
    }

    private void restart() {
        markers.releaseAll();
        count(CacheStats.RESTARTS);
        int n = budget.next();
        if (n > 2) {
            for (int i = 1 << Math.min(n, 8); i > 0; i--) {
                Thread.onSpinWait();
            }
            if (n > 16) {
                Thread.yield();
            }
        }
    }

    RemoteMemory memory() {
        return engine.memory;
    }
}
