package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.BACK_VERSION_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.HEADER_LENGTH;

/**
 * The 8-byte-key layout ({@link KeyFormat#EIGHT}; {@link KeyFormat} has every width's) of the payload of an inner node: {@code count} separator keys and {@code count + 1} child addresses.
 *
 * <pre>
 *   64                                536                                       1016           1024
 *   +---------------------------------+-----------------------------------------+--------------+
 *   | sep[0] sep[1] ... sep[58]       | child[0] child[1] ... child[59]         | back version |
 *   +---------------------------------+-----------------------------------------+--------------+
 * </pre>
 *
 * Child {@code i} holds the keys in {@code (sep[i-1], sep[i]]}, where {@code sep[-1]} is the node's low
 * fence and {@code sep[count]} its high fence, so a key equal to a separator goes left.
 */
public final class InnerNodeDescriptor {
    /** Separator keys per node; children are one more. */
    public static final int CAPACITY = (BACK_VERSION_OFFSET - HEADER_LENGTH - Long.BYTES) / (2 * Long.BYTES);
    public static final int MAX_CHILDREN = CAPACITY + 1;
    public static final int KEYS_OFFSET = HEADER_LENGTH;
    public static final int CHILDREN_OFFSET = KEYS_OFFSET + CAPACITY * Long.BYTES;
    public static final int PAYLOAD_END = CHILDREN_OFFSET + MAX_CHILDREN * Long.BYTES;

    private InnerNodeDescriptor() {
    }

    public static int keyOffset(int index) {
        return KEYS_OFFSET + index * Long.BYTES;
    }

    public static int childOffset(int index) {
        return CHILDREN_OFFSET + index * Long.BYTES;
    }
}
