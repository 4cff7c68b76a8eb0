package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.rdma.RemoteMemory;

/**
 * A small tree of 8-byte keys 2, 4, ..., 2n (value key + 1, leaves 70% full, subtree level 1) and, in it, a leaf that
 * spans a partition bound (shared: written under its remote lock).
 */
final class SharedLeaves {
    private SharedLeaves() {
    }

    /** Formats {@code memory} and bulk-loads keys 2, 4, ..., 2 x {@code count}, each with value key + 1. */
    static void loadEvenKeys(RemoteMemory memory, int count) {
        long[] keys = new long[count];
        long[] values = new long[count];
        for (int i = 0; i < count; i++) {
            keys[i] = 2L * i + 2;
            values[i] = keys[i] + 1;
        }
        dev.dex.core.tree.BulkLoader.formatAndLoad(memory, new dev.dex.core.tree.TreeSettings(1, 0.7),
                dev.dex.core.tree.SortedEntries.of(keys, values), n -> { });
    }

    /** {key, leaf address}: an even key next to a bound, in a leaf whose fences span that bound. */
    static long[] find(RemoteMemory memory, PartitionTable table) {
        NodeView node = new NodeView(KeyFormat.EIGHT).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        RemoteNodes remote = new RemoteNodes(memory, 1);
        for (int p = 0; p < table.count() - 1; p++) {
            long key = table.upperInclusive(p) - table.upperInclusive(p) % 2;
            long address = remote.readRoot();
            while (true) {
                assertTrue(remote.readValidated(address, node));
                if (node.isLeaf()) {
                    break;
                }
                address = node.child(node.childIndex(new long[] {key}));
            }
            if (table.ownerOf(node) < 0) {
                return new long[] {key, address};
            }
        }
        throw new AssertionError("no leaf spans a partition bound");
    }
}
