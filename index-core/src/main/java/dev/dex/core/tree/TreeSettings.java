package dev.dex.core.tree;

import dev.dex.core.node.KeyFormat;

/**
 * Settings fixed when a tree is formatted.
 *
 * @param subtreeLevel   M: every subtree rooted at level M (0 = leaves) lies on one memory server, so
 *                       an operation offloaded below level M never leaves that server (default 3)
 * @param bulkFillFactor fraction of each node that bulk load fills, leaving room for inserts (default 0.8)
 * @param keyFormat      the width of the index's keys (default 8 bytes), stored in the superblock
 */
public record TreeSettings(int subtreeLevel, double bulkFillFactor, KeyFormat keyFormat) {
    public static final int DEFAULT_SUBTREE_LEVEL = 3;
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
