package dev.dex.core.node;

/**
 * The header every 1 KiB tree node starts with, and the node-wide constants: 64 bytes for 8-byte keys, as drawn
 * below; the fences are as wide as the index's keys, so wider keys make it longer ({@link KeyFormat}).
 * All fields are little-endian; 8-byte fields are 8-byte aligned so that they can be read and
 * compared-and-swapped as single words.
 *
 * <pre>
 *    0               8               16              24              32
 *   +---------------+---------------+---------------+---------------+
 *   | lock word     | version       | own address   | reserved (0)  |
 *   +---------------+---------------+---------------+---------------+
 *   32              40  41  42      44              48              56              64
 *   +---------------+---+---+-------+---------------+---------------+---------------+
 *   | reserved (0)  |typ|lvl| count | flags         | low fence     | high fence    |
 *   +---------------+---+---+-------+---------------+---------------+---------------+
 *   64 ........................ payload (laid out by KeyFormat for the index's key width)
 *   1016            1024
 *   +---------------+
 *   | back version  |
 *   +---------------+
 * </pre>
 *
 * <ul>
 *   <li><b>lock word</b>: the remote lock, the compare-and-swap target: 0 when free, otherwise the
 *       holder's tag (positive, unique per compute-side session), or -1 while a memory-side thread writes
 *       the node for an offloaded operation ({@code SubtreeExecutor.MEMORY_SIDE_WRITER}).</li>
 *   <li><b>version</b> (front) and <b>back version</b>: bumped together by every write of the node;
 *       equal in every whole image.</li>
 *   <li><b>own address</b>: the node's global address, so a reader can tell that it read what it aimed at.</li>
 *   <li><b>reserved</b> words 24 and 32: zero in remote memory; kept for the compute-side cache.</li>
 *   <li><b>type</b>: {@link #TYPE_LEAF} or {@link #TYPE_INNER}; <b>level</b>: 0 for leaves;
 *       <b>count</b>: entries of a leaf, separator keys of an inner node; <b>flags</b>: zero, reserved.</li>
 *   <li><b>fences</b>: the node holds keys in {@code (low, high]}. {@code Long.MIN_VALUE} as the low
 *       fence means minus infinity, {@code Long.MAX_VALUE} as the high fence plus infinity.</li>
 * </ul>
 */
public final class NodeHeaderDescriptor {
    public static final int NODE_LENGTH = 1024;

    public static final int LOCK_WORD_OFFSET = 0;
    public static final int VERSION_OFFSET = LOCK_WORD_OFFSET + Long.BYTES;
    public static final int ADDRESS_OFFSET = VERSION_OFFSET + Long.BYTES;
    public static final int RESERVED_0_OFFSET = ADDRESS_OFFSET + Long.BYTES;
    public static final int RESERVED_1_OFFSET = RESERVED_0_OFFSET + Long.BYTES;
    public static final int TYPE_OFFSET = RESERVED_1_OFFSET + Long.BYTES;
    public static final int LEVEL_OFFSET = TYPE_OFFSET + 1;
    public static final int COUNT_OFFSET = LEVEL_OFFSET + 1;
    public static final int FLAGS_OFFSET = COUNT_OFFSET + Short.BYTES;
    /** Where the fences start: the low fence, then the high fence, each as wide as a key ({@link KeyFormat}). */
    public static final int FENCES_OFFSET = FLAGS_OFFSET + Integer.BYTES;
    /** The low fence of an index of 8-byte keys. */
    public static final int LOW_FENCE_OFFSET = FENCES_OFFSET;
    /** The high fence of an index of 8-byte keys. */
    public static final int HIGH_FENCE_OFFSET = LOW_FENCE_OFFSET + Long.BYTES;
    /** The header of an index of 8-byte keys; wider keys have wider fences and a longer header. */
    public static final int HEADER_LENGTH = HIGH_FENCE_OFFSET + Long.BYTES;

    public static final int BACK_VERSION_OFFSET = NODE_LENGTH - Long.BYTES;

    /** Lock word plus version: what a reader reads before and after the node to validate it. */
    public static final int LOCK_AND_VERSION_LENGTH = 2 * Long.BYTES;

    public static final byte TYPE_LEAF = 1;
    public static final byte TYPE_INNER = 2;

    /**
     * The fence value meaning minus infinity; no key may take it. A wider key's fence is this in every word (all
     * bytes zero); plus infinity is {@link #POS_INFINITY} in every word (all bytes 0xff).
     */
    public static final long NEG_INFINITY = Long.MIN_VALUE;
    /** The fence value meaning plus infinity (it is also the largest key). */
    public static final long POS_INFINITY = Long.MAX_VALUE;
    /** The error every entry point gives for the reserved key {@link #NEG_INFINITY}. */
    public static final String RESERVED_KEY = "key Long.MIN_VALUE is reserved (it is the minus-infinity fence)";

    private NodeHeaderDescriptor() {
    }

    /**
     * Checks a user key.
     *
     * @return {@code key}
     * @throws IllegalArgumentException if {@code key} is the reserved {@link #NEG_INFINITY}
     */
    public static long checkKey(long key) {
        if (key == NEG_INFINITY) {
            throw new IllegalArgumentException(RESERVED_KEY);
        }
        return key;
    }

    /**
     * Checks a user key of any width: the reserved minus infinity (every word {@link #NEG_INFINITY}, all bytes zero)
     * is refused.
     *
     * @throws IllegalArgumentException if {@code key} is the reserved key
     */
    public static void checkKey(KeyFormat format, long[] key) {
        if (format.isNegInfinity(key, 0)) {
            throw new IllegalArgumentException(format.words() == 1 ? RESERVED_KEY
                    : "the empty key (all zero bytes) is reserved (it is the minus-infinity fence)");
        }
    }
}
