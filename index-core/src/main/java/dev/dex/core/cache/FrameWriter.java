package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.DIRTY;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;

/**
 * Writes cached node images to remote memory with every swizzled child pointer turned back into the
 * child's global address (remote memory never holds a swizzled pointer), and keeps the dirty flag and
 * the engine's dirty count in step. One per thread; the caller holds the frame's write lock.
 */
final class FrameWriter {
    private final DexEngine engine;
    private final FrameArena arena;
    private final RemoteMemory memory;
    private final NodeView out;
    private final NodeView frameView;
    private final NodeView orphanView;
    private long pagesWritten;

    FrameWriter(DexEngine engine) {
        this.engine = engine;
        this.arena = engine.arena;
        this.memory = engine.memory;
        this.out = new NodeView(engine.keys).wrap(
                new UnsafeBuffer(BufferUtil.allocateDirectAligned(NodeHeaderDescriptor.NODE_LENGTH, 64)), 0);
        this.frameView = new NodeView(engine.keys);
        this.orphanView = new NodeView(engine.keys);
    }

    long pagesWritten() {
        return pagesWritten;
    }

    /** Writes {@code view} to {@code address}, unswizzled, with {@code lockWord} in word 0. */
    void write(long address, NodeView view, long lockWord) {
        unswizzledImage(view, lockWord);
        memory.write(address, out.buffer(), out.offset(), NodeHeaderDescriptor.NODE_LENGTH);
        pagesWritten++;
    }

    /** Puts {@code view}'s image into {@link #out}, with every swizzled child pointer turned into its address. */
    private void unswizzledImage(NodeView view, long lockWord) {
        out.copyFrom(view);
        out.lockWord(lockWord);
        if (!out.isLeaf()) {
            for (int i = 0, n = Math.min(out.count(), out.capacity()); i <= n; i++) {
                long child = out.child(i);
                if (GlobalAddress.isSwizzled(child)) {
                    out.child(i, arena.address((int) GlobalAddress.unswizzle(child)));
                }
            }
        }
    }

    /** Writes a locked dirty frame back (version bumped) and marks it clean. */
    void writeBack(int frame) {
        NodeView view = arena.wrap(frameView, frame);
        view.version(view.version() + 1);
        write(arena.address(frame), view, 0);
        markClean(frame);
    }

    /**
     * The first half of a batched write-back of a locked dirty frame: bumps its version, as {@link #writeBack} does, and
     * copies its unswizzled image to {@code dst[offset..]}. Once the batch's write of it succeeded, {@link #wroteBack}.
     */
    void stageWriteBack(int frame, org.agrona.MutableDirectBuffer dst, int offset) {
        NodeView view = arena.wrap(frameView, frame);
        view.version(view.version() + 1);
        unswizzledImage(view, 0);
        dst.putBytes(offset, out.buffer(), out.offset(), NodeHeaderDescriptor.NODE_LENGTH);
    }

    /** The second half: the locked frame's staged image was written; it is clean now. */
    void wroteBack(int frame) {
        pagesWritten++;
        markClean(frame);
    }

    void markDirty(int frame) {
        if (!arena.flag(frame, DIRTY)) {
            arena.flag(frame, DIRTY, true);
            engine.dirtyFrames.incrementAndGet();
        }
    }

    void markClean(int frame) {
        if (frame != NO_FRAME && arena.flag(frame, DIRTY)) {
            arena.flag(frame, DIRTY, false);
            engine.dirtyFrames.decrementAndGet();
        }
    }

    /**
     * Turns swizzled pointers of the locked {@code inner} into addresses; their frames lose their parent and become
     * escapes ({@link OffloadExclusion}).
     */
    void orphanChildren(NodeView inner) {
        if (inner.isLeaf()) {
            return;
        }
        for (int i = 0, n = Math.min(inner.count(), inner.capacity()); i <= n; i++) {
            long pointer = inner.child(i);
            if (GlobalAddress.isSwizzled(pointer)) {
                int child = (int) GlobalAddress.unswizzle(pointer);
                orphaned(child); // while it still hangs below the locked parent: it cannot leave the cache meanwhile
                inner.child(i, arena.address(child));
                arena.parent(child, NO_FRAME);
            }
        }
    }

    /**
     * Frame {@code child} loses its cached parent, whose lock this thread holds: it is an escape from now on. Called
     * before the child is unswizzled and its parent cleared, so that it cannot leave the cache meanwhile (a frame
     * with a cached parent is cooled and evicted only through that parent); its low fence and level do not change
     * while it caches the same node.
     */
    void orphaned(int child) {
        NodeView view = arena.wrap(orphanView, child);
        engine.exclusion.enterOrphan(child, view);
    }

    /** Index of the slot of {@code parent}'s image that holds a swizzled pointer to {@code child}, or -1. */
    int findSwizzled(int parent, int child) {
        NodeView view = arena.wrap(frameView, parent);
        if (view.isLeaf()) {
            return -1;
        }
        long pointer = GlobalAddress.swizzle(child);
        for (int i = 0, n = Math.min(view.count(), view.capacity()); i <= n; i++) {
            if (view.child(i) == pointer) {
                return i;
            }
        }
        return -1;
    }

    /** Replaces slot {@code slot} of {@code parent}'s image by {@code address} (unswizzles it). */
    void unswizzle(int parent, int slot, long address) {
        arena.wrap(frameView, parent).child(slot, address);
    }
}
