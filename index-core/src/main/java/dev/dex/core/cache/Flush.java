package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.COOLING;
import static dev.dex.core.cache.FrameHeaderDescriptor.DIRTY;
import static dev.dex.core.cache.FrameHeaderDescriptor.FREE;
import static dev.dex.core.cache.FrameHeaderDescriptor.HOT;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.VerbBatch;

/**
 * Drops one partition's frames for a release (logical repartitioning): every cached node whose fence
 * range lies in the partition is written back if dirty, unswizzled from its parent, removed from the
 * mapping table and the cooling map, and returned to the free frames. Frames go leaves first, then level
 * by level upward, so a node's cached children are gone before the node itself is written.
 *
 * <p>Runs after the partition's operations have drained; other threads may still try-lock these frames
 * (to cool them), so locks are taken with retries, parent before child, never waiting while holding one.
 *
 * <p>A write-back that fails throws out of the flush with every lock released; the frame stays cached and dirty, so
 * a later flush (a release tries again, DexEngine.writeBackAndDrop) writes it. A flush that finds a frame locked
 * waits for it: every lock holder releases on every path, also when its verb fails.
 */
final class Flush {
    private final DexEngine engine;
    private final FrameArena arena;
    private final FrameWriter writer;
    private final NodeView view;

    /** Whether dropped dirty frames are written back (a release) or discarded (an abandon). */
    private final boolean writeBack;
    /** Dirty frames dropped without being written back. */
    private long discardedDirty;

    /** Pages written back in one batch. */
    static final int BATCH = 32;
    private final VerbBatch batch = new VerbBatch(BATCH);
    /** The staged images of a batched write-back, allocated at the first dirty frame. */
    private UnsafeBuffer staging;
    private final int[] stagedFrames = new int[BATCH];
    private int staged;

    Flush(DexEngine engine) {
        this(engine, true);
    }

    Flush(DexEngine engine, boolean writeBack) {
        this.engine = engine;
        this.arena = engine.arena;
        this.view = new NodeView(engine.keys);
        this.writer = new FrameWriter(engine);
        this.writeBack = writeBack;
    }

    /**
     * Drops every frame of a node inside {@code partition}. Scans again after dropping until a scan finds
     * none: no new frame of the partition is admitted meanwhile (its operations have drained and others
     * only admit nodes covering their own keys), so the scans end. (One way a frame can still come to lie in the
     * partition meanwhile: another partition's operation splits a cached node that spans both, and the half left
     * in place lies in this one. A scan that passed that frame before misses it, as it always did; the cached copy
     * is then another partition's node to this engine, read only, and the next acquire of the partition drops it.)
     *
     * @return {pages written, frames dropped}
     */
    long[] dropPartition(int partition) {
        // A partition whose cache failed is dropped unwritten, also by a release (DexEngine.cacheFailed).
        boolean write = writeBack && !engine.held.poisoned(partition);
        long dropped = 0;
        while (true) {
            List<long[]> victims = collect(partition);
            if (victims.isEmpty()) {
                return new long[] {writer.pagesWritten(), dropped};
            }
            victims.sort(Comparator.comparingLong(a -> a[0]));
            for (long[] victim : victims) {
                if (drop((int) victim[1], victim[2], write)) {
                    dropped++;
                }
            }
        }
    }

    /**
     * Writes back every dirty frame of a node inside {@code partition} and keeps it cached (a checkpoint).
     * Operations may run meanwhile: each frame is locked while written, and a frame dirtied after the scan
     * passed it holds only writes newer than the checkpoint being taken.
     *
     * <p>The pages go {@value #BATCH} at a time in one {@link VerbBatch} (their round trips overlap): each frame is
     * locked, its image staged with its version bumped, and the batch written; a frame whose write succeeded is marked
     * clean, and every frame of the batch is unlocked before a failure is thrown (those frames stay dirty, for the next
     * write-back). A frame found locked is waited for only once the frames this flush holds are written and unlocked,
     * so a flush never waits while it holds a lock.
     *
     * @return pages written
     */
    long writeBackPartition(int partition) {
        long before = writer.pagesWritten();
        try {
            for (int f = 0; f < arena.frames(); f++) {
                if (!mayLieIn(f, partition) || !arena.flag(f, DIRTY)) {
                    continue;
                }
                if (!arena.tryLock(f)) {
                    writeStaged();
                    lockWaiting(f);
                }
                if (stage(f, partition) && staged == BATCH) {
                    writeStaged();
                }
            }
            writeStaged();
        } finally {
            unlockStaged(); // only after a throw: an unexpected one, with frames still staged
        }
        return writer.pagesWritten() - before;
    }

