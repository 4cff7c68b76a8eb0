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
    private LeafCuts() {
    }

    /**
     * The boundary to split the paused {@code partition} at for {@code key}: {@code key} itself when a leaf's high fence
     * is there already; else, when the leaf holding it has entries on both sides of it, that leaf cut after its last
     * entry up to {@code key}, whose key is returned; else the leaf's nearest fence inside the partition, or
     * {@link Long#MIN_VALUE} when it has none (the partition is that leaf, and it cannot be cut there).
     *
     * @throws IllegalStateException when the leaf could not be read, or its parent is locked by another compute node
     * @throws dev.dex.rdma.FabricException when a write failed (after the new leaf's write: the partition is failed, and
     *                                      its leaf repaired before it serves again)
     */
    static long cut(DexEngine engine, int partition, long key) {
        PartitionTable table = engine.partitions;
        long low = table.lowerExclusive(partition);
        long high = table.upperInclusive(partition);
        // A session number of its own, as a merge pass's (DexEngine.MERGE_SESSION): one cut at a time, under the split.
        RemoteNodes remote = new RemoteNodes(engine.memory, engine.instanceId << DexEngine.SESSION_BITS | DexEngine.MERGE_SESSION,
                engine::lockHolderGone, engine.pendingUnlocks);
        NodeView leaf = view(engine);
        NodeView parent = view(engine);
        long[] search = new long[engine.keys.words()];
        search[0] = key;
        long address = engine.rootAddress.get();
        long parentAddress = 0;
        int slot = -1;
        for (int depth = 0; ; depth++) {
            if (depth == 64 || !remote.readValidated(address, leaf)) {
                throw new IllegalStateException("the leaf of key " + key + " could not be read (a node on its path stayed locked)");
            }
            if (leaf.isLeaf()) {
                break;
            }
            parent.copyFrom(leaf);
            parentAddress = address;
            slot = leaf.childIndex(search);
            address = leaf.child(slot);
        }
        if (leaf.highFence() == key) {
            return key;
        }
        int found = leaf.search(search);
        int keep = found >= 0 ? found + 1 : -found - 1;
        if (keep == 0 || keep == leaf.count() || parentAddress == 0 || parent.isFull() || table.ownerOf(leaf) != partition) {
            for (long fence : new long[] {leaf.highFence(), leaf.lowFence()}) {
                if (fence > low && fence < high) {
                    return fence;
                }
            }
            return Long.MIN_VALUE;
        }
        if (remote.lock(parentAddress, parent.version()) != RemoteNodes.LOCKED) {
            throw new IllegalStateException("the parent of the leaf of key " + key + " is locked or changed: the leaf is not cut now");
        }
        NodeView right = view(engine);
        long rightAddress = engine.allocator.allocateFor(leaf.level(), address);
        long[] separator = new long[search.length];
        leaf.cutInto(right, rightAddress, keep, separator);
        parent.insertSeparator(slot, separator, rightAddress);
        leaf.version(leaf.version() + 1);
        boolean rightWritten = false;
        try {
            remote.writeUnlocked(rightAddress, right);
            rightWritten = true;
            remote.writeLocked(parentAddress, parent, parent.version() + 1);
            remote.writeUnlocked(address, leaf);
        } catch (RuntimeException failed) {
            if (rightWritten) {
                // The parent may show the cut with the leaf still wide: it is clipped to its slot before the partition
                // serves again (DexEngine.repairLeftovers at its next acquire), and the parent's lock released after.
                engine.splitLeftHalfDone(address);
                engine.held.cacheFailed(partition, failed);
                remote.leavePending(parentAddress, true);
                remote.pending().retryIfDue(remote);
            } else {
                remote.release(parentAddress); // only an orphan leaf was perhaps written: it leaks
            }
            throw failed;
        }
        remote.release(parentAddress);
        return separator[0];
    }

    private static NodeView view(DexEngine engine) {
        return new NodeView(engine.keys).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
    }
}
