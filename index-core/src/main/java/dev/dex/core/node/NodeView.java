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
 * Flyweight over one node image (1 KiB) in a buffer: reads and edits fields in place, in the layout of its
 * {@link KeyFormat}. Keys are given and returned as word arrays ({@code long[]}, the key's words at
 * {@code [0, words)}, see {@link KeyFormat}); for an index of 8-byte keys the {@code long} methods take and return
 * the one word itself, and are the engine's fast path.
 *
 * <p>Not thread-safe: a view and the image it wraps belong to one thread (a local copy read from remote
 * memory, or a frame held under a lock). Searches assume a consistent image; callers validate versions
 * before trusting what a search returned.
 */
public final class NodeView {
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    private final KeyFormat format;
    private final int words;
    /** A key of this view's width for the {@code long} methods' own use. */
    private final long[] scratch;
    private MutableDirectBuffer buffer;
    private int base;

    /** A view of nodes of 8-byte keys. */
    public NodeView() {
        this(KeyFormat.EIGHT);
    }

    /** A view of nodes of keys in {@code format}. */
    public NodeView(KeyFormat format) {
        this.format = format;
        this.words = format.words();
        this.scratch = new long[words];
    }

    public KeyFormat format() {
        return format;
    }

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

    /** The low fence of a node of 8-byte keys (word 0 of a wider key's). */
    public long lowFence() {
        return buffer.getLong(base + LOW_FENCE_OFFSET, ORDER);
    }

    /** The high fence of a node of 8-byte keys (word 0 of a wider key's). */
    public long highFence() {
        return buffer.getLong(base + format.highFenceOffset(), ORDER);
    }

    /** Sets the fences of a node of 8-byte keys; a wider key's fences are {@code low}, {@code high} in every word. */
    public void fences(long low, long high) {
        for (int w = 0; w < words; w++) {
            buffer.putLong(base + LOW_FENCE_OFFSET + w * Long.BYTES, low, ORDER);
            buffer.putLong(base + format.highFenceOffset() + w * Long.BYTES, high, ORDER);
        }
    }

    /** Copies the low fence's words into {@code out}. */
    public void lowFence(long[] out) {
        copyWords(LOW_FENCE_OFFSET, out, 0);
    }

    /** Copies the high fence's words into {@code out}. */
    public void highFence(long[] out) {
        copyWords(format.highFenceOffset(), out, 0);
    }

    /**
     * The exclusive low bound of child {@code index}'s slot in this inner node, into {@code out}: the key before it, or
     * the low fence for the first child.
     */
    public void slotLow(int index, long[] out) {
        if (index == 0) {
            lowFence(out);
        } else {
            key(index - 1, out, 0);
        }
    }

    /**
     * The inclusive high bound of child {@code index}'s slot in this inner node, into {@code out}: its key, or the high
     * fence for the last child.
     */
    public void slotHigh(int index, long[] out) {
        if (index >= count()) {
            highFence(out);
        } else {
            key(index, out, 0);
        }
    }

    /** Sets both fences from their words. */
    public void fences(long[] low, long[] high) {
        putWords(LOW_FENCE_OFFSET, low);
        putWords(format.highFenceOffset(), high);
    }

    /** Whether every word of the low fence after the first is maximal (true for a one-word key). */
    public boolean lowFenceRestIsMaximal() {
        for (int w = 1; w < words; w++) {
            if (buffer.getLong(base + LOW_FENCE_OFFSET + w * Long.BYTES, ORDER) != NodeHeaderDescriptor.POS_INFINITY) {
                return false;
            }
        }
        return true;
    }

    /** Whether the high fence is plus infinity (every word {@code POS_INFINITY}). */
    public boolean highFenceIsInfinite() {
        for (int w = 0; w < words; w++) {
            if (buffer.getLong(base + format.highFenceOffset() + w * Long.BYTES, ORDER) != NodeHeaderDescriptor.POS_INFINITY) {
                return false;
            }
        }
        return true;
    }

    /** {@code key} compared with the low fence: negative, zero or positive. */
    public int compareLowFence(long[] key) {
        return compareAt(LOW_FENCE_OFFSET, key, 0);
    }

    /** {@code key} compared with the high fence: negative, zero or positive. */
    public int compareHighFence(long[] key) {
        return compareAt(format.highFenceOffset(), key, 0);
    }

    /** True when {@code key} lies in this node's range {@code (low, high]}. */
    public boolean covers(long key) {
        return key > lowFence() && key <= highFence();
    }

    /** True when {@code key} lies in this node's range {@code (low, high]}. */
    public boolean covers(long[] key) {
        if (words == 1) {
            return covers(key[0]);
        }
        return compareLowFence(key) > 0 && compareHighFence(key) <= 0;
    }

