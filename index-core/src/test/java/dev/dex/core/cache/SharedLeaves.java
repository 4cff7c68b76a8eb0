package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.rdma.RemoteMemory;

/** Finds, in a tree of 8-byte keys 2, 4, 6, ..., a leaf that spans a partition bound (shared: written under its lock). */
final class SharedLeaves {
    private SharedLeaves() {
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
