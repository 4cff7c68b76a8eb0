package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.DIRTY;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;
import static dev.dex.core.cache.FrameHeaderDescriptor.SHARED;
import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;
import static dev.dex.core.node.NodeHeaderDescriptor.POS_INFINITY;

import java.util.function.IntConsumer;

import dev.dex.core.node.NodeView;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.rdma.GlobalAddress;

/**
 * Changes of the tree's structure that one session makes on its current path (paper §5, §7): eager splits of
 * full nodes and of the root, in an order that leaves remote memory a valid tree after every write
 * ({@code docs/durability.md}), and the refresh of a cached shared node found stale (a fence mismatch, or a remote
 * lock that saw another version).
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession}, so by one thread, working on its {@link SessionPath}. A split
 * takes the latches of the parent and then of the node ({@link SessionPath#lockNode}, try-locks only), and for
 * each that is shared its remote lock after the local one, checking the version against remote memory (a
 * mismatch abandons the split, and refreshes the stale node if it is cached); it releases the remote locks before the local ones.
 * A root split also holds the old root's locks while it swings the root pointer by compare-and-swap. A refresh
 * runs with the refreshed frame's write lock held; it orphans the frames of children that moved away (see
 * FrameArena's note on the parent link). The caller restarts its operation after any of these.
 * </pre>
 */
final class StructureChanges {
    private final DexEngine engine;
    private final FrameArena arena;
    private final SessionPath path;
    private final NodeView fresh;
    private final NodeView splitCopy;
    private final NodeView right;
    private final NodeView newRoot;
    private final RemoteNodes remote;
    private final FrameWriter writer;
    /** Counts refreshes in the session's statistics. */
    private final IntConsumer counts;
    /** A split's separator. */
    private final long[] separator;
    /** The parent's and the node's images before a split, to undo it in the cache when its writes fail. */
    private final NodeView parentBefore;
    private final NodeView nodeBefore;

    StructureChanges(DexEngine engine, SessionPath path, RemoteNodes remote, FrameWriter writer, IntConsumer counts) {
        this.engine = engine;
        this.arena = engine.arena;
        this.path = path;
        this.fresh = path.fresh;
        this.splitCopy = path.splitCopy;
        this.right = path.right;
        this.newRoot = path.newRoot;
        this.remote = remote;
        this.writer = writer;
        this.counts = counts;
        this.separator = new long[engine.keys.words()];
        org.agrona.concurrent.UnsafeBuffer before = new org.agrona.concurrent.UnsafeBuffer(
                org.agrona.BufferUtil.allocateDirectAligned(2 * dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH, 64));
        this.parentBefore = new NodeView(engine.keys).wrap(before, 0);
        this.nodeBefore = new NodeView(engine.keys).wrap(before, dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH);
    }

    /** The node at depth {@code d} does not cover the key: its parent's image (or the root pointer) is stale. */
    void fenceMismatch(int d) {
        if (d == 0) {
            long seen = engine.rootAddress.get();
            engine.rootMoved(seen, remote.readRoot());
            return;
        }
        int pd = d - 1;
        int pf = path.frameAt[pd];
        if (pf == NO_FRAME) {
            return;
        }
        if (arena.tryUpgrade(pf, path.versionAt[pd])) {
            try {
                if (arena.flag(pf, SHARED)) {
                    refreshLocked(pd);
                } else {
                    throw new IllegalStateException("an owned cached node routed a key to a node that does not cover it: "
                            + path.viewAt[pd] + " -> " + path.viewAt[d]);
                }
            } finally {
                arena.unlock(pf);
            }
        }
    }

