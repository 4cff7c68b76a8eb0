package dev.dex.core.cache;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.RemoteNodes;

/**
 * A leaf cut in two at a key, so that a partition can split there (PartitionSplits; docs/partition-splits.md, "Hot
 * leaves"). A split stops at a leaf boundary: a boundary inside a leaf would leave the leaf spanning two partitions,
 * shared, and read remotely by every operation on it. So a partition that is one hot leaf could not split at all, and
 * under a skewed load the node that held it did a third of the work (docs/benchmarks.md). Cutting the leaf first makes
 * the boundary a leaf boundary: the leaf keeps its entries up to the key, a new leaf takes the rest, and the parent gets
 * the separator, as a split of a full leaf does (in the same write order: the new leaf, the parent, the narrowed leaf).
 *
 * <pre>
 * Concurrency: runs inside a split of the leaf's partition, which is paused, checkpointed and has no frame cached: no
 *   operation of this engine touches the leaf, and no other engine writes a node inside a partition it does not hold.
 *   The parent may span partitions: it is changed under its remote lock, at the version read, as any shared node.
 * </pre>
 */
final class LeafCuts {
    /**
     * The cut's remote-lock tag's session number: its own (not a merge pass's, which may run on another partition at the
     * same time), so that no pending release of another session's can free a lock it holds. DexEngine opens sessions
     * below it.
     */
    static final int CUT_SESSION = DexEngine.MERGE_SESSION - 1;

    private LeafCuts() {
    }

    /**
     * The key after which {@code leaf} of {@code partition} (under {@code parent}, null when the leaf is the root) is cut
     * for {@code key}: its last entry up to {@code key}, kept within its second to last so that both halves hold
     * entries; or {@link Long#MIN_VALUE} when it cannot be cut: keys wider than 8 bytes (a table bound is a first word
     * with the rest maximal, which no entry is), a leaf that is not the partition's alone, a root leaf, a full parent, or
     * fewer than two entries. Reads nothing: the caller read the nodes.
     */
    static long cutKey(DexEngine engine, int partition, NodeView leaf, NodeView parent, long key) {
        if (engine.keys.words() != 1 || parent == null || parent.isFull() || leaf.count() < 2
                || engine.partitions.ownerOf(leaf) != partition) {
            return Long.MIN_VALUE;
        }
        int found = leaf.search(key);
        int keep = Math.max(1, Math.min(leaf.count() - 1, found >= 0 ? found + 1 : -found - 1));
        return leaf.key(keep - 1);
    }

