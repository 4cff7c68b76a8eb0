package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;
import static dev.dex.core.cache.FrameHeaderDescriptor.SHARED;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.core.tree.TreeSettings;

/**
 * One session's path from the root to the leaf of its current operation, and the latches on its nodes. Per depth
 * {@code d}: a frame with the version read from its lock ({@code frameAt[d] >= 0}) and a view of its image, or an
 * uncached image in this session's scratch buffer ({@code frameAt[d] == NO_FRAME}); whether the node is treated
 * as shared; the child slot the descent took. Also the scratch images splits and refreshes work in.
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession} (and the collaborators it hands it to), so by one thread. A frame
 * on the path is read optimistically: every decision taken from its image is validated against frameAt/versionAt
 * before it has an effect. {@link #lockNode} is the exclusive latch on a node of the path: the frame's write
 * lock taken at the version read (a try-lock: it fails, and the operation restarts, if the frame changed or is
 * locked), or for an uncached node its IO marker, taken with a fresh re-read that must still match the image the
 * decision was taken on. Nothing here blocks.
 * </pre>
 */
final class SessionPath {
    static final int H = TreeSettings.MAX_HEIGHT;

    final int[] frameAt = new int[H];
    final long[] versionAt = new long[H];
    final boolean[] sharedAt = new boolean[H];
    final int[] childIndexAt = new int[H];
    final NodeView[] viewAt = new NodeView[H];
    final NodeView[] frameViewAt = new NodeView[H];
    final NodeView[] scratchAt = new NodeView[H];
    /** A node re-read from remote memory (latches, refreshes). */
    final NodeView fresh;
    /** Scratch images of a split: the node's copy, its new right sibling, a new root. */
    final NodeView splitCopy;
    final NodeView right;
    final NodeView newRoot;

    private final DexEngine engine;
    private final FrameArena arena;
    private final MappingTable mapping;
    private final Markers markers;
    private final RemoteNodes remote;

    /** A slot's bounds, for {@link #childRangeShared}. */
    private final long[] low;
    private final long[] high;

    SessionPath(DexEngine engine, Markers markers, RemoteNodes remote) {
        KeyFormat keys = engine.keys;
        this.low = new long[keys.words()];
        this.high = new long[keys.words()];
        this.engine = engine;
        this.arena = engine.arena;
        this.mapping = engine.mapping;
        this.markers = markers;
        this.remote = remote;
        UnsafeBuffer scratch = new UnsafeBuffer(BufferUtil.allocateDirectAligned((H + 4) * NODE_LENGTH, 64));
        for (int d = 0; d < H; d++) {
            scratchAt[d] = new NodeView(keys).wrap(scratch, d * NODE_LENGTH);
            frameViewAt[d] = new NodeView(keys);
        }
        fresh = new NodeView(keys).wrap(scratch, H * NODE_LENGTH);
        splitCopy = new NodeView(keys).wrap(scratch, (H + 1) * NODE_LENGTH);
        right = new NodeView(keys).wrap(scratch, (H + 2) * NODE_LENGTH);
        newRoot = new NodeView(keys).wrap(scratch, (H + 3) * NODE_LENGTH);
    }

    /**
     * Exclusive local access to the node at depth {@code d}: its frame's write lock, or its IO marker
     * with a fresh re-read that must match the image the decision was taken on.
     */
    boolean lockNode(int d) {
        int f = frameAt[d];
        if (f != NO_FRAME) {
            return arena.tryUpgrade(f, versionAt[d]);
        }
        NodeView view = viewAt[d];
        long address = view.address();
        if (markers.holds(address)) {
            return true;
        }
        if (mapping.putIfAbsent(address, MappingTable.IO) != MappingTable.ABSENT) {
            return false;
        }
        markers.hold(address);
        boolean read;
        if (sharedAt[d]) {
            read = remote.readValidated(address, fresh);
        } else {
            remote.readOnce(address, fresh);
            read = true;
        }
        if (!read || fresh.version() != view.version()) {
            markers.release(address);
            return false;
        }
        return true;
    }

    void unlockNode(int d) {
        int f = frameAt[d];
        if (f != NO_FRAME) {
            arena.unlock(f);
        } else {
            markers.release(viewAt[d].address());
        }
    }

    /** Sets depth {@code d} to frame {@code f}, read at version {@code v}. */
    void setFrame(int d, int f, long v) {
        frameAt[d] = f;
        versionAt[d] = v;
        viewAt[d] = arena.wrap(frameViewAt[d], f);
        sharedAt[d] = arena.flag(f, SHARED);
    }

    /** Whether the child at {@code childIndexAt[pd]} may span partitions, judged from its parent's image. */
    boolean childRangeShared(int pd) {
        slotLow(pd, low);
        slotHigh(pd, high);
        return engine.treatAsShared(low, high);
    }

    /** The exclusive low bound of the slot at {@code childIndexAt[pd]} in the parent's image at depth {@code pd}, into {@code out}. */
    void slotLow(int pd, long[] out) {
        viewAt[pd].slotLow(childIndexAt[pd], out);
    }

    /** The inclusive high bound of the slot at {@code childIndexAt[pd]} in the parent's image at depth {@code pd}, into {@code out}. */
    void slotHigh(int pd, long[] out) {
        viewAt[pd].slotHigh(childIndexAt[pd], out);
    }
}