    /**
     * Re-reads a cached shared node whose write lock this thread holds, keeping the swizzled pointers of
     * children it still has and orphaning the frames of children that moved elsewhere.
     */
    void refreshLocked(int d) {
        int f = path.frameAt[d];
        NodeView view = path.viewAt[d];
        long address = arena.address(f);
        if (arena.flag(f, DIRTY)) {
            throw new IllegalStateException("a shared cached node is dirty: " + view);
        }
        if (!remote.readValidated(address, fresh)) {
            return;
        }
        if (!fresh.isLeaf()) {
            for (int j = 0, n = Math.min(view.count(), view.capacity()); j <= n; j++) {
                long pointer = view.child(j);
                if (!GlobalAddress.isSwizzled(pointer)) {
                    continue;
                }
                int child = (int) GlobalAddress.unswizzle(pointer);
                long childAddress = arena.address(child);
                int slot = slotOf(fresh, childAddress);
                if (slot >= 0) {
                    fresh.child(slot, pointer);
                } else {
                    writer.orphaned(child); // before its parent is cleared, as FrameWriter.orphanChildren does
                    arena.parent(child, NO_FRAME);
                }
            }
        }
        view.copyFrom(fresh);
        arena.flag(f, SHARED, engine.treatAsShared(view));
        counts.accept(CacheStats.REFRESHES);
    }

    /** The index of {@code childAddress} among the children of {@code inner}, or -1. */
    static int slotOf(NodeView inner, long childAddress) {
        for (int i = 0, n = inner.count(); i <= n; i++) {
            if (inner.child(i) == childAddress) {
                return i;
            }
        }
        return -1;
    }

    /** The dead image's version of a reused leaf ({@link Merges#takeFree}). */
    private final long[] deadVersion = new long[1];

    /** Splits the full node at depth {@code d} (eager split); the caller restarts afterwards. */
    void split(int d) {
        if (d == 0) {
            splitRoot();
            return;
        }
        int pd = d - 1;
        if (!path.lockNode(pd)) {
            return;
        }
        boolean nodeLocked = false;
        NodeView parent = path.viewAt[pd];
        NodeView node = path.viewAt[d];
        long parentAddress = parent.address();
        long address = node.address();
        boolean parentRemote = false;
        boolean nodeRemote = false;
        // Whether the remote locks must be repaired before they are released (a split whose writes failed).
        boolean repair = false;
        try {
            if (!path.lockNode(d)) {
                return;
            }
            nodeLocked = true;
            if (parent.isFull()) {
                return;
            }
            refuseInFailedPartition(node, parent);
            if (path.sharedAt[pd]) {
                if (!remoteLock(pd)) {
                    return;
                }
                parentRemote = true;
            }
            if (path.sharedAt[d]) {
                if (!remoteLock(d)) {
                    return;
                }
                nodeRemote = true;
            }
            int nodeOwner = engine.partitions.ownerOf(node);
            // A leaf inside a held partition takes a leaf a merge freed there first (Merges: only its owner reuses it).
            long rightAddress = node.isLeaf() && !engine.sharedOwner(nodeOwner) ? engine.merges.takeFree(nodeOwner, address, deadVersion) : -1;
            boolean reused = rightAddress >= 0;
            if (!reused) {
                rightAddress = engine.allocator.allocateFor(node.level(), address);
            }
            // The images as they were, for a split whose writes fail: the cache must not keep a change that remote
            // memory may not have.
            parentBefore.copyFrom(parent);
            nodeBefore.copyFrom(node);
            node.splitInto(right, rightAddress, separator);
            if (reused) {
                right.version(deadVersion[0] + 1); // not the dead image's: a reader racing this write sees it torn
            }
            narrowed(d);
            parent.insertSeparator(path.childIndexAt[pd], separator, rightAddress);
            // Remote memory sees the split in an order that is a valid tree after every step: the new right
            // node, then the parent that points to it (always written through, so no owned inner node is
            // ever dirty), then the narrowed node itself. Until that last write the remote node is wider
            // than its parent's slot; every reader clips it to the slot (resolve), so a crash in between
            // leaves nothing a new owner cannot follow (docs/durability.md).
            boolean rightWritten = false;
            try {
                writeRetrying(rightAddress, right, 0);
                rightWritten = true;
                finishWrite(pd, parentRemote, true);
                finishWrite(d, nodeRemote, path.sharedAt[pd] || path.sharedAt[d]);
            } catch (RuntimeException failed) {
                // Until the parent's write, remote memory shows nothing of the split (the right node is an orphan): the
                // cache goes back and the locks go. From the parent's write on, remote memory may show the split with
                // the node still wide: the cache goes back all the same, and the node is repaired (clipped to its slot
                // in the remote parent) before its lock is released, or, owned, before its partition serves again.
                boolean visible = rightWritten;
                if (reused) {
                    engine.merges.leaked(); // its image is unknown now: never reused again
                }
                undo(pd, parentBefore, visible ? failed : null);
                undo(d, nodeBefore, visible ? failed : null);
                if (visible && !nodeRemote) {
                    // Owned (cached or not): nobody of its partition may use it before it is repaired.
                    engine.held.cacheFailed(nodeOwner, failed);
                    engine.splitLeftHalfDone(address);
                }
                repair = visible;
                throw failed;
            }
            // Only now do the cached children of the right half lose their parent: had a write failed, the node
            // would have kept them.
            writer.orphanChildren(right);
        } finally {
            if (nodeRemote) {
                releaseRemote(address, repair);
            }
            if (parentRemote) {
                releaseRemote(parentAddress, repair);
            }
            if (nodeLocked) {
                path.unlockNode(d);
            }
            path.unlockNode(pd);
        }
    }