    /**
     * The boundary to split the paused {@code partition} at for {@code key}: {@code key} itself when a leaf's high fence
     * is there already; else, when the leaf holding it can be cut ({@link #cutKey}), that leaf cut there, and the key
     * it was cut after; else the leaf's nearest fence inside the partition, or {@link Long#MIN_VALUE} when it has none.
     *
     * @throws IllegalStateException when the leaf could not be read, or its parent is locked by another compute node
     * @throws dev.dex.rdma.FabricException when a verb failed (after the new leaf's write: the partition is failed, and
     *                                      its leaf repaired before it serves again)
     */
    static long cut(DexEngine engine, int partition, long key) {
        PartitionTable table = engine.partitions;
        long low = table.lowerExclusive(partition);
        long high = table.upperInclusive(partition);
        RemoteNodes remote = remote(engine);
        NodeView leaf = view(engine);
        NodeView parent = view(engine);
        long[] search = new long[engine.keys.words()];
        search[0] = key;
        Found found = find(engine, remote, search, leaf, parent);
        if (found == null) {
            throw new IllegalStateException("the leaf of key " + key + " could not be read (a node on its path stayed locked)");
        }
        if (!leaf.covers(search)) {
            throw new IllegalStateException("the leaf found for key " + key + " does not cover it (a root that moved): not cut now");
        }
        if (leaf.highFence() == key) {
            return key;
        }
        long at = cutKey(engine, partition, leaf, found.parent() == 0 ? null : parent, key);
        if (at == Long.MIN_VALUE) {
            return fenceInside(leaf, low, high);
        }
        long parentAddress = found.parent();
        long address = found.leaf();
        int slot = found.slot();
        if (remote.lock(parentAddress, parent.version()) != RemoteNodes.LOCKED) {
            throw new IllegalStateException("the parent of the leaf of key " + key + " is locked or changed: the leaf is not cut now");
        }
        boolean rightWritten = false;
        try {
            NodeView right = view(engine);
            long rightAddress = engine.allocator.allocateFor(leaf.level(), address);
            long[] separator = new long[search.length];
            leaf.cutInto(right, rightAddress, leaf.search(at) + 1, separator);
            parent.insertSeparator(slot, separator, rightAddress);
            leaf.version(leaf.version() + 1);
            long parentVersion = parent.version() + 1; // once: a retried write must not bump it again
            StructureChanges.retrying(() -> remote.writeUnlocked(rightAddress, right));
            rightWritten = true;
            StructureChanges.retrying(() -> remote.writeLocked(parentAddress, parent, parentVersion));
            StructureChanges.retrying(() -> remote.writeUnlocked(address, leaf));
        } catch (RuntimeException failed) {
            if (rightWritten) {
                // The parent may show the cut with the leaf still wide: it is clipped to its slot before the partition
                // serves again (DexEngine.repairLeftovers at its next acquire), and the parent's lock released after.
                engine.splitLeftHalfDone(address);
                engine.held.cacheFailed(partition, failed);
                remote.leavePending(parentAddress, true);
                remote.pending().retryIfDue(remote);
            } else {
                remote.release(parentAddress); // nothing written, or an orphan leaf, which leaks
            }
            throw failed;
        }
        remote.release(parentAddress);
        // A cached parent of the cut leaf is behind remote memory now (kept, a descent would meet the cut's fence and
        // refresh it; dropped, it is read again).
        new Flush(engine).dropSpanningParents(partition);
        return at;
    }

    /** Where {@link #find} found the leaf: its address, its parent's (0: the leaf is the root), and its slot there. */
    record Found(long leaf, long parent, int slot) {
    }

    /**
     * Reads the leaf that holds {@code search} into {@code leaf}, and its parent into {@code parent}, by validated
     * one-sided reads from the root (nothing cached); null when a node on the way stayed locked.
     */
    static Found find(DexEngine engine, RemoteNodes remote, long[] search, NodeView leaf, NodeView parent) {
        long address = engine.rootAddress.get();
        long parentAddress = 0;
        int slot = -1;
        for (int depth = 0; depth < 64; depth++) {
            if (!remote.readValidated(address, leaf)) {
                return null;
            }
            if (leaf.isLeaf()) {
                return new Found(address, parentAddress, slot);
            }
            parent.copyFrom(leaf);
            parentAddress = address;
            slot = leaf.childIndex(search);
            address = leaf.child(slot);
        }
        return null;
    }

    /** The leaf's high fence, else its low fence, that lies strictly inside {@code (low, high)}; else {@link Long#MIN_VALUE}. */
    static long fenceInside(NodeView leaf, long low, long high) {
        for (long fence : new long[] {leaf.highFence(), leaf.lowFence()}) {
            if (fence > low && fence < high) {
                return fence;
            }
        }
        return Long.MIN_VALUE;
    }

    /** A reader and locker of remote nodes under the cut's own session number ({@link #CUT_SESSION}). */
    static RemoteNodes remote(DexEngine engine) {
        return new RemoteNodes(engine.memory, engine.instanceId << DexEngine.SESSION_BITS | CUT_SESSION, engine::lockHolderGone,
                engine.pendingUnlocks);
    }

    static NodeView view(DexEngine engine) {
        return new NodeView(engine.keys).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
    }
}
