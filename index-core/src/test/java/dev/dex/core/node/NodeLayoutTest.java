package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.TreeMap;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.core.tree.SuperblockDescriptor;

class NodeLayoutTest {

    @Test
    void headerFieldsAreChainedAlignedAndFillSixtyFourBytes() {
        assertEquals(1024, NODE_LENGTH);
        assertEquals(0, LOCK_WORD_OFFSET, "the lock word is word 0, the compare-and-swap target");
        assertEquals(8, VERSION_OFFSET);
        assertEquals(16, ADDRESS_OFFSET);
        assertEquals(40, TYPE_OFFSET);
        assertEquals(41, LEVEL_OFFSET);
        assertEquals(42, COUNT_OFFSET);
        assertEquals(44, FLAGS_OFFSET);
        assertEquals(48, LOW_FENCE_OFFSET);
        assertEquals(56, HIGH_FENCE_OFFSET);
        assertEquals(64, HEADER_LENGTH);
        assertEquals(1016, BACK_VERSION_OFFSET);
        for (int offset : new int[] {LOCK_WORD_OFFSET, VERSION_OFFSET, ADDRESS_OFFSET, LOW_FENCE_OFFSET, HIGH_FENCE_OFFSET, BACK_VERSION_OFFSET}) {
            assertEquals(0, offset % 8, "8-byte field at " + offset + " must be word aligned");
        }
        assertEquals(16, LOCK_AND_VERSION_LENGTH, "lock word and version are adjacent, read as one 16-byte verb");
    }

    @Test
    void eightByteLeafPayloadFitsBetweenHeaderAndBackVersion() {
        KeyFormat eight = KeyFormat.EIGHT;
        assertEquals(59, eight.leafCapacity());
        assertEquals(HEADER_LENGTH, eight.leafKeyOffset(0));
        assertEquals(HEADER_LENGTH + 59 * 8, eight.leafValueOffset(0));
        assertEquals(1008, eight.leafValueOffset(eight.leafCapacity()), "payload end");
        assertTrue(eight.leafValueOffset(eight.leafCapacity()) <= BACK_VERSION_OFFSET);
        assertTrue((eight.leafCapacity() + 1) * 16 + HEADER_LENGTH > BACK_VERSION_OFFSET, "capacity is the largest that fits");
        assertEquals(0, eight.leafValueOffset(0) % 8);
    }

    @Test
    void eightByteInnerPayloadFitsBetweenHeaderAndBackVersion() {
        KeyFormat eight = KeyFormat.EIGHT;
        assertEquals(59, eight.innerCapacity());
        assertEquals(HEADER_LENGTH, eight.innerKeyOffset(0));
        assertEquals(536, eight.innerChildOffset(0));
        assertEquals(BACK_VERSION_OFFSET, eight.innerChildOffset(eight.innerCapacity() + 1), "an inner node uses every byte");
        assertEquals(0, eight.innerChildOffset(0) % 8);
    }

    @Test
    void superblockWordsAreAlignedInsideTheRootArea() {
        assertEquals(0, SuperblockDescriptor.ROOT_ADDRESS % 8);
        assertEquals(0, SuperblockDescriptor.INSTANCE_COUNT_ADDRESS % 8);
        assertEquals(32, SuperblockDescriptor.PARTITION_COUNT_OFFSET);
        assertEquals(36, SuperblockDescriptor.KEY_BYTES_OFFSET);
        assertEquals(40, SuperblockDescriptor.LENGTH);
        assertTrue(SuperblockDescriptor.PARTITION_BOUNDS_OFFSET >= SuperblockDescriptor.LENGTH);
        assertEquals(0, SuperblockDescriptor.PARTITION_BOUNDS_ADDRESS % 8);
        assertTrue(SuperblockDescriptor.ADDRESS >= dev.dex.rdma.RegionHeaderDescriptor.HEADER_LENGTH);
        long rootAreaEnd = dev.dex.rdma.GlobalAddress.offset(SuperblockDescriptor.ADDRESS) + SuperblockDescriptor.PARTITION_BOUNDS_OFFSET
                + (dev.dex.core.partition.PartitionTable.MAX_PARTITIONS - 1) * 8L;
        assertTrue(rootAreaEnd <= 16 * 1024, "the largest partition table fits the root area of a 16 KiB chunk: " + rootAreaEnd);
        // What the smallest chunk holds: at least the 256 partitions of the first layout, and exactly what fits.
        int smallest = dev.dex.core.partition.PartitionTable.maxPartitions(dev.dex.rdma.RegionHeaderDescriptor.MIN_CHUNK_LENGTH);
        assertEquals(497, smallest);
        assertTrue(dev.dex.rdma.GlobalAddress.offset(SuperblockDescriptor.ADDRESS) + SuperblockDescriptor.PARTITION_BOUNDS_OFFSET
                + (smallest - 1) * 8L <= dev.dex.rdma.RegionHeaderDescriptor.MIN_CHUNK_LENGTH);
        assertEquals(1024, dev.dex.core.partition.PartitionTable.maxPartitions(16 * 1024));
    }

    @Test
    void descriptorsAreConstantHolders() throws Exception {
        for (Class<?> type : new Class<?>[] {NodeHeaderDescriptor.class, dev.dex.core.tree.SuperblockDescriptor.class}) {
            assertTrue(Modifier.isFinal(type.getModifiers()), type + " is final");
            for (Field f : type.getDeclaredFields()) {
                assertTrue(Modifier.isStatic(f.getModifiers()) && Modifier.isFinal(f.getModifiers()), f + " is a constant");
            }
        }
    }