    /**
     * A split's writes to remote memory failed: the cached image of depth {@code d} goes back to {@code before} (its dirty
     * flag is as it was: a failed write-through never clears it). With {@code cause} null, remote memory shows nothing of
     * the split (only the orphan right node was written, if anything), so the cache matches it again. With a cause, the
     * parent's write may have taken effect: a shared frame that is behind remote memory is refreshed when a version check
     * or a fence finds it stale, as always (its node is repaired, clipped to its slot, before anyone uses it); an owned
     * frame is trusted without checks, so its partition can no longer be served from this cache and is given up and
     * acquired again ({@link DexEngine#cacheFailed}), which drops its frames and replays its redo log.
     */
    private void undo(int d, NodeView before, RuntimeException cause) {
        int f = path.frameAt[d];
        if (f == NO_FRAME) {
            return;
        }
        NodeView view = path.viewAt[d];
        view.copyFrom(before);
        boolean shared = engine.treatAsShared(view);
        arena.flag(f, SHARED, shared);
        if (!shared && cause != null) {
            engine.held.cacheFailed(engine.partitions.ownerOf(view), cause);
        }
    }

    /** Releases a remote lock of a split; after failed writes only once its node is repaired (PendingUnlocks). */
    private void releaseRemote(long address, boolean repair) {
        if (repair) {
            remote.leavePending(address, true);
            remote.pending().retryIfDue(remote);
        } else {
            remote.release(address);
        }
    }

    /**
     * Writes a node of a structure change, trying again when the verb fails: a lost answer or a broken connection is
     * usually over at once, and the same bytes written twice are the same node (this session holds the locks that
     * keep everyone else from writing it meanwhile). A fence is final and not retried.
     */
    private void writeRetrying(long address, NodeView view, long lockWord) {
        retrying(() -> writer.write(address, view, lockWord));
    }

    /** Runs {@code write}, a write of a structure change (a split's, a leaf cut's, LeafCuts), as above. */
    static void retrying(Runnable write) {
        for (int attempt = 1; ; attempt++) {
            try {
                write.run();
                return;
            } catch (dev.dex.rdma.FencedException fenced) {
                throw fenced;
            } catch (dev.dex.rdma.FabricException failed) {
                if (attempt >= WRITE_ATTEMPTS) {
                    throw failed;
                }
                Thread.onSpinWait();
            }
        }
    }

    /** How often a write of a structure change is tried before the change is undone. */
    static final int WRITE_ATTEMPTS = 3;

    /**
     * Refuses a split of a node, or under a parent, that lies in a partition whose cache failed ({@link DexEngine#cacheFailed}):
     * an operation that entered the partition before it failed still runs on the undone cache, whose images may be
     * behind remote memory (a split there may already be in remote memory: splitting again would put its separator in
     * the parent twice). Such an operation ends with {@code NOT_HELD}: nothing of it was applied, and its client sends it
     * again once the partition is acquired again. The failed flag is set while the failing split still holds these
     * latches, and cleared only after the partition's operations drained, so no split can slip between.
     */
    private void refuseInFailedPartition(NodeView node, NodeView parent) {
        int owner = engine.partitions.ownerOf(node);
        if (owner < 0) {
            owner = engine.partitions.ownerOf(parent);
        }
        if (owner >= 0 && engine.held.poisoned(owner)) {
            node.lowFence(separator);
            throw new dev.dex.core.engine.PartitionNotHeldException(owner, separator);
        }
    }