    /**
     * {@code key[keyOffset, keyOffset + words)} compared with the key at {@code offset} of this node, as the index
     * orders keys: word by word, each a signed long.
     */
    private int compareAt(int offset, long[] key, int keyOffset) {
        if (words == 1) {
            return Long.compare(key[keyOffset], buffer.getLong(base + offset, ORDER));
        }
        for (int w = 0; w < words; w++) {
            int c = Long.compare(key[keyOffset + w], buffer.getLong(base + offset + w * Long.BYTES, ORDER));
            if (c != 0) {
                return c;
            }
        }
        return 0;
    }

    private void copyWords(int offset, long[] out, int outOffset) {
        if (words == 1) {
            out[outOffset] = buffer.getLong(base + offset, ORDER);
            return;
        }
        for (int w = 0; w < words; w++) {
            out[outOffset + w] = buffer.getLong(base + offset + w * Long.BYTES, ORDER);
        }
    }

    private void putWords(int offset, long[] key) {
        if (words == 1) {
            buffer.putLong(base + offset, key[0], ORDER);
            return;
        }
        for (int w = 0; w < words; w++) {
            buffer.putLong(base + offset + w * Long.BYTES, key[w], ORDER);
        }
    }

    /**
     * The count, clamped to the capacity: an optimistic reader may see a torn image, and its searches must
     * stay inside the node until validation rejects what they found.
     */
    private int boundedCount() {
        return Math.min(count(), format.leafCapacity());
    }

    public int capacity() {
        return isLeaf() ? format.leafCapacity() : format.innerCapacity();
    }

    public boolean isFull() {
        return count() >= capacity();
    }

    /**
     * Formats an empty node: zero lock word, version 1, no entries; fences {@code low}, {@code high} in every word
     * (8-byte keys, or a wider key's infinities).
     */
    public void init(long address, int level, long low, long high) {
        clear(address, level);
        fences(low, high);
    }

    /** Formats an empty node with the fences {@code (low, high]}. */
    public void init(long address, int level, long[] low, long[] high) {
        clear(address, level);
        fences(low, high);
    }

    private void clear(long address, int level) {
        buffer.setMemory(base, NODE_LENGTH, (byte) 0);
        address(address);
        buffer.putByte(base + TYPE_OFFSET, level == 0 ? TYPE_LEAF : TYPE_INNER);
        buffer.putByte(base + LEVEL_OFFSET, (byte) level);
        buffer.putInt(base + FLAGS_OFFSET, 0, ORDER);
        version(1);
    }

    public void copyFrom(NodeView other) {
        buffer.putBytes(base, other.buffer, other.base, NODE_LENGTH);
    }

    // ---- keys (both kinds share the key array offset) ------------------------------------------------

    /** Key {@code index} of a node of 8-byte keys (word 0 of a wider key). */
    public long key(int index) {
        return buffer.getLong(base + format.leafKeyOffset(index), ORDER);
    }

    /** Copies key {@code index}'s words into {@code out} from {@code outOffset}. */
    public void key(int index, long[] out, int outOffset) {
        copyWords(format.leafKeyOffset(index), out, outOffset);
    }

    /** {@code key} compared with key {@code index} of this node. */
    public int compareKey(long[] key, int index) {
        return compareAt(format.leafKeyOffset(index), key, 0);
    }

    private void key(int index, long key) {
        buffer.putLong(base + format.leafKeyOffset(index), key, ORDER);
    }

    private void key(int index, long[] key) {
        putWords(format.leafKeyOffset(index), key);
    }

