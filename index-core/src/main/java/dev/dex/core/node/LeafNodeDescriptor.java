package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.BACK_VERSION_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.HEADER_LENGTH;

/**
 * The 8-byte-key layout ({@link KeyFormat#EIGHT}; {@link KeyFormat} has every width's) of the payload of a leaf: sorted keys, then the values in the same order (little-endian longs).
 *
 * <pre>
 *   64                                536                              1008      1016           1024
 *   +---------------------------------+--------------------------------+---------+--------------+
 *   | key[0] key[1] ... key[58]       | value[0] ... value[58]         | unused  | back version |
 *   +---------------------------------+--------------------------------+---------+--------------+
 * </pre>
 *
 * Keys and values live in separate arrays so that a binary search touches only keys.
 */
public final class LeafNodeDescriptor {
    public static final int CAPACITY = (BACK_VERSION_OFFSET - HEADER_LENGTH) / (2 * Long.BYTES);
    public static final int KEYS_OFFSET = HEADER_LENGTH;
    public static final int VALUES_OFFSET = KEYS_OFFSET + CAPACITY * Long.BYTES;
    public static final int PAYLOAD_END = VALUES_OFFSET + CAPACITY * Long.BYTES;

    private LeafNodeDescriptor() {
    }

    public static int keyOffset(int index) {
        return KEYS_OFFSET + index * Long.BYTES;
    }

    public static int valueOffset(int index) {
        return VALUES_OFFSET + index * Long.BYTES;
    }
}
