package dev.dex.core.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.RemoteMemory;
import dev.dex.core.node.KeyFormat;

/** The validator's count of nodes left locked, on a sound tree and on a damaged one. */
class TreeValidatorTest {
    private static final int ENTRIES = 20_000;

    private static void load(RemoteMemory memory) {
        long[] keys = new long[ENTRIES];
        long[] values = new long[ENTRIES];
        for (int i = 0; i < ENTRIES; i++) {
            keys[i] = 10L * (i + 1);
            values[i] = keys[i] + 1;
        }
        BulkLoader.formatAndLoad(memory, TreeSettings.defaults(), SortedEntries.of(keys, values), n -> { });
    }

    private static NodeView node(RemoteMemory memory, long address) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]);
        memory.read(address, buffer, 0, NodeHeaderDescriptor.NODE_LENGTH);
        return new NodeView(Superblock.read(memory).keyFormat()).wrap(buffer, 0);
    }

    @Test
    void countsTheNodesLeftLockedAndTheValidatorRefusesThem() {
        try (TestPools pools = new TestPools(2, 32)) {
            RemoteMemory memory = pools.connect();
            load(memory);
            assertEquals(0, TreeValidator.lockedNodes(memory));
            long root = Superblock.read(memory).root();
            long firstInner = node(memory, root).child(0);
            long leaf = node(memory, firstInner).child(3);
            memory.compareAndSwap(root + NodeHeaderDescriptor.LOCK_WORD_OFFSET, 0, 77);
            memory.compareAndSwap(leaf + NodeHeaderDescriptor.LOCK_WORD_OFFSET, 0, 78);

            assertEquals(2, TreeValidator.lockedNodes(memory));
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> TreeValidator.validate(memory));
            assertTrue(e.getMessage().contains("left locked by tag 77") && e.getMessage().contains("left locked by tag 78"),
                    e.getMessage());
        }
    }

    @Test
    void countsLockedNodesOfADamagedTreeAndEnds() {
        try (TestPools pools = new TestPools(1, 32)) {
            RemoteMemory memory = pools.connect();
            load(memory);
            long root = Superblock.read(memory).root();
            long firstInner = node(memory, root).child(0);
            long leaf = node(memory, firstInner).child(0);
            memory.compareAndSwap(leaf + NodeHeaderDescriptor.LOCK_WORD_OFFSET, 0, 5);
            // The second inner node's first child now points back at the root, one level too high: a cycle.
            long secondInner = node(memory, root).child(1);
            int childSlot = KeyFormat.EIGHT.innerChildOffset(0);
            UnsafeBuffer pointer = new UnsafeBuffer(new byte[Long.BYTES]);
            pointer.putLong(0, root, java.nio.ByteOrder.LITTLE_ENDIAN);
            memory.write(secondInner + childSlot, pointer, 0, Long.BYTES);

            assertEquals(1, TreeValidator.lockedNodes(memory));
            assertThrows(IllegalStateException.class, () -> TreeValidator.validate(memory));
        }
    }
}