    @Test
    void fieldsAreLittleEndianAtTheirOffsets() {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[NODE_LENGTH + 64]);
        NodeView node = new NodeView().wrap(buffer, 64);
        node.init(0x0102030405060708L, 3, -5, 77);
        node.count(0x1234);
        assertEquals(0x08, buffer.getByte(64 + ADDRESS_OFFSET), "least significant byte first");
        assertEquals(0x34, buffer.getByte(64 + COUNT_OFFSET));
        assertEquals(3, buffer.getByte(64 + LEVEL_OFFSET));
        assertEquals(TYPE_INNER, buffer.getByte(64 + TYPE_OFFSET));
        assertEquals(1, node.version());
        assertEquals(1, node.backVersion());
        assertEquals(-5, node.lowFence());
        assertEquals(77, node.highFence());
        assertTrue(node.covers(77));
        assertFalse(node.covers(-5), "the low fence is exclusive");
    }

    @Test
    void leafInsertAndRemoveKeepKeysSortedAndValuesAligned() {
        NodeView leaf = new NodeView().wrap(new UnsafeBuffer(new byte[NODE_LENGTH]), 0);
        leaf.init(1024, 0, NEG_INFINITY, POS_INFINITY);
        TreeMap<Long, Long> model = new TreeMap<>();
        java.util.SplittableRandom random = new java.util.SplittableRandom(7);
        while (!leaf.isFull()) {
            long key = random.nextLong(-1000, 1000);
            int pos = leaf.search(key);
            if (pos < 0) {
                leaf.insertEntry(-pos - 1, key, key * 10);
                model.put(key, key * 10);
            }
        }
        assertEquals(KeyFormat.EIGHT.leafCapacity(), leaf.count());
        for (int i = 0; i < 20; i++) {
            long key = model.keySet().stream().skip(random.nextInt(model.size())).findFirst().orElseThrow();
            leaf.removeEntry(leaf.search(key));
            model.remove(key);
        }
        int i = 0;
        for (var e : model.entrySet()) {
            assertEquals(e.getKey(), leaf.key(i));
            assertEquals(e.getValue(), leaf.value(i));
            i++;
        }
        assertEquals(model.size(), leaf.count());
    }

    @Test
    void leafSplitMovesTheUpperHalfAndNarrowsFences() {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[2 * NODE_LENGTH]);
        NodeView left = new NodeView().wrap(buffer, 0);
        NodeView right = new NodeView().wrap(buffer, NODE_LENGTH);
        left.init(1024, 0, 0, 1000);
        for (int k = 1; k <= KeyFormat.EIGHT.leafCapacity(); k++) {
            left.appendEntry(k * 10L, k);
        }
        long separator = left.splitInto(right, 2048);
        assertEquals(29, left.count());
        assertEquals(30, right.count());
        assertEquals(290, separator, "the separator is the largest key kept on the left");
        assertEquals(290, left.highFence());
        assertEquals(0, left.lowFence());
        assertEquals(290, right.lowFence());
        assertEquals(1000, right.highFence());
        assertEquals(300, right.key(0));
        assertEquals(30, right.value(0));
        assertEquals(2048, right.address());
        assertEquals(0, right.level());
        assertTrue(right.isLeaf());
    }

    @Test
    void innerSplitPushesTheMiddleSeparatorUp() {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[2 * NODE_LENGTH]);
        NodeView left = new NodeView().wrap(buffer, 0);
        NodeView right = new NodeView().wrap(buffer, NODE_LENGTH);
        left.init(1024, 2, NEG_INFINITY, POS_INFINITY);
        left.child(0, 100_000);
        for (int k = 1; k <= KeyFormat.EIGHT.innerCapacity(); k++) {
            left.appendChild(k * 10L, 100_000 + k);
        }
        long separator = left.splitInto(right, 4096);
        assertEquals(29, left.count());
        assertEquals(29, right.count());
        assertEquals(300, separator, "the middle separator moves up and stays in neither node");
        assertEquals(290, left.key(28));
        assertEquals(100_029, left.child(29));
        assertEquals(310, right.key(0));
        assertEquals(100_030, right.child(0));
        assertEquals(100_059, right.child(29));
        assertEquals(300, left.highFence());
        assertEquals(300, right.lowFence());
        assertEquals(2, right.level());
        assertEquals(0, left.childIndex(-5));
        assertEquals(0, left.childIndex(10), "a key equal to a separator goes left");
        assertEquals(1, left.childIndex(11));
        assertEquals(29, right.childIndex(POS_INFINITY));
    }

    @Test
    void insertSeparatorShiftsKeysAndChildren() {
        NodeView inner = new NodeView().wrap(new UnsafeBuffer(new byte[NODE_LENGTH]), 0);
        inner.init(1024, 1, NEG_INFINITY, POS_INFINITY);
        inner.child(0, 1);
        inner.appendChild(100, 2);
        inner.appendChild(200, 3);
        inner.insertSeparator(1, 150, 9);
        assertEquals(3, inner.count());
        assertEquals(100, inner.key(0));
        assertEquals(150, inner.key(1));
        assertEquals(200, inner.key(2));
        assertEquals(1, inner.child(0));
        assertEquals(2, inner.child(1));
        assertEquals(9, inner.child(2));
        assertEquals(3, inner.child(3));
    }
}