    /**
     * Binary search of the keys (8-byte keys).
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

    /**
     * Binary search of the keys.
     *
     * @return the key's index, or {@code -(insertion point) - 1} when absent
     */
    public int search(long[] key) {
        if (words == 1) {
            return search(key[0]);
        }
        int lo = 0;
        int hi = boundedCount() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int c = compareKey(key, mid);
            if (c > 0) {
                lo = mid + 1;
            } else if (c < 0) {
                hi = mid - 1;
            } else {
                return mid;
            }
        }
        return -(lo + 1);
    }

    // ---- leaf ----------------------------------------------------------------------------------------

    public long value(int index) {
        return buffer.getLong(base + format.leafValueOffset(index), ORDER);
    }

    public void value(int index, long value) {
        buffer.putLong(base + format.leafValueOffset(index), value, ORDER);
    }

    /** Inserts at {@code index}, shifting later entries right; the leaf must not be full (8-byte keys). */
    public void insertEntry(int index, long key, long value) {
        openEntry(index);
        key(index, key);
        value(index, value);
    }

    /** Inserts at {@code index}, shifting later entries right; the leaf must not be full. */
    public void insertEntry(int index, long[] key, long value) {
        openEntry(index);
        key(index, key);
        value(index, value);
    }

    private void openEntry(int index) {
        int n = count();
        move(format.leafKeyOffset(index), format.leafKeyOffset(index + 1), (n - index) * format.bytes());
        move(format.leafValueOffset(index), format.leafValueOffset(index + 1), (n - index) * Long.BYTES);
        count(n + 1);
    }

    /** Removes the entry at {@code index}, shifting later entries left. */
    public void removeEntry(int index) {
        int n = count();
        int tail = n - index - 1;
        move(format.leafKeyOffset(index + 1), format.leafKeyOffset(index), tail * format.bytes());
        move(format.leafValueOffset(index + 1), format.leafValueOffset(index), tail * Long.BYTES);
        buffer.setMemory(base + format.leafKeyOffset(n - 1), format.bytes(), (byte) 0);
        value(n - 1, 0);
        count(n - 1);
    }

    /** Appends an entry with a key larger than every key here; used by bulk load (8-byte keys). */
    public void appendEntry(long key, long value) {
        int n = count();
        key(n, key);
        value(n, value);
        count(n + 1);
    }

    /** Appends an entry with a key larger than every key here; used by bulk load. */
    public void appendEntry(long[] key, long value) {
        int n = count();
        key(n, key);
        value(n, value);
        count(n + 1);
    }

    // ---- inner ---------------------------------------------------------------------------------------

    public long child(int index) {
        return buffer.getLong(base + format.innerChildOffset(index), ORDER);
    }

    public void child(int index, long address) {
        buffer.putLong(base + format.innerChildOffset(index), address, ORDER);
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

    /** Index of the child whose range holds {@code key}: the number of separators below {@code key}. */
    public int childIndex(long[] key) {
        if (words == 1) {
            return childIndex(key[0]);
        }
        int lo = 0;
        int hi = boundedCount();
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (compareKey(key, mid) > 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /**
     * Records that child {@code childIndex} was split at {@code separator}: its upper part is now
     * {@code rightChild}. The inner node must not be full (8-byte keys).
     */
    public void insertSeparator(int childIndex, long separator, long rightChild) {
        openSeparator(childIndex);
        key(childIndex, separator);
        child(childIndex + 1, rightChild);
    }

    /**
     * Records that child {@code childIndex} was split at {@code separator}: its upper part is now
     * {@code rightChild}. The inner node must not be full.
     */
    public void insertSeparator(int childIndex, long[] separator, long rightChild) {
        openSeparator(childIndex);
        key(childIndex, separator);
        child(childIndex + 1, rightChild);
    }

    private void openSeparator(int childIndex) {
        int n = count();
        move(format.innerKeyOffset(childIndex), format.innerKeyOffset(childIndex + 1), (n - childIndex) * format.bytes());
        move(format.innerChildOffset(childIndex + 1), format.innerChildOffset(childIndex + 2), (n - childIndex) * Long.BYTES);
        count(n + 1);
    }

    /** Appends a child to the right of every existing one; {@code separator} bounds the previous child (8-byte keys). */
    public void appendChild(long separator, long child) {
        int n = count();
        key(n, separator);
        child(n + 1, child);
        count(n + 1);
    }

    /** Appends a child to the right of every existing one; {@code separator} bounds the previous child. */
    public void appendChild(long[] separator, long child) {
        int n = count();
        key(n, separator);
        child(n + 1, child);
        count(n + 1);
    }

    // ---- split ----------------------------------------------------------------------------------------

    /**
     * Moves the upper half of this full node into {@code right} (formatted here with {@code rightAddress})
     * and narrows both fence ranges (8-byte keys).
     *
     * @return the separator: the new high fence of this node and the low fence of {@code right}
     */
    public long splitInto(NodeView right, long rightAddress) {
        splitMoving(right, rightAddress);
        return right.lowFence();
    }

    /**
     * Moves the upper half of this full node into {@code right} (formatted here with {@code rightAddress})
     * and narrows both fence ranges; the separator, the new high fence of this node and the low fence of
     * {@code right}, goes to {@code separator}.
     */
    public void splitInto(NodeView right, long rightAddress, long[] separator) {
        splitMoving(right, rightAddress, count() / 2);
        right.lowFence(separator);
    }

    /**
     * Cuts this leaf after its first {@code keep} entries (1 to count - 1): the rest goes to {@code right}, formatted here
     * with {@code rightAddress}; the separator, this leaf's new high fence (its last key kept), goes to {@code separator}.
     */
    public void cutInto(NodeView right, long rightAddress, int keep, long[] separator) {
        if (!isLeaf() || keep < 1 || keep >= count()) {
            throw new IllegalArgumentException("a leaf of " + count() + " entries cannot keep " + keep + ": " + this);
        }
        splitMoving(right, rightAddress, keep);
        right.lowFence(separator);
    }

    private int splitMoving(NodeView right, long rightAddress) {
        return splitMoving(right, rightAddress, count() / 2);
    }

    private int splitMoving(NodeView right, long rightAddress, int leafKeep) {
        int n = count();
        int w = format.bytes();
        right.clear(rightAddress, level());
        // The separator's bytes: copied before this node's payload is cleared.
        int separatorOffset;
        if (isLeaf()) {
            int keep = leafKeep;
            int moved = n - keep;
            right.buffer.putBytes(right.base + format.leafKeyOffset(0), buffer, base + format.leafKeyOffset(keep), moved * w);
            right.buffer.putBytes(right.base + format.leafValueOffset(0), buffer, base + format.leafValueOffset(keep), moved * Long.BYTES);
            right.count(moved);
            separatorOffset = format.leafKeyOffset(keep - 1);
            setFences(right, separatorOffset);
            buffer.setMemory(base + format.leafKeyOffset(keep), moved * w, (byte) 0);
            buffer.setMemory(base + format.leafValueOffset(keep), moved * Long.BYTES, (byte) 0);
            count(keep);
        } else {
            // Separators s[0..n), children c[0..n]. Left keeps s[0..mid) and c[0..mid], s[mid] moves up,
            // right takes s[mid+1..n) and c[mid+1..n].
            int mid = n / 2;
            int movedKeys = n - mid - 1;
            right.buffer.putBytes(right.base + format.innerKeyOffset(0), buffer, base + format.innerKeyOffset(mid + 1), movedKeys * w);
            right.buffer.putBytes(right.base + format.innerChildOffset(0), buffer, base + format.innerChildOffset(mid + 1),
                    (movedKeys + 1) * Long.BYTES);
            right.count(movedKeys);
            separatorOffset = format.innerKeyOffset(mid);
            setFences(right, separatorOffset);
            buffer.setMemory(base + format.innerKeyOffset(mid), (n - mid) * w, (byte) 0);
            buffer.setMemory(base + format.innerChildOffset(mid + 1), (n - mid) * Long.BYTES, (byte) 0);
            count(mid);
        }
        return separatorOffset;
    }

    /** After a split: right's fences (the key at {@code separatorOffset}, this high fence], this high fence the key. */
    private void setFences(NodeView right, int separatorOffset) {
        int w = format.bytes();
        right.buffer.putBytes(right.base + LOW_FENCE_OFFSET, buffer, base + separatorOffset, w);
        right.buffer.putBytes(right.base + format.highFenceOffset(), buffer, base + format.highFenceOffset(), w);
        buffer.putBytes(base + format.highFenceOffset(), buffer, base + separatorOffset, w);
    }

    /**
     * Narrows this node's range to {@code (low, high]} with {@code high} below its high fence: drops the
     * entries (leaf) or separators and children (inner) above {@code high}. This is the left half of a
     * split whose parent and new right node reached remote memory before the narrowed left node did (a
     * crash, or a reader racing the split); the dropped part lives in the right node (8-byte keys).
     */
    public void clipAbove(long high) {
        java.util.Arrays.fill(scratch, high);
        clipAbove(scratch);
    }

    /** {@link #clipAbove(long)} for a key of any width. */
    public void clipAbove(long[] high) {
        int n = Math.min(count(), capacity());
        int w = format.bytes();
        if (isLeaf()) {
            int keep = 0;
            while (keep < n && compareKey(high, keep) >= 0) {
                keep++;
            }
            buffer.setMemory(base + format.leafKeyOffset(keep), (n - keep) * w, (byte) 0);
            buffer.setMemory(base + format.leafValueOffset(keep), (n - keep) * Long.BYTES, (byte) 0);
            count(keep);
        } else {
            // Child i covers (s[i-1], s[i]]: keep the separators below high; the last kept child covers high.
            int keep = 0;
            while (keep < n && compareKey(high, keep) > 0) {
                keep++;
            }
            buffer.setMemory(base + format.innerKeyOffset(keep), (n - keep) * w, (byte) 0);
            buffer.setMemory(base + format.innerChildOffset(keep + 1), (n - keep) * Long.BYTES, (byte) 0);
            count(keep);
        }
        putWords(format.highFenceOffset(), high);
    }

    /** Moves {@code length} bytes of this node from {@code from} to {@code to} (the ranges may overlap). */
    private void move(int from, int to, int length) {
        if (length > 0) {
            buffer.putBytes(base + to, buffer, base + from, length);
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
