package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.LOW_FENCE_OFFSET;

import org.agrona.MutableDirectBuffer;

/**
 * The node images of a merge (docs/merges.md): a node that takes in its right neighbour, a parent without the merged
 * child, and the merged node dead. Static helpers over {@link NodeView}'s buffer.
 *
 * <p>Stateless; each call works on images its caller owns.
 */
public final class NodeMerge {
    private NodeMerge() {
    }

    /** The count {@code left} would have after {@link #absorb absorbing} {@code right}. */
    public static int countAbsorbing(NodeView left, NodeView right) {
        return left.isLeaf() ? left.count() + right.count() : left.count() + 1 + right.count();
    }

    /**
     * Takes {@code right}, {@code left}'s right neighbour at the same level, into {@code left}: a leaf appends its
     * entries; an inner node appends right's low fence as the separator, then right's separators and children. Left
     * then covers both ranges (right's high fence). The result must fit ({@link #countAbsorbing} at most its capacity).
     */
    public static void absorb(NodeView left, NodeView right) {
        int n = left.count();
        int m = right.count();
        if (left.isLeaf() != right.isLeaf() || left.level() != right.level() || countAbsorbing(left, right) > left.capacity()) {
            throw new IllegalArgumentException("cannot merge " + right + " into " + left);
        }
        KeyFormat format = left.format();
        MutableDirectBuffer to = left.buffer();
        MutableDirectBuffer from = right.buffer();
        int l = left.offset();
        int r = right.offset();
        int w = format.bytes();
        if (left.isLeaf()) {
            to.putBytes(l + format.leafKeyOffset(n), from, r + format.leafKeyOffset(0), m * w);
            to.putBytes(l + format.leafValueOffset(n), from, r + format.leafValueOffset(0), m * Long.BYTES);
            left.count(n + m);
        } else {
            to.putBytes(l + format.innerKeyOffset(n), from, r + LOW_FENCE_OFFSET, w);
            to.putBytes(l + format.innerKeyOffset(n + 1), from, r + format.innerKeyOffset(0), m * w);
            to.putBytes(l + format.innerChildOffset(n + 1), from, r + format.innerChildOffset(0), (m + 1) * Long.BYTES);
            left.count(n + 1 + m);
        }
        to.putBytes(l + format.highFenceOffset(), from, r + format.highFenceOffset(), w);
    }

    /**
     * Removes child {@code index} (at least 1) and the separator below it from the inner node {@code node}: the child
     * before it covers its slot from now on.
     */
    public static void removeChild(NodeView node, int index) {
        int n = node.count();
        if (node.isLeaf() || index < 1 || index > n) {
            throw new IllegalArgumentException("no child " + index + " to remove from " + node);
        }
        KeyFormat format = node.format();
        MutableDirectBuffer buffer = node.buffer();
        int base = node.offset();
        int w = format.bytes();
        buffer.putBytes(base + format.innerKeyOffset(index - 1), buffer, base + format.innerKeyOffset(index), (n - index) * w);
        buffer.putBytes(base + format.innerChildOffset(index), buffer, base + format.innerChildOffset(index + 1),
                (n - index) * Long.BYTES);
        buffer.setMemory(base + format.innerKeyOffset(n - 1), w, (byte) 0);
        node.child(n, 0);
        node.count(n - 1);
    }

    /**
     * Makes {@code node} dead: no entries, and the empty range {@code (low, low]}, which covers no key, so a reader that
     * reaches it by a stale pointer restarts, as it does at any node whose fences refuse its key.
     */
    public static void kill(NodeView node) {
        node.count(0);
        node.buffer().putBytes(node.offset() + node.format().highFenceOffset(), node.buffer(), node.offset() + LOW_FENCE_OFFSET,
                node.format().bytes());
    }

    /**
     * Whether {@code node} is a whole dead leaf at {@code address} ({@link #kill}): a leaf, its own address, no entries,
     * unlocked, an empty range, and equal front and back versions.
     */
    public static boolean isDeadLeaf(NodeView node, long address) {
        if (!node.isLeaf() || node.address() != address || node.count() != 0 || node.lockWord() != 0
                || node.version() != node.backVersion()) {
            return false;
        }
        int w = node.format().bytes();
        int base = node.offset();
        for (int i = 0; i < w; i++) {
            if (node.buffer().getByte(base + LOW_FENCE_OFFSET + i) != node.buffer().getByte(base + node.format().highFenceOffset() + i)) {
                return false;
            }
        }
        return true;
    }

    /**
     * The next leaf of a free chain that the dead leaf {@code node} is on (0: the last), kept in its first payload word,
     * which a leaf without entries does not use.
     */
    public static long nextFree(NodeView node) {
        return node.buffer().getLong(node.offset() + node.format().headerLength(), java.nio.ByteOrder.LITTLE_ENDIAN);
    }

    /** Sets the dead leaf {@code node}'s next leaf on its free chain ({@link #nextFree}). */
    public static void nextFree(NodeView node, long next) {
        node.buffer().putLong(node.offset() + node.format().headerLength(), next, java.nio.ByteOrder.LITTLE_ENDIAN);
    }
}
