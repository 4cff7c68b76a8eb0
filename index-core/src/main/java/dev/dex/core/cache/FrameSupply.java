package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.COOLING;
import static dev.dex.core.cache.FrameHeaderDescriptor.DIRTY;
import static dev.dex.core.cache.FrameHeaderDescriptor.HOT;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;

import java.util.SplittableRandom;
import java.util.function.IntConsumer;

import org.agrona.collections.IntArrayList;

import dev.dex.core.node.NodeView;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;

/**
 * One session's supply of free frames (paper §5.2, §5.3): its own free list first, then the engine's unused or
 * released frames, then cooling and eviction. Cooling is path-aware: a sampled frame delegates down through its
 * swizzled children to one that has none, which is unswizzled from its parent, written back if dirty and put in
 * the cooling map; eviction takes the head of a cooling bucket, writes it back if dirty and drops it from the
 * mapping table.
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession}, so by one thread; its free list is that thread's alone. What it
 * touches that other threads share follows their rules: a frame is cooled with its parent's and its own write
 * locks held (parent first, both try-locks, so it never waits for a lock while holding one), and only if it is
 * unpinned (the parent of an offload in flight is pinned); a cooling bucket is changed only under its monitor,
 * and a frame is evicted only under its bucket's monitor with its write lock held and while still COOLING and
 * unpinned. A dirty frame is written back before it leaves its parent or the mapping table, so no reader can
 * miss on a node whose remote image is older than the cache's. Every lock taken is released in a {@code finally}:
 * a write-back that fails throws with the frame unchanged (still cached, dirty and reachable), and a later cooling
 * or eviction tries it again.
 * </pre>
 */
final class FrameSupply {
    private static final int H = TreeSettings.MAX_HEIGHT;

    private final DexEngine engine;
    private final FrameArena arena;
    private final MappingTable mapping;
    private final CoolingMap cooling;
    private final FrameWriter writer;
    private final SplittableRandom random;
    /** Counts coolings and evictions in the session's statistics. */
    private final IntConsumer counts;
    private final NodeView sampleView;
    private final IntArrayList free = new IntArrayList();

    FrameSupply(DexEngine engine, FrameWriter writer, SplittableRandom random, IntConsumer counts) {
        this.engine = engine;
        this.arena = engine.arena;
        this.mapping = engine.mapping;
        this.cooling = engine.cooling;
        this.writer = writer;
        this.random = random;
        this.counts = counts;
        this.sampleView = new NodeView(engine.keys);
    }

    /** This session's free frames. */
    IntArrayList free() {
        return free;
    }

    /** Takes back a free frame this session had taken and did not use. */
    void giveBack(int f) {
        free.addInt(f);
    }

    /** Gives every free frame of this session back to the engine (the session closes). */
    void returnAll() {
        for (int i = 0; i < free.size(); i++) {
            engine.returnFrame(free.getInt(i));
        }
        free.clear();
    }

    /**
     * A free frame for this thread, cooling and evicting as needed; NO_FRAME when none can be had, also when the
     * write-back of a frame to cool or evict failed (the caller then works uncached).
     */
    int allocate() {
        if (arena.frames() == 0) {
            return NO_FRAME;
        }
        if (!free.isEmpty()) {
            return free.removeAt(free.size() - 1);
        }
        int f = engine.takeFreeFrame();
        if (f != NO_FRAME) {
            return f;
        }
        for (int attempt = 0; attempt < 8; attempt++) {
            try {
                if (cooling.size() < engine.coolingTarget) {
                    coolSample();
                    coolSample();
                }
                if (!free.isEmpty()) {
                    return free.removeAt(free.size() - 1);
                }
                f = evictFromCooling();
            } catch (FabricException writeBackFailed) {
                // That frame stays cached and dirty (written back later); this operation goes on without a frame
                // rather than fail for a page it does not use. The engine's health sees the failed write.
                return NO_FRAME;
            }
            if (f != NO_FRAME) {
                return f;
            }
        }
        return NO_FRAME;
    }