    /**
     * Stages the locked frame {@code f} if it is a dirty page of {@code partition} that may be written back, else unlocks
     * it; it is unlocked too if staging throws.
     *
     * @return whether it was staged (it stays locked until its batch is written)
     */
    private boolean stage(int f, int partition) {
        try {
            int state = arena.state(f);
            NodeView node = arena.wrap(view, f);
            if ((state == HOT || state == COOLING) && arena.flag(f, DIRTY) && engine.partitions.ownerOf(node) == partition
                    && engine.held.mayWriteBack(node)) {
                if (staging == null) {
                    staging = new UnsafeBuffer(new byte[BATCH * NodeHeaderDescriptor.NODE_LENGTH]);
                }
                writer.stageWriteBack(f, staging, staged * NodeHeaderDescriptor.NODE_LENGTH);
                stagedFrames[staged++] = f;
                return true;
            }
        } catch (RuntimeException | Error e) {
            arena.unlock(f);
            throw e;
        }
        arena.unlock(f);
        return false;
    }

    /** Writes the staged frames in one batch, marks those written clean and unlocks them all; throws a failure after. */
    private void writeStaged() {
        if (staged == 0) {
            return;
        }
        batch.clear();
        for (int i = 0; i < staged; i++) {
            batch.write(arena.address(stagedFrames[i]), staging, i * NodeHeaderDescriptor.NODE_LENGTH, NodeHeaderDescriptor.NODE_LENGTH);
        }
        try {
            engine.memory.submit(batch);
            for (int i = 0; i < staged; i++) {
                if (batch.failure(i) == null) {
                    writer.wroteBack(stagedFrames[i]);
                }
            }
        } finally {
            unlockStaged();
        }
        batch.throwIfFailed();
    }

    private void unlockStaged() {
        for (int i = 0; i < staged; i++) {
            arena.unlock(stagedFrames[i]);
        }
        staged = 0;
    }

