package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.BACK_VERSION_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.FENCES_OFFSET;

/**
 * The width of an index's keys, fixed when the index is formatted ({@code dex.tree.key-bytes}, stored in the
 * superblock), and the node layout it implies. A key is {@link #bytes()} bytes compared as unsigned bytes (memcmp
 * order); in a node and in the engine it is {@link #words()} longs, word {@code i} being bytes {@code [8i, 8i + 8)}
 * read big-endian with the sign bit flipped, so comparing the words in turn as signed longs compares the bytes.
 * An 8-byte key is one word: the {@code long} key of the index's {@code long} operations.
 *
 * <p>The layout (every offset a multiple of 8; fences at the end of the header, keys before values or children):
 *
 * <pre>
 *   0                                  48            48+W           48+2W = H
 *   +----------------------------------+-------------+-------------+
 *   | lock, version, address, ...      | low fence   | high fence  |     header (NodeHeaderDescriptor)
 *   +----------------------------------+-------------+-------------+
 *   leaf:  H | key[0..C) W bytes each | value[0..C) 8 bytes each | unused | 1016 back version
 *   inner: H | sep[0..C) W bytes each | child[0..C] 8 bytes each | unused | 1016 back version
 *
 *   W (bytes)          8      16     24     32     40     48     56     64
 *   header H          64      80     96    112    128    144    160    176
 *   leaf entries C    59      39     28     22     18     15     13     11
 *   inner separators  59      38     28     22     18     15     13     11
 * </pre>
 *
 * The 8-byte layout is the one every index had before widths existed, so indexes formatted then read the same.
 *
 * <p>Immutable; thread-safe. One instance per width ({@link #of}).
 */
public final class KeyFormat {
    /** The narrowest key: one word. */
    public static final int MIN_BYTES = 8;
    /** The widest key: eight words. */
    public static final int MAX_BYTES = 64;
    /** The default width (and the only one before widths existed). */
    public static final KeyFormat EIGHT = new KeyFormat(8);

    private static final KeyFormat[] FORMATS = new KeyFormat[MAX_BYTES / 8 + 1];

    static {
        FORMATS[1] = EIGHT;
        for (int words = 2; words < FORMATS.length; words++) {
            FORMATS[words] = new KeyFormat(words * 8);
        }
    }

    private final int bytes;
    private final int words;
    private final int highFenceOffset;
    private final int headerLength;
    private final int leafCapacity;
    private final int leafValuesOffset;
    private final int innerCapacity;
    private final int innerChildrenOffset;

    private KeyFormat(int bytes) {
        this.bytes = bytes;
        this.words = bytes / 8;
        this.highFenceOffset = FENCES_OFFSET + bytes;
        this.headerLength = FENCES_OFFSET + 2 * bytes;
        this.leafCapacity = (BACK_VERSION_OFFSET - headerLength) / (bytes + Long.BYTES);
        this.leafValuesOffset = headerLength + leafCapacity * bytes;
        this.innerCapacity = (BACK_VERSION_OFFSET - headerLength - Long.BYTES) / (bytes + Long.BYTES);
        this.innerChildrenOffset = headerLength + innerCapacity * bytes;
    }

    /**
     * The format of keys {@code bytes} wide.
     *
     * @throws IllegalArgumentException unless {@code bytes} is a multiple of 8 in [8, 64]
     */
    public static KeyFormat of(int bytes) {
        if (bytes < MIN_BYTES || bytes > MAX_BYTES || bytes % 8 != 0) {
            throw badWidth(bytes);
        }
        return FORMATS[bytes / 8];
    }

    /**
     * The format of a width stored in remote memory (superblock, ownership table): 0 is one stored before widths
     * existed, which is 8 bytes.
     *
     * @throws IllegalArgumentException as {@link #of}, for any other width that is not one
     */
    public static KeyFormat stored(long bytes) {
        if (bytes == 0) {
            return EIGHT;
        }
        if (bytes != (int) bytes) {
            throw badWidth(bytes);
        }
        return of((int) bytes);
    }

