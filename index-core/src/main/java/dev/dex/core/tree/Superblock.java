package dev.dex.core.tree;

import static dev.dex.core.tree.SuperblockDescriptor.ADDRESS;
import static dev.dex.core.tree.SuperblockDescriptor.FORMAT_VERSION;
import static dev.dex.core.tree.SuperblockDescriptor.FORMAT_VERSION_OFFSET;
import static dev.dex.core.tree.SuperblockDescriptor.KEY_BYTES_OFFSET;
import static dev.dex.core.tree.SuperblockDescriptor.LENGTH;
import static dev.dex.core.tree.SuperblockDescriptor.MAGIC;
import static dev.dex.core.tree.SuperblockDescriptor.MAGIC_OFFSET;
import static dev.dex.core.tree.SuperblockDescriptor.ROOT_OFFSET;
import static dev.dex.core.tree.SuperblockDescriptor.SUBTREE_LEVEL_OFFSET;

import java.nio.ByteOrder;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.RemoteMemory;

/** Formats and reads the {@link SuperblockDescriptor superblock}. */
public final class Superblock {
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    /** What a tree instance learns from the superblock when it opens the tree. */
    public record Contents(long root, int subtreeLevel, KeyFormat keyFormat) {
    }

    private Superblock() {
    }

    /**
     * Creates an empty tree: one empty leaf as root, allocated on the first connected memory server.
     * Only one compute node formats; the others {@link #read} afterwards.
     *
     * @throws IllegalStateException when server 0 already holds a tree
     */
    public static void format(RemoteMemory memory, TreeSettings config) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]);
        memory.read(ADDRESS, buffer, 0, LENGTH);
        if (buffer.getLong(MAGIC_OFFSET, ORDER) == MAGIC) {
            throw new IllegalStateException("memory server 0 already holds a tree; open it instead of formatting");
        }
        NodeAllocator allocator = new NodeAllocator(memory, config.subtreeLevel());
        long root = allocator.allocate(memory.memoryServerIds()[0]);
        NodeView node = new NodeView(config.keyFormat()).wrap(buffer, 0);
        node.init(root, 0, NodeHeaderDescriptor.NEG_INFINITY, NodeHeaderDescriptor.POS_INFINITY);
        memory.write(root, buffer, 0, NodeHeaderDescriptor.NODE_LENGTH);

        buffer.setMemory(0, LENGTH, (byte) 0);
        buffer.putLong(ROOT_OFFSET, root, ORDER);
        buffer.putInt(SUBTREE_LEVEL_OFFSET, config.subtreeLevel(), ORDER);
        buffer.putInt(FORMAT_VERSION_OFFSET, FORMAT_VERSION, ORDER);
        buffer.putInt(KEY_BYTES_OFFSET, config.keyFormat().bytes(), ORDER);
        memory.write(ADDRESS + ROOT_OFFSET, buffer, ROOT_OFFSET, LENGTH - ROOT_OFFSET);
        // The magic goes last: a reader that sees it sees a complete superblock.
        buffer.putLong(MAGIC_OFFSET, MAGIC, ORDER);
        memory.write(ADDRESS + MAGIC_OFFSET, buffer, MAGIC_OFFSET, Long.BYTES);
    }

    /** Reads the superblock; fails clearly when server 0 holds no tree. */
    public static Contents read(RemoteMemory memory) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[LENGTH]);
        memory.read(ADDRESS, buffer, 0, LENGTH);
        if (buffer.getLong(MAGIC_OFFSET, ORDER) != MAGIC) {
            throw new IllegalStateException("memory server 0 holds no tree; format it (or bulk load) first");
        }
        int format = buffer.getInt(FORMAT_VERSION_OFFSET, ORDER);
        if (format != FORMAT_VERSION) {
            throw new IllegalStateException("tree format version " + format + " is not supported (expected " + FORMAT_VERSION + ")");
        }
        int keyBytes = buffer.getInt(KEY_BYTES_OFFSET, ORDER);
        KeyFormat keys;
        try {
            keys = KeyFormat.stored(keyBytes);
        } catch (IllegalArgumentException e) {
            throw new IllegalStateException("the superblock's key width is damaged: " + e.getMessage());
        }
        return new Contents(buffer.getLong(ROOT_OFFSET, ORDER), buffer.getInt(SUBTREE_LEVEL_OFFSET, ORDER), keys);
    }
}
