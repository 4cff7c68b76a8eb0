package dev.dex.core.node;

import static dev.dex.core.node.NodeHeaderDescriptor.ADDRESS_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.BACK_VERSION_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.COUNT_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.FLAGS_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.HIGH_FENCE_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.LEVEL_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.LOCK_WORD_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.LOW_FENCE_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.TYPE_INNER;
import static dev.dex.core.node.NodeHeaderDescriptor.TYPE_LEAF;
import static dev.dex.core.node.NodeHeaderDescriptor.TYPE_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.VERSION_OFFSET;

import java.nio.ByteOrder;

import org.agrona.MutableDirectBuffer;

/**
 * Flyweight over one node image (1 KiB) in a buffer: reads and edits fields in place.
 *
 * <p>Not thread-safe: a view and the image it wraps belong to one thread (a local copy read from remote
 * memory, or a frame held under a lock). Searches assume a consistent image; callers validate versions
 * before trusting what a search returned.
 */
public final class NodeView {
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    private MutableDirectBuffer buffer;
    private int base;

    /** Points this view at the node image at {@code buffer[offset, offset + 1024)}. */
    public NodeView wrap(MutableDirectBuffer buffer, int offset) {
        if (offset < 0 || offset > buffer.capacity() - NODE_LENGTH) {
            throw new IllegalArgumentException("node image at " + offset + " does not fit a buffer of " + buffer.capacity());
        }
        this.buffer = buffer;
        this.base = offset;
        return this;
    }

    public MutableDirectBuffer buffer() {
        return buffer;
    }

    public int offset() {
        return base;
    }

    // ---- header -------------------------------------------------------------------------------------

    public long lockWord() {
        return buffer.getLong(base + LOCK_WORD_OFFSET, ORDER);
    }

    public void lockWord(long tag) {
        buffer.putLong(base + LOCK_WORD_OFFSET, tag, ORDER);
    }

    public long version() {
        return buffer.getLong(base + VERSION_OFFSET, ORDER);
    }

    public long backVersion() {
        return buffer.getLong(base + BACK_VERSION_OFFSET, ORDER);
    }

    /** Sets the front and the back version. */
    public void version(long version) {
        buffer.putLong(base + VERSION_OFFSET, version, ORDER);
        buffer.putLong(base + BACK_VERSION_OFFSET, version, ORDER);
    }

    public long address() {
        return buffer.getLong(base + ADDRESS_OFFSET, ORDER);
    }

    public void address(long address) {
        buffer.putLong(base + ADDRESS_OFFSET, address, ORDER);
    }

    public byte type() {
        return buffer.getByte(base + TYPE_OFFSET);
    }

    public boolean isLeaf() {
        return buffer.getByte(base + TYPE_OFFSET) == TYPE_LEAF;
    }

    public int level() {
        return buffer.getByte(base + LEVEL_OFFSET) & 0xFF;
    }

    public int count() {
        return buffer.getShort(base + COUNT_OFFSET, ORDER) & 0xFFFF;
    }

    public void count(int count) {
        buffer.putShort(base + COUNT_OFFSET, (short) count, ORDER);
    }

    public long lowFence() {
        return buffer.getLong(base + LOW_FENCE_OFFSET, ORDER);
    }

    public long highFence() {
        return buffer.getLong(base + HIGH_FENCE_OFFSET, ORDER);
    }

    public void fences(long low, long high) {
        buffer.putLong(base + LOW_FENCE_OFFSET, low, ORDER);
        buffer.putLong(base + HIGH_FENCE_OFFSET, high, ORDER);
    }

    /** True when {@code key} lies in this node's range {@code (low, high]}. */
    public boolean covers(long key) {
        return key > lowFence() && key <= highFence();
    }

    /**
     * The count, clamped to the capacity: an optimistic reader may see a torn image, and its searches must
     * stay inside the node until validation rejects what they found.
     */
    private int boundedCount() {
        return Math.min(count(), LeafNodeDescriptor.CAPACITY);
    }

    public int capacity() {
        return isLeaf() ? LeafNodeDescriptor.CAPACITY : InnerNodeDescriptor.CAPACITY;
    }

    public boolean isFull() {
        return count() >= capacity();
    }