    private static IllegalArgumentException badWidth(long bytes) {
        return new IllegalArgumentException("key width " + bytes + " bytes: must be 8, 16, 24, 32, 40, 48, 56 or 64");
    }

    /** The key width in bytes. */
    public int bytes() {
        return bytes;
    }

    /** The key width in 8-byte words. */
    public int words() {
        return words;
    }

    public int highFenceOffset() {
        return highFenceOffset;
    }

    /** Where a node's payload starts. */
    public int headerLength() {
        return headerLength;
    }

    /** Entries per leaf. */
    public int leafCapacity() {
        return leafCapacity;
    }

    public int leafKeyOffset(int index) {
        return headerLength + index * bytes;
    }

    public int leafValueOffset(int index) {
        return leafValuesOffset + index * Long.BYTES;
    }

    /** Separator keys per inner node; children are one more. */
    public int innerCapacity() {
        return innerCapacity;
    }

    public int innerKeyOffset(int index) {
        return headerLength + index * bytes;
    }

    public int innerChildOffset(int index) {
        return innerChildrenOffset + index * Long.BYTES;
    }

    /**
     * The words of the byte-string key {@code key} (zero-padded to the width) into {@code out}.
     *
     * @throws IllegalArgumentException when {@code key} is longer than the width, or empty (all zero bytes:
     *                                  the reserved minus-infinity fence)
     */
    public void toWords(byte[] key, long[] out) {
        if (key.length > bytes) {
            throw new IllegalArgumentException("key " + Keys.format(key) + " is " + key.length + " bytes; this index's keys are at most "
                    + bytes + " bytes");
        }
        boolean empty = true;
        for (int w = 0; w < words; w++) {
            long word = 0;
            for (int i = 8 * w; i < 8 * w + 8; i++) {
                word = (word << 8) | (i < key.length ? key[i] & 0xFF : 0);
            }
            empty &= word == 0;
            out[w] = word ^ Long.MIN_VALUE;
        }
        if (empty) {
            throw new IllegalArgumentException("the empty key (all zero bytes) is reserved");
        }
    }

    /** The byte string of the key at {@code words[offset, offset + words())}, without trailing zero bytes. */
    public byte[] toBytes(long[] words, int offset) {
        byte[] key = new byte[bytes];
        for (int w = 0; w < this.words; w++) {
            long word = words[offset + w] ^ Long.MIN_VALUE;
            for (int i = 0; i < 8; i++) {
                key[8 * w + i] = (byte) (word >>> (56 - 8 * i));
            }
        }
        int length = bytes;
        while (length > 0 && key[length - 1] == 0) {
            length--;
        }
        return java.util.Arrays.copyOf(key, length);
    }

    /** Compares the keys at {@code a[ao, ao + words())} and {@code b[bo, bo + words())} as the index orders them. */
    public int compare(long[] a, int ao, long[] b, int bo) {
        for (int w = 0; w < words; w++) {
            int c = Long.compare(a[ao + w], b[bo + w]);
            if (c != 0) {
                return c;
            }
        }
        return 0;
    }

    /** Whether the key at {@code key[offset, offset + words())} is the reserved minus infinity (every word minimal). */
    public boolean isNegInfinity(long[] key, int offset) {
        for (int w = 0; w < words; w++) {
            if (key[offset + w] != NodeHeaderDescriptor.NEG_INFINITY) {
                return false;
            }
        }
        return true;
    }

    /** Whether the key at {@code key[offset, offset + words())} is plus infinity, the largest key (every word maximal). */
    public boolean isPosInfinity(long[] key, int offset) {
        for (int w = 0; w < words; w++) {
            if (key[offset + w] != NodeHeaderDescriptor.POS_INFINITY) {
                return false;
            }
        }
        return true;
    }

    @Override
    public String toString() {
        return bytes + "-byte keys";
    }
}