    /** Samples a random frame and cools the end of its cached path (path-aware delegation). */
    private void coolSample() {
        int f = random.nextInt(arena.frames());
        for (int hop = 0; hop < H; hop++) {
            long v = arena.readLock(f);
            if (v < 0 || arena.state(f) != HOT || arena.pins(f) > 0) {
                return;
            }
            NodeView view = arena.wrap(sampleView, f);
            int child = view.isLeaf() ? NO_FRAME : anySwizzledChild(view);
            if (!arena.validate(f, v)) {
                return;
            }
            if (child == NO_FRAME) {
                tryCool(f, v);
                return;
            }
            f = child;
        }
    }

    private int anySwizzledChild(NodeView inner) {
        int n = Math.min(inner.count(), inner.capacity()) + 1;
        int start = random.nextInt(n);
        for (int i = 0; i < n; i++) {
            long pointer = inner.child((start + i) % n);
            if (GlobalAddress.isSwizzled(pointer)) {
                return (int) GlobalAddress.unswizzle(pointer);
            }
        }
        return NO_FRAME;
    }

    /** Unswizzles frame {@code f} from its parent, writes it back if dirty, and puts it in the cooling map. */
    private void tryCool(int f, long v) {
        long address = arena.address(f);
        int parent = arena.parent(f);
        if (!arena.validate(f, v)) {
            return;
        }
        int bucket = cooling.bucketOf(address);
        synchronized (cooling.monitor(bucket)) {
            if (cooling.isFull(bucket)) {
                int head = cooling.head(bucket);
                if (!evictFrame(head)) {
                    return;
                }
                cooling.removeHead(bucket);
                free.addInt(head);
            }
            if (parent != NO_FRAME && !arena.tryLock(parent)) {
                return;
            }
            if (!arena.tryUpgrade(f, v)) {
                if (parent != NO_FRAME) {
                    arena.unlock(parent);
                }
                return;
            }
            try {
                if (arena.pins(f) > 0) {
                    // Pinned since it was sampled (the parent of an offload in flight): not a candidate.
                    return;
                }
                int slot = parent == NO_FRAME ? -1 : writer.findSwizzled(parent, f);
                if (parent == NO_FRAME || slot >= 0) {
                    if (arena.flag(f, DIRTY)) {
                        if (!engine.held.mayWriteBack(arena.wrap(sampleView, f))) {
                            return; // its partition's cache failed: dropped unwritten when the partition is given up
                        }
                        // Throws with the frame still HOT, dirty and swizzled: nothing changed, a later cooling retries.
                        writer.writeBack(f);
                    }
                    if (slot >= 0) {
                        writer.unswizzle(parent, slot, address);
                    }
                    arena.state(f, COOLING);
                    arena.parent(f, NO_FRAME);
                    cooling.append(bucket, f);
                    counts.accept(CacheStats.COOLINGS);
                }
            } finally {
                arena.unlock(f);
                if (parent != NO_FRAME) {
                    arena.unlock(parent);
                }
            }
        }
    }

    /** Evicts the cooling frame {@code f}; the caller holds its bucket's monitor. */
    private boolean evictFrame(int f) {
        if (!arena.tryLock(f)) {
            return false;
        }
        try {
            if (arena.state(f) != COOLING || arena.pins(f) > 0) {
                return false;
            }
            if (arena.flag(f, DIRTY)) {
                if (!engine.held.mayWriteBack(arena.wrap(sampleView, f))) {
                    return false;
                }
                // Throws with the frame still COOLING and dirty at the head of its bucket: a later eviction retries.
                writer.writeBack(f);
            }
            mapping.remove(arena.address(f), f);
            engine.exclusion.leaveFrame(f);
            arena.reset(f);
        } finally {
            arena.unlock(f);
        }
        counts.accept(CacheStats.EVICTIONS);
        return true;
    }

    private int evictFromCooling() {
        int buckets = cooling.buckets();
        int start = random.nextInt(buckets);
        for (int i = 0; i < Math.min(8, buckets); i++) {
            int bucket = (start + i) % buckets;
            synchronized (cooling.monitor(bucket)) {
                if (cooling.count(bucket) > 0) {
                    int head = cooling.head(bucket);
                    if (evictFrame(head)) {
                        cooling.removeHead(bucket);
                        return head;
                    }
                }
            }
        }
        return NO_FRAME;
    }

    /** Locks a free frame this thread owns; only coolers may hold it, briefly. */
    void lockFree(int f) {
        while (!arena.tryLock(f)) {
            Thread.onSpinWait();
        }
    }
}
