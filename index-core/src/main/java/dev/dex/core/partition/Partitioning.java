package dev.dex.core.partition;

import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;

import org.agrona.collections.LongArrayList;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.RemoteMemory;

/** Chooses partition boundaries. */
public final class Partitioning {
    private Partitioning() {
    }

    /**
     * {@code count} partitions whose boundaries are separators of the lowest inner level (the leaves'
     * fence keys), spaced so each partition gets about the same number of leaves. Every leaf then lies in
     * one partition: all leaves are owned (paper §4). Reads every inner node once; run it after bulk load,
     * while nothing else writes. Partition bounds are on a key's first word (its first 8 bytes): with keys wider than
     * 8 bytes, separators that share their first word give one bound, and a leaf that spans such a bound is shared.
     *
     * @throws IllegalArgumentException when the tree has fewer than {@code count} leaves
     */
    public static PartitionTable fromLeafFences(RemoteMemory memory, int count) {
        if (count < 1 || count > PartitionTable.MAX_PARTITIONS) {
            throw new IllegalArgumentException("partition count must be in [1, " + PartitionTable.MAX_PARTITIONS + "]: " + count);
        }
        LongArrayList all = new LongArrayList();
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[NODE_LENGTH * 16]);
        Superblock.Contents tree = Superblock.read(memory);
        collect(memory, tree.root(), new NodeView(tree.keyFormat()), buffer, 0, all);
        // First words of ascending separators ascend too; keep one of each.
        LongArrayList separators = new LongArrayList();
        for (int i = 0; i < all.size(); i++) {
            long word = all.getLong(i);
            if (word == NodeHeaderDescriptor.NEG_INFINITY || word == NodeHeaderDescriptor.POS_INFINITY) {
                continue; // not a bound a table can hold (a wide key's first 8 bytes all zero, or all 0xff)
            }
            if (separators.isEmpty() || separators.getLong(separators.size() - 1) != word) {
                separators.addLong(all.getLong(i));
            }
        }
        if (separators.size() + 1 < count) {
            throw new IllegalArgumentException("the tree has " + (separators.size() + 1) + " leaves, too few for "
                    + count + " partitions aligned to leaves; load more keys or use fewer partitions");
        }
        long[] bounds = new long[count - 1];
        for (int i = 0; i < bounds.length; i++) {
            int index = (int) ((long) (i + 1) * (separators.size() + 1) / count) - 1;
            bounds[i] = separators.getLong(index);
        }
        return PartitionTable.ofUpperBounds(bounds);
    }

    /** Adds the first words of the separators below {@code address}, in key order. */
    private static void collect(RemoteMemory memory, long address, NodeView node, UnsafeBuffer buffer, int depth, LongArrayList out) {
        int offset = depth * NODE_LENGTH;
        memory.read(address, buffer, offset, NODE_LENGTH);
        node.wrap(buffer, offset);
        if (node.isLeaf()) {
            return;
        }
        int count = node.count();
        if (node.level() == 1) {
            for (int i = 0; i < count; i++) {
                out.addLong(node.key(i));
            }
            return;
        }
        long[] children = new long[count + 1];
        long[] separators = new long[count];
        for (int i = 0; i <= count; i++) {
            children[i] = node.child(i);
            if (i < count) {
                separators[i] = node.key(i);
            }
        }
        for (int i = 0; i <= count; i++) {
            collect(memory, children[i], node, buffer, depth + 1, out);
            if (i < count) {
                out.addLong(separators[i]);
            }
        }
    }
}
