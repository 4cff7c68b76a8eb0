package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.ADDRESS_OFFSET;
import static dev.dex.core.cache.FrameHeaderDescriptor.FLAGS_OFFSET;
import static dev.dex.core.cache.FrameHeaderDescriptor.FRAME_LENGTH;
import static dev.dex.core.cache.FrameHeaderDescriptor.IMAGE_OFFSET;
import static dev.dex.core.cache.FrameHeaderDescriptor.LOCKED;
import static dev.dex.core.cache.FrameHeaderDescriptor.PARENT_OFFSET;
import static dev.dex.core.cache.FrameHeaderDescriptor.PINS_OFFSET;
import static dev.dex.core.cache.FrameHeaderDescriptor.STATE_OFFSET;
import static dev.dex.core.cache.FrameHeaderDescriptor.VERSION_LOCK_OFFSET;

import java.lang.invoke.VarHandle;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeView;
import dev.dex.rdma.GlobalAddress;

/**
 * The off-heap frames of one compute node's cache, sized in bytes: {@code bytes / 1088} frames of a
 * {@link FrameHeaderDescriptor header} and a node image. Frames are named by an int id; the arena is a
 * list of segments of up to 2^20 frames (about 1 GiB) each.
 *
 * <pre>
 * Concurrency: every field of a frame header is written only by a thread that holds the frame's write
 * lock (bit 0 of the version lock), with two exceptions. The pin count is an atomic add. The parent field is
 * also cleared (NO_FRAME) by a thread that holds the lock of the frame's parent and unswizzles it from
 * there (a refresh that drops a child, FrameWriter.orphanChildren), without the child's lock and without
 * moving the child's version; so it is read and written with volatile accesses, and a reader takes it only
 * as a hint: it locks that parent and checks, with FrameWriter.findSwizzled, that the parent's image still
 * holds a swizzled pointer to the frame before it acts on the link. Readers of a frame follow the
 * optimistic protocol: v = {@link #readLock} (fails while locked), read the image and header fields with
 * plain loads, then {@link #validate}(v), which issues a load fence before re-reading the version, so the
 * plain loads cannot drift past it. {@link #tryUpgrade} is a compare-and-swap (a full fence) and
 * {@link #unlock} a volatile store (a release), so a validated reader sees either none or all of a
 * writer's changes. No method here blocks.
 * </pre>
 */
final class FrameArena {
    private static final int SEGMENT_SHIFT = 20;
    private static final int SEGMENT_MASK = (1 << SEGMENT_SHIFT) - 1;

    private final UnsafeBuffer[] segments;
    private final int frames;
    /**
     * Per frame, the partition its node lay in when it was admitted ({@link #ownerHint}), {@link #SPANS} or
     * {@link #NO_OWNER}: on the heap, so that a release finds a partition's frames without reading every frame.
     */
    private final int[] owners;

    /** {@link #ownerHint} of a frame whose node spanned partitions when it was admitted. */
    static final int SPANS = -1;
    /** {@link #ownerHint} of a free frame. */
    static final int NO_OWNER = -2;

    FrameArena(long bytes) {
        long count = bytes / FRAME_LENGTH;
        if (count > Integer.MAX_VALUE - 1) {
            throw new IllegalArgumentException("cache of " + bytes + " bytes has too many frames");
        }
        this.frames = (int) count;
        int segmentCount = (frames + SEGMENT_MASK) >>> SEGMENT_SHIFT;
        segments = new UnsafeBuffer[segmentCount];
        for (int s = 0; s < segmentCount; s++) {
            int inSegment = Math.min(1 << SEGMENT_SHIFT, frames - (s << SEGMENT_SHIFT));
            segments[s] = new UnsafeBuffer(BufferUtil.allocateDirectAligned(inSegment * FRAME_LENGTH, 64));
        }
        owners = new int[frames];
        java.util.Arrays.fill(owners, NO_OWNER);
    }

    int frames() {
        return frames;
    }

    UnsafeBuffer segment(int frame) {
        return segments[frame >>> SEGMENT_SHIFT];
    }

    int base(int frame) {
        return (frame & SEGMENT_MASK) * FRAME_LENGTH;
    }

    /** Points {@code view} at the frame's node image. */
    NodeView wrap(NodeView view, int frame) {
        return view.wrap(segment(frame), base(frame) + IMAGE_OFFSET);
    }

    // ---- optimistic version lock ----------------------------------------------------------------------

    /** The current version if the frame is not write-locked, else -1. */
    long readLock(int frame) {
        long v = segment(frame).getLongVolatile(base(frame) + VERSION_LOCK_OFFSET);
        return (v & LOCKED) == 0 ? v : -1;
    }

    /** True if the frame is unchanged since {@code version} was read. */
    boolean validate(int frame, long version) {
        VarHandle.acquireFence();
        return segment(frame).getLongVolatile(base(frame) + VERSION_LOCK_OFFSET) == version;
    }