    /** Formats an empty node: zero lock word, version 1, no entries. */
    public void init(long address, int level, long low, long high) {
        buffer.setMemory(base, NODE_LENGTH, (byte) 0);
        address(address);
        buffer.putByte(base + TYPE_OFFSET, level == 0 ? TYPE_LEAF : TYPE_INNER);
        buffer.putByte(base + LEVEL_OFFSET, (byte) level);
        buffer.putInt(base + FLAGS_OFFSET, 0, ORDER);
        fences(low, high);
        version(1);
    }

    public void copyFrom(NodeView other) {
        buffer.putBytes(base, other.buffer, other.base, NODE_LENGTH);
    }

    // ---- keys (both kinds share the key array offset) ------------------------------------------------

    public long key(int index) {
        return buffer.getLong(base + LeafNodeDescriptor.KEYS_OFFSET + index * Long.BYTES, ORDER);
    }

    private void key(int index, long key) {
        buffer.putLong(base + LeafNodeDescriptor.KEYS_OFFSET + index * Long.BYTES, key, ORDER);
    }

    /**
     * Binary search of the keys.
     *
     * @return the key's index, or {@code -(insertion point) - 1} when absent
     */
    public int search(long key) {
        int lo = 0;
        int hi = boundedCount() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            long k = key(mid);
            if (k < key) {
                lo = mid + 1;
            } else if (k > key) {
                hi = mid - 1;
            } else {
                return mid;
            }
        }
        return -(lo + 1);
    }

    // ---- leaf ----------------------------------------------------------------------------------------

    public long value(int index) {
        return buffer.getLong(base + LeafNodeDescriptor.valueOffset(index), ORDER);
    }

    public void value(int index, long value) {
        buffer.putLong(base + LeafNodeDescriptor.valueOffset(index), value, ORDER);
    }

    /** Inserts at {@code index}, shifting later entries right; the leaf must not be full. */
    public void insertEntry(int index, long key, long value) {
        int n = count();
        shift(LeafNodeDescriptor.keyOffset(index), n - index, Long.BYTES);
        shift(LeafNodeDescriptor.valueOffset(index), n - index, Long.BYTES);
        key(index, key);
        value(index, value);
        count(n + 1);
    }

    /** Removes the entry at {@code index}, shifting later entries left. */
    public void removeEntry(int index) {
        int n = count();
        int tail = n - index - 1;
        move(LeafNodeDescriptor.keyOffset(index + 1), LeafNodeDescriptor.keyOffset(index), tail);
        move(LeafNodeDescriptor.valueOffset(index + 1), LeafNodeDescriptor.valueOffset(index), tail);
        key(n - 1, 0);
        value(n - 1, 0);
        count(n - 1);
    }

    /** Appends an entry with a key larger than every key here; used by bulk load. */
    public void appendEntry(long key, long value) {
        int n = count();
        key(n, key);
        value(n, value);
        count(n + 1);
    }

    // ---- inner ---------------------------------------------------------------------------------------

    public long child(int index) {
        return buffer.getLong(base + InnerNodeDescriptor.childOffset(index), ORDER);
    }

    public void child(int index, long address) {
        buffer.putLong(base + InnerNodeDescriptor.childOffset(index), address, ORDER);
    }

    /** Index of the child whose range holds {@code key}: the number of separators below {@code key}. */
    public int childIndex(long key) {
        int lo = 0;
        int hi = boundedCount();
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (key(mid) < key) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /**
     * Records that child {@code childIndex} was split at {@code separator}: its upper part is now
     * {@code rightChild}. The inner node must not be full.
     */
    public void insertSeparator(int childIndex, long separator, long rightChild) {
        int n = count();
        shift(InnerNodeDescriptor.keyOffset(childIndex), n - childIndex, Long.BYTES);
        shift(InnerNodeDescriptor.childOffset(childIndex + 1), n - childIndex, Long.BYTES);
        key(childIndex, separator);
        child(childIndex + 1, rightChild);
        count(n + 1);
    }

    /** Appends a child to the right of every existing one; {@code separator} bounds the previous child. */
    public void appendChild(long separator, long child) {
        int n = count();
        key(n, separator);
        child(n + 1, child);
        count(n + 1);
    }

    // ---- split ---------------------------------------------------------------------------------------

    /**
     * Moves the upper half of this full node into {@code right} (formatted here with {@code rightAddress})
     * and narrows both fence ranges.
     *
     * @return the separator: the new high fence of this node and the low fence of {@code right}
     */
    public long splitInto(NodeView right, long rightAddress) {
        int n = count();
        long high = highFence();
        right.init(rightAddress, level(), 0, 0);
        long separator;
        if (isLeaf()) {
            int keep = n / 2;
            int moved = n - keep;
            right.buffer.putBytes(right.base + LeafNodeDescriptor.KEYS_OFFSET, buffer, base + LeafNodeDescriptor.keyOffset(keep), moved * Long.BYTES);
            right.buffer.putBytes(right.base + LeafNodeDescriptor.VALUES_OFFSET, buffer, base + LeafNodeDescriptor.valueOffset(keep), moved * Long.BYTES);
            right.count(moved);
            separator = key(keep - 1);
            buffer.setMemory(base + LeafNodeDescriptor.keyOffset(keep), moved * Long.BYTES, (byte) 0);
            buffer.setMemory(base + LeafNodeDescriptor.valueOffset(keep), moved * Long.BYTES, (byte) 0);
            count(keep);
        } else {
            // Separators s[0..n), children c[0..n]. Left keeps s[0..mid) and c[0..mid], s[mid] moves up,
            // right takes s[mid+1..n) and c[mid+1..n].
            int mid = n / 2;
            int movedKeys = n - mid - 1;
            separator = key(mid);
            right.buffer.putBytes(right.base + InnerNodeDescriptor.KEYS_OFFSET, buffer, base + InnerNodeDescriptor.keyOffset(mid + 1), movedKeys * Long.BYTES);
            right.buffer.putBytes(right.base + InnerNodeDescriptor.CHILDREN_OFFSET, buffer, base + InnerNodeDescriptor.childOffset(mid + 1), (movedKeys + 1) * Long.BYTES);
            right.count(movedKeys);
            buffer.setMemory(base + InnerNodeDescriptor.keyOffset(mid), (n - mid) * Long.BYTES, (byte) 0);
            buffer.setMemory(base + InnerNodeDescriptor.childOffset(mid + 1), (n - mid) * Long.BYTES, (byte) 0);
            count(mid);
        }
        right.fences(separator, high);
        fences(lowFence(), separator);
        return separator;
    }

    /**
     * Narrows this node's range to {@code (low, high]} with {@code high} below its high fence: drops the
     * entries (leaf) or separators and children (inner) above {@code high}. This is the left half of a
     * split whose parent and new right node reached remote memory before the narrowed left node did (a
     * crash, or a reader racing the split); the dropped part lives in the right node.
     */
    public void clipAbove(long high) {
        int n = Math.min(count(), capacity());
        if (isLeaf()) {
            int keep = 0;
            while (keep < n && key(keep) <= high) {
                keep++;
            }
            buffer.setMemory(base + LeafNodeDescriptor.keyOffset(keep), (n - keep) * Long.BYTES, (byte) 0);
            buffer.setMemory(base + LeafNodeDescriptor.valueOffset(keep), (n - keep) * Long.BYTES, (byte) 0);
            count(keep);
        } else {
            // Child i covers (s[i-1], s[i]]: keep the separators below high; the last kept child covers high.
            int keep = 0;
            while (keep < n && key(keep) < high) {
                keep++;
            }
            buffer.setMemory(base + InnerNodeDescriptor.keyOffset(keep), (n - keep) * Long.BYTES, (byte) 0);
            buffer.setMemory(base + InnerNodeDescriptor.childOffset(keep + 1), (n - keep) * Long.BYTES, (byte) 0);
            count(keep);
        }
        fences(lowFence(), high);
    }

    private void shift(int from, int elements, int width) {
        if (elements > 0) {
            move(from, from + width, elements);
        }
    }

    private void move(int from, int to, int elements) {
        if (elements > 0) {
            buffer.putBytes(base + to, buffer, base + from, elements * Long.BYTES);
        }
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        sb.append(isLeaf() ? "Leaf" : "Inner").append("{level=").append(level()).append(", count=").append(count())
                .append(", fences=(").append(lowFence()).append(", ").append(highFence()).append("], version=")
                .append(version()).append(", lock=").append(lockWord()).append('}');
        return sb.toString();
    }
}
