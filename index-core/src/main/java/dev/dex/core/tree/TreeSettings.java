package dev.dex.core.tree;

import dev.dex.core.node.KeyFormat;

/**
 * Settings fixed when a tree is formatted.
 *
 * @param subtreeLevel   M: every subtree rooted at level M (0 = leaves) lies on one memory server, so
 *                       an operation offloaded below level M never leaves that server
 * @param bulkFillFactor fraction of each node that bulk load fills, leaving room for inserts (default 0.8)
 * @param keyFormat      the width of the index's keys, stored in the superblock
 * The defaults of a cluster's trees are {@code dex.tree} in index-core's reference.conf ({@link #fromConfig}).
 */
public record TreeSettings(int subtreeLevel, double bulkFillFactor, KeyFormat keyFormat) {
    /** {@code dex.tree.subtree-level} of index-core's reference.conf, its one home. */
    public static final int DEFAULT_SUBTREE_LEVEL = com.typesafe.config.ConfigFactory.defaultReferenceUnresolved().getInt("dex.tree.subtree-level");
    /** Not a setting of a cluster: what bulk load leaves free in each node unless its caller says otherwise. */
    public static final double DEFAULT_BULK_FILL_FACTOR = 0.8;
    /** Deepest tree a session can walk; with at least 30 children per inner node, far beyond any region. */
    public static final int MAX_HEIGHT = 16;

    /** A tree of 8-byte keys. */
    public TreeSettings(int subtreeLevel, double bulkFillFactor) {
        this(subtreeLevel, bulkFillFactor, KeyFormat.EIGHT);
    }

    public TreeSettings {
        java.util.Objects.requireNonNull(keyFormat, "keyFormat");
        if (subtreeLevel < 0 || subtreeLevel >= MAX_HEIGHT) {
            throw new IllegalArgumentException("subtree level M must be in [0, " + (MAX_HEIGHT - 1) + "]: " + subtreeLevel);
        }
        if (!(bulkFillFactor > 0.0 && bulkFillFactor <= 1.0)) {
            throw new IllegalArgumentException("bulk fill factor must be in (0, 1]: " + bulkFillFactor);
        }
    }

    /**
     * The settings of a {@code dex.tree} section: {@code subtree-level} and {@code key-bytes}, the one place the key
     * width is read from configuration; a bad value fails naming its key.
     */
    public static TreeSettings fromConfig(com.typesafe.config.Config tree) {
        int level = tree.getInt("subtree-level");
        if (level < 0 || level >= MAX_HEIGHT) {
            throw new IllegalArgumentException("dex.tree.subtree-level must be in [0, " + (MAX_HEIGHT - 1) + "]: " + level);
        }
        KeyFormat keys;
        try {
            keys = KeyFormat.of(tree.getInt("key-bytes"));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("dex.tree.key-bytes: " + e.getMessage(), e);
        }
        return new TreeSettings(level, DEFAULT_BULK_FILL_FACTOR, keys);
    }

    public static TreeSettings defaults() {
        return new TreeSettings(DEFAULT_SUBTREE_LEVEL, DEFAULT_BULK_FILL_FACTOR);
    }

    public TreeSettings withSubtreeLevel(int level) {
        return new TreeSettings(level, bulkFillFactor, keyFormat);
    }

    /** The same settings for keys {@code bytes} wide ({@link KeyFormat#of}). */
    public TreeSettings withKeyBytes(int bytes) {
        return new TreeSettings(subtreeLevel, bulkFillFactor, KeyFormat.of(bytes));
    }
}