    /** Takes the write lock if the frame is still at {@code version}. */
    boolean tryUpgrade(int frame, long version) {
        if ((version & LOCKED) == 0
                && segment(frame).compareAndSetLong(base(frame) + VERSION_LOCK_OFFSET, version, version | LOCKED)) {
            // The lock bit must be visible before any store to the image: explicit for weak memory models.
            VarHandle.storeStoreFence();
            return true;
        }
        return false;
    }

    /** Takes the write lock whatever the version, if it is free. */
    boolean tryLock(int frame) {
        long v = readLock(frame);
        return v >= 0 && tryUpgrade(frame, v);
    }

    /** Releases the write lock and advances the version. */
    void unlock(int frame) {
        UnsafeBuffer segment = segment(frame);
        int index = base(frame) + VERSION_LOCK_OFFSET;
        long v = segment.getLong(index);
        segment.putLongVolatile(index, v + 1);
    }

    boolean isLocked(int frame) {
        return (segment(frame).getLongVolatile(base(frame) + VERSION_LOCK_OFFSET) & LOCKED) != 0;
    }

    // ---- header fields (write under the frame's lock) -------------------------------------------------

    int state(int frame) {
        return segment(frame).getInt(base(frame) + STATE_OFFSET);
    }

    void state(int frame, int state) {
        segment(frame).putInt(base(frame) + STATE_OFFSET, state);
    }

    boolean flag(int frame, int flag) {
        return (segment(frame).getInt(base(frame) + FLAGS_OFFSET) & flag) != 0;
    }

    void flag(int frame, int flag, boolean on) {
        int index = base(frame) + FLAGS_OFFSET;
        int flags = segment(frame).getInt(index);
        segment(frame).putInt(index, on ? flags | flag : flags & ~flag);
    }

    void clearFlags(int frame) {
        segment(frame).putInt(base(frame) + FLAGS_OFFSET, 0);
    }

    /** Returns a locked frame's header to the free state: no address, no parent, no flags, no owner. */
    void reset(int frame) {
        state(frame, FrameHeaderDescriptor.FREE);
        ownerHint(frame, NO_OWNER);
        address(frame, GlobalAddress.NULL);
        parent(frame, FrameHeaderDescriptor.NO_FRAME);
        clearFlags(frame);
    }

    long address(int frame) {
        return segment(frame).getLong(base(frame) + ADDRESS_OFFSET);
    }

    /**
     * The partition the frame's node lay in when it was admitted, {@link #SPANS} if it spanned several then, or
     * {@link #NO_OWNER} if the frame is free; set under the frame's lock, read without it.
     *
     * <p>Why a hint taken at admission stays good while the frame caches that node: a node's low fence never
     * changes at its address while a frame caches it (a split keeps the left half in place, a clip keeps the low fence,
     * a merge keeps its widened leaf's; a leaf merged away is reused only inside its partition once every frame of it was
     * dropped, docs/merges.md; and the partition table is fixed), and {@code PartitionTable.ownerOf} names a partition only for
     * a node whose low fence lies at or above that partition's lower bound. Its high fence may narrow (a split) or
     * widen again (a refresh of a clipped copy, a split undone), so a node hinted {@code p} lies in {@code p} or spans
     * partitions, never in another partition; and a {@link #SPANS} node may come to lie in one partition later. A
     * reader that looks for the frames inside a partition must therefore read every {@link #SPANS} frame and every
     * frame hinted with that partition, and may skip the others. A frame whose hint it read before the frame's
     * admission it must learn of otherwise: a release knows every admission into its partition happened before its
     * operations drained ({@link Flush#dropPartition}).
     *
     * <p>Set with release and read with acquire semantics: a hint read after the admission that set it (in whatever
     * order the release learns of that admission) is that hint, not the frame's earlier one.
     */
    int ownerHint(int frame) {
        return (int) OWNERS.getAcquire(owners, frame);
    }

    /** Sets {@link #ownerHint} of a frame locked for admission (or reset). */
    void ownerHint(int frame, int partition) {
        OWNERS.setRelease(owners, frame, partition);
    }

    private static final java.lang.invoke.VarHandle OWNERS = java.lang.invoke.MethodHandles.arrayElementVarHandle(int[].class);

    void address(int frame, long address) {
        segment(frame).putLong(base(frame) + ADDRESS_OFFSET, address);
    }

    int parent(int frame) {
        return (int) segment(frame).getLongVolatile(base(frame) + PARENT_OFFSET);
    }

    void parent(int frame, int parent) {
        segment(frame).putLongVolatile(base(frame) + PARENT_OFFSET, parent);
    }

    int pins(int frame) {
        return segment(frame).getIntVolatile(base(frame) + PINS_OFFSET);
    }

    void pin(int frame) {
        segment(frame).getAndAddInt(base(frame) + PINS_OFFSET, 1);
    }

    void unpin(int frame) {
        segment(frame).getAndAddInt(base(frame) + PINS_OFFSET, -1);
    }

    /** Frames whose local lock is held right now (see DexEngine.lockedFrames). */
    int lockedCount() {
        int locked = 0;
        for (int f = 0; f < frames(); f++) {
            if (isLocked(f)) {
                locked++;
            }
        }
        return locked;
    }
}