    /**
     * A split narrowed the node at depth {@code d}: a shared node may now lie inside one partition. Its
     * last write while shared is a write-through, so remote memory holds the narrowed fences before the
     * node starts being written back lazily as an owned node.
     */
    private void narrowed(int d) {
        if (path.frameAt[d] != NO_FRAME) {
            NodeView node = path.viewAt[d];
            arena.flag(path.frameAt[d], SHARED, engine.treatAsShared(node));
        }
    }

    /**
     * Takes the remote lock of the node at depth {@code d}, whose local latch this thread holds, at the version the
     * path read. False when it cannot: held by another compute node, or the remote node has another version, in
     * which case a cached image is stale and is refreshed (paper §7); the caller abandons its change.
     */
    private boolean remoteLock(int d) {
        NodeView node = path.viewAt[d];
        int outcome = remote.lock(node.address(), node.version());
        if (outcome == RemoteNodes.LOCKED) {
            return true;
        }
        if (outcome == RemoteNodes.STALE && path.frameAt[d] != NO_FRAME) {
            refreshLocked(d);
        }
        return false;
    }

    /** After a split changed the node at depth {@code d}: keep it dirty in the cache, or write it through. */
    private void finishWrite(int d, boolean remotelyLocked, boolean writeThrough) {
        NodeView view = path.viewAt[d];
        int f = path.frameAt[d];
        if (f != NO_FRAME && !writeThrough) {
            writer.markDirty(f);
            return;
        }
        view.version(view.version() + 1);
        writeRetrying(view.address(), view, remotelyLocked ? remote.tag() : 0);
        writer.markClean(f);
    }

    private void splitRoot() {
        NodeView node = path.viewAt[0];
        long address = node.address();
        long seen = engine.rootAddress.get();
        long current = remote.readRoot();
        if (current != address) {
            engine.rootMoved(seen, current);
            return;
        }
        if (!path.lockNode(0)) {
            return;
        }
        boolean locked = false;
        boolean repair = false;
        try {
            refuseInFailedPartition(node, node);
            if (!remoteLock(0)) {
                return;
            }
            locked = true;
            int level = node.level();
            long rightAddress = engine.allocator.allocateFor(level, address);
            long rootAddress = engine.allocator.allocateFor(level + 1, address);
            splitCopy.copyFrom(node);
            splitCopy.splitInto(right, rightAddress, separator);
            nodeBefore.copyFrom(node);
            boolean swung = false;
            boolean swinging = false;
            try {
                writeRetrying(rightAddress, right, 0);
                newRoot.init(rootAddress, level + 1, NEG_INFINITY, POS_INFINITY);
                newRoot.child(0, address);
                newRoot.appendChild(separator, rightAddress);
                writeRetrying(rootAddress, newRoot, 0);
                swinging = true;
                long found = remote.swingRoot(address, rootAddress);
                if (found != address) {
                    engine.rootMoved(address, found);
                    return;
                }
                swung = true;
                node.copyFrom(splitCopy);
                narrowed(0);
                finishWrite(0, true, true);
            } catch (RuntimeException failed) {
                // From the swing on (its answer may be lost) remote memory may have the new root and the node still
                // wide: the lock is released only after a repair, which clips the node to its slot under whichever root
                // remote memory has. Before it, nothing of the split is reachable.
                if (swung) {
                    undo(0, nodeBefore, failed);
                }
                repair = swinging;
                throw failed;
            }
            writer.orphanChildren(right);
            engine.rootMoved(address, rootAddress);
        } finally {
            if (locked) {
                releaseRemote(address, repair);
            }
            path.unlockNode(0);
        }
    }
}
