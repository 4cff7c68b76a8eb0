package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.BACK_VERSION_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.POS_INFINITY;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Nodes of every key width: the layouts fit the node and match the table in {@link KeyFormat}'s documentation, and
 * inserts, removes, searches, splits, clipping and scans agree with a model ordered as unsigned bytes (memcmp) of the
 * keys. Keys share long prefixes, so most comparisons are decided by a later word.
 */
class WideKeyNodeTest {

    @Test
    void aStoredWidthOfZeroIsTheEightByteLayoutAndADamagedOneIsRefusedWithItsValue() {
        assertEquals(KeyFormat.EIGHT, KeyFormat.stored(0), "a superblock or table written before widths existed");
        assertEquals(KeyFormat.of(24), KeyFormat.stored(24));
        for (long damaged : new long[] {12, -8, 72, 1L << 40}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> KeyFormat.stored(damaged));
            assertTrue(e.getMessage().startsWith("key width " + damaged + " bytes"), e.getMessage());
        }
    }

    @Test
    void layoutsFitTheNodeAndKeepTheEightByteLayout() {
        int[][] table = {{8, 64, 59, 59}, {16, 80, 39, 38}, {24, 96, 28, 28}, {32, 112, 22, 22}, {40, 128, 18, 18},
                {48, 144, 15, 15}, {56, 160, 13, 13}, {64, 176, 11, 11}};
        for (int[] row : table) {
            KeyFormat f = KeyFormat.of(row[0]);
            assertEquals(row[0] / 8, f.words());
            assertEquals(row[1], f.headerLength(), f.toString());
            assertEquals(row[2], f.leafCapacity(), f.toString());
            assertEquals(row[3], f.innerCapacity(), f.toString());
            assertTrue(f.leafValueOffset(f.leafCapacity()) <= BACK_VERSION_OFFSET, "leaf values fit: " + f);
            assertTrue(f.leafValueOffset(f.leafCapacity()) + f.bytes() + 8 > BACK_VERSION_OFFSET, "one more leaf entry would not fit: " + f);
            assertTrue(f.innerChildOffset(f.innerCapacity() + 1) <= BACK_VERSION_OFFSET, "inner children fit: " + f);
            assertTrue(f.innerChildOffset(f.innerCapacity() + 1) + f.bytes() + 8 > BACK_VERSION_OFFSET, "no room for one more: " + f);
            assertEquals(0, f.leafValueOffset(0) % 8);
            assertEquals(0, f.innerChildOffset(0) % 8);
            assertEquals(0, f.highFenceOffset() % 8);
        }
        KeyFormat eight = KeyFormat.EIGHT;
        assertEquals(NodeHeaderDescriptor.HEADER_LENGTH, eight.leafKeyOffset(0), "the 8-byte layout of indexes formatted before widths");
        assertEquals(NodeHeaderDescriptor.HEADER_LENGTH + 59 * 8, eight.leafValueOffset(0));
        assertEquals(536, eight.innerChildOffset(0));
        assertEquals(NodeHeaderDescriptor.HIGH_FENCE_OFFSET, eight.highFenceOffset());
        for (int bad : new int[] {0, 7, 12, 72}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> KeyFormat.of(bad));
            assertTrue(e.getMessage().startsWith("key width " + bad + " bytes"), e.getMessage());
        }
    }

    @ParameterizedTest(name = "{0}-byte keys")
    @ValueSource(ints = {8, 16, 24, 32, 64})
    void wordsOrderKeysAsUnsignedBytesAndGiveTheBytesBack(int width) {
        KeyFormat f = KeyFormat.of(width);
        SplittableRandom random = new SplittableRandom(width);
        long[] a = new long[f.words()];
        long[] b = new long[f.words()];
        for (int i = 0; i < 20_000; i++) {
            byte[] x = randomBytes(random, f);
            byte[] y = randomBytes(random, f);
            f.toWords(x, a);
            f.toWords(y, b);
            assertEquals(Integer.signum(Arrays.compareUnsigned(x, y)), Integer.signum(f.compare(a, 0, b, 0)));
            assertArrayEquals(trim(x), f.toBytes(a, 0));
        }
        assertThrows(IllegalArgumentException.class, () -> f.toWords(new byte[width + 1], a), "too long");
        assertThrows(IllegalArgumentException.class, () -> f.toWords(new byte[3], a), "the empty key");
    }

    @ParameterizedTest(name = "{0}-byte keys")
    @ValueSource(ints = {8, 16, 24, 32, 64})
    void leafEditsAndScansAgreeWithAModel(int width) {
        KeyFormat f = KeyFormat.of(width);
        NodeView leaf = new NodeView(f).wrap(new UnsafeBuffer(new byte[NODE_LENGTH]), 0);
        leaf.init(1024, 0, NEG_INFINITY, POS_INFINITY);
        TreeMap<byte[], Long> model = new TreeMap<>(Arrays::compareUnsigned);
        SplittableRandom random = new SplittableRandom(width * 31L);
        long[] key = new long[f.words()];
        for (int round = 0; round < 2_000; round++) {
            byte[] bytes = randomBytes(random, f);
            f.toWords(bytes, key);
            int pos = leaf.search(key);
            assertEquals(model.containsKey(bytes), pos >= 0, "search agrees with the model");
            if (pos >= 0 && (random.nextInt(3) == 0 || leaf.isFull())) {
                LeafOps.apply(leaf, pos, LeafOps.DELETE, key, 0);
                model.remove(bytes);
            } else if (pos < 0 && !leaf.isFull()) {
                LeafOps.apply(leaf, pos, LeafOps.INSERT, key, round);
                model.put(bytes, (long) round);
            } else if (pos >= 0) {
                LeafOps.apply(leaf, pos, LeafOps.UPDATE, key, -round);
                model.put(bytes, (long) -round);
            }
            assertEquals(model.size(), leaf.count());
        }
        assertEquals(f.leafCapacity(), leaf.capacity());
        int i = 0;
        for (Map.Entry<byte[], Long> e : model.entrySet()) {
            leaf.key(i, key, 0);
            assertArrayEquals(e.getKey(), f.toBytes(key, 0), "entry " + i + " in order");
            assertEquals(e.getValue(), leaf.value(i));
            i++;
        }
        // A scan from a key between entries, stopping at another.
        List<byte[]> keys = new ArrayList<>(model.keySet());
        if (keys.size() >= 4) {
            long[] from = new long[f.words()];
            long[] stop = new long[f.words()];
            f.toWords(keys.get(1), from);
            f.toWords(keys.get(keys.size() - 2), stop);
            long[] out = new long[keys.size() * f.words()];
            long[] values = new long[keys.size()];
            int n = LeafOps.copyRange(leaf, from, stop, out, values, 0, keys.size());
            assertEquals(keys.size() - 2, n, "from the second key to the one before last, both included");
            for (int j = 0; j < n; j++) {
                assertArrayEquals(keys.get(j + 1), f.toBytes(out, j * f.words()));
                assertEquals(model.get(keys.get(j + 1)), values[j]);
            }
        }
    }

    @ParameterizedTest(name = "{0}-byte keys")
    @ValueSource(ints = {8, 16, 32, 64})
    void splitsAndClipsKeepFencesAndEntries(int width) {
        KeyFormat f = KeyFormat.of(width);
        int m = f.words();
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[2 * NODE_LENGTH]);
        NodeView left = new NodeView(f).wrap(buffer, 0);
        NodeView right = new NodeView(f).wrap(buffer, NODE_LENGTH);
        left.init(1024, 0, NEG_INFINITY, POS_INFINITY);
        long[][] keys = new long[f.leafCapacity()][];
        for (int k = 0; k < keys.length; k++) {
            keys[k] = sharedPrefixKey(f, k + 1);
            left.appendEntry(keys[k], k);
        }
        assertTrue(left.isFull());
        long[] separator = new long[m];
        left.splitInto(right, 2048, separator);
        int keep = keys.length / 2;
        assertEquals(keep, left.count());
        assertEquals(keys.length - keep, right.count());
        assertArrayEquals(keys[keep - 1], separator, "the separator is the largest key kept on the left");
        long[] fence = new long[m];
        left.highFence(fence);
        assertArrayEquals(separator, fence);
        right.lowFence(fence);
        assertArrayEquals(separator, fence);
        assertTrue(right.highFenceIsInfinite());
        assertFalse(left.highFenceIsInfinite());
        assertTrue(left.covers(keys[keep - 1]));
        assertFalse(left.covers(keys[keep]));
        assertTrue(right.covers(keys[keep]));
        assertEquals(2048, right.address());
        assertEquals(keep, right.value(0));

        // An inner node: separators are the keys, children their indexes.
        NodeView inner = new NodeView(f).wrap(buffer, 0);
        inner.init(1024, 1, NEG_INFINITY, POS_INFINITY);
        inner.child(0, 100);
        for (int k = 0; k < f.innerCapacity(); k++) {
            inner.appendChild(keys[k], 101 + k);
        }
        assertEquals(0, inner.childIndex(keys[0]), "a key equal to a separator goes left");
        long[] between = keys[3].clone();
        between[m - 1]++;
        assertEquals(4, inner.childIndex(between));
        int mid = f.innerCapacity() / 2;
        inner.splitInto(right, 4096, separator);
        assertArrayEquals(keys[mid], separator, "the middle separator moves up");
        assertEquals(mid, inner.count());
        assertEquals(f.innerCapacity() - mid - 1, right.count());
        assertEquals(101 + mid, right.child(0));
        assertEquals(100 + mid, inner.child(mid));

        // Clipping the left half of a split the parent already knows about.
        inner.init(1024, 0, NEG_INFINITY, POS_INFINITY);
        for (int k = 0; k < 8 && k < f.leafCapacity(); k++) {
            inner.appendEntry(keys[k], k);
        }
        inner.clipAbove(keys[4]);
        assertEquals(5, inner.count());
        inner.highFence(fence);
        assertArrayEquals(keys[4], fence);
        inner.insertEntry(0, sharedPrefixKey(f, 0), -1);
        assertEquals(-1, inner.value(0));
        assertEquals(0, inner.search(sharedPrefixKey(f, 0)));
    }

    /** Keys whose words are all equal but the last, which is {@code n}: every comparison reads every word. */
    private static long[] sharedPrefixKey(KeyFormat f, long n) {
        long[] key = new long[f.words()];
        Arrays.fill(key, 0x1234_5678_9abc_def0L);
        key[f.words() - 1] = n;
        return key;
    }

    private static byte[] randomBytes(SplittableRandom random, KeyFormat f) {
        byte[] key = new byte[1 + random.nextInt(f.bytes())];
        // A common prefix and few byte values, so that keys share long prefixes and collide often.
        for (int i = 0; i < key.length; i++) {
            key[i] = i < f.bytes() - 3 ? (byte) 'k' : (byte) new int[] {0, 1, 0x7f, 0x80, 0xff}[random.nextInt(5)];
        }
        return trim(key).length == 0 ? new byte[] {1} : trim(key);
    }

    private static byte[] trim(byte[] key) {
        int n = key.length;
        while (n > 0 && key[n - 1] == 0) {
            n--;
        }
        return Arrays.copyOf(key, n);
    }
}