    /** Takes frame {@code f}'s lock, waiting for its holder (an operation, for the length of a remote verb at most). */
    private void lockWaiting(int f) {
        for (int spins = 0; !arena.tryLock(f); spins++) {
            // Do not burn a core meanwhile.
            if (spins < 64) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    /**
     * Writes the frame caching the node at {@code address} back, if there is one and it is dirty, and keeps it cached
     * (a merge pass reads the node from remote memory next).
     *
     * @throws dev.dex.rdma.FabricException when the write-back fails (the frame stays, dirty)
     */
    void writeBackNode(long address) {
        long mapped = engine.mapping.get(address);
        if (mapped < 0) {
            return;
        }
        int f = (int) mapped;
        lockWaiting(f);
        try {
            int state = arena.state(f);
            if (arena.address(f) == address && (state == HOT || state == COOLING) && arena.flag(f, DIRTY)) {
                writer.writeBack(f);
            }
        } finally {
            arena.unlock(f);
        }
    }

    /**
     * Drops the frame caching the node at {@code address}, if any, written back first when dirty: a merge pass
     * ({@link Merges}) does so for the nodes it rewrites, in a paused partition. Its cached children lose their parent.
     *
     * @return whether a frame was dropped
     * @throws dev.dex.rdma.FabricException when the write-back fails (the frame stays, dirty)
     */
    boolean dropNode(long address) {
        long f = engine.mapping.get(address);
        return f >= 0 && drop((int) f, address, writeBack);
    }

    /**
     * Drops the cached nodes at levels 1 and 2 that span partitions and overlap {@code partition}: a merge of the
     * partition's leaves or level-1 nodes ({@link Merges}) may have made such an image stale in a way no fence shows,
     * by moving a child's entries to its left sibling (docs/merges.md). Their cached children lose their parent.
     *
     * @return frames dropped
     */
    long dropSpanningParents(int partition) {
        long[] low = new long[engine.keys.words()];
        long[] high = new long[engine.keys.words()];
        engine.partitions.lowerExclusive(partition, low, low.length);
        engine.partitions.upperInclusive(partition, high, high.length);
        long dropped = 0;
        for (int f = 0; f < arena.frames(); f++) {
            if (arena.ownerHint(f) != FrameArena.SPANS) {
                continue;
            }
            long v = waitUnlocked(f);
            int state = arena.state(f);
            NodeView node = arena.wrap(view, f);
            // (low, high] and the node's (lo, hi] overlap when lo < high and hi > low.
            int level = node.level();
            boolean overlaps = level >= 1 && level <= 2 && node.compareLowFence(high) > 0 && node.compareHighFence(low) < 0;
            long address = arena.address(f);
            if (arena.validate(f, v) && (state == HOT || state == COOLING) && overlaps && drop(f, address, false)) {
                dropped++;
            }
        }
        return dropped;
    }

    /** Frames of nodes inside {@code partition}, as {level, frame, address}; each read is retried until valid. */
    private List<long[]> collect(int partition) {
        List<long[]> victims = new ArrayList<>();
        for (int f = 0; f < arena.frames(); f++) {
            if (!mayLieIn(f, partition)) {
                continue;
            }
            while (true) {
                long v = waitUnlocked(f);
                int state = arena.state(f);
                NodeView node = arena.wrap(view, f);
                int owner = engine.partitions.ownerOf(node);
                int level = node.level();
                long address = arena.address(f);
                if (!arena.validate(f, v)) {
                    continue;
                }
                if ((state == HOT || state == COOLING) && owner == partition) {
                    victims.add(new long[] {level, f, address});
                }
                break;
            }
        }
        return victims;
    }

    /**
     * Whether frame {@code f} may cache a node inside {@code partition}, by its {@link FrameArena#ownerHint} alone: the
     * scans of a release skip the other frames without touching them (a cache of 64 MiB has 60,000 frames, and reading
     * each frame's header and fences cost a release 150-300 ms under load; the hints are an array of ints). A frame
     * admitted into the partition since the hint was read cannot be missed: the partition's operations have drained
     * before a release scans, and no other partition's operation admits a node inside this one (see
     * {@link FrameArena#ownerHint} for why a hint stays good, and {@link #dropPartition} for the one way a frame comes
     * to lie in the partition otherwise).
     */
    private boolean mayLieIn(int f, int partition) {
        int hint = arena.ownerHint(f);
        return hint == partition || hint == FrameArena.SPANS;
    }

    /** Dirty frames this flush dropped without writing them back. */
    long discardedDirty() {
        return discardedDirty;
    }

    private boolean drop(int frame, long address, boolean writeBack) {
        int parent;
        while (true) {
            parent = arena.parent(frame);
            if (parent != NO_FRAME && !arena.tryLock(parent)) {
                Thread.onSpinWait();
                continue;
            }
            if (!arena.tryLock(frame)) {
                if (parent != NO_FRAME) {
                    arena.unlock(parent);
                }
                Thread.onSpinWait();
                continue;
            }
            if (arena.parent(frame) != parent) {
                arena.unlock(frame);
                if (parent != NO_FRAME) {
                    arena.unlock(parent);
                }
                continue;
            }
            break;
        }
        try {
            int state = arena.state(frame);
            if (arena.address(frame) != address || state == FREE) {
                return false;
            }
            if (state == COOLING) {
                int bucket = engine.cooling.bucketOf(address);
                synchronized (engine.cooling.monitor(bucket)) {
                    engine.cooling.remove(bucket, frame);
                }
            }
            NodeView node = arena.wrap(view, frame);
            // Children lie in the same partition and go first (lower levels first); one that is still
            // swizzled here was cached after the scan: orphan it, the rescan drops it.
            writer.orphanChildren(node);
            if (arena.flag(frame, DIRTY)) {
                if (writeBack) {
                    writer.writeBack(frame);
                } else {
                    writer.markClean(frame);
                    discardedDirty++;
                }
            }
            if (parent != NO_FRAME) {
                int slot = writer.findSwizzled(parent, frame);
                if (slot >= 0) {
                    writer.unswizzle(parent, slot, address);
                }
            }
            if (engine.rootFrame.compareAndSet(frame, NO_FRAME)) {
                arena.unpin(frame);
            }
            engine.mapping.remove(address, frame);
            engine.exclusion.leaveFrame(frame);
            arena.reset(frame);
        } finally {
            arena.unlock(frame);
            if (parent != NO_FRAME) {
                arena.unlock(parent);
            }
        }
        engine.returnFrame(frame);
        engine.closedCounters.incrementAndGet(CacheStats.DROPS);
        return true;
    }

    private long waitUnlocked(int frame) {
        long v;
        while ((v = arena.readLock(frame)) < 0) {
            Thread.onSpinWait();
        }
        return v;
    }
}
