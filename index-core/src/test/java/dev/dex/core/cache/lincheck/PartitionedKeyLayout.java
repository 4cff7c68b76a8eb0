package dev.dex.core.cache.lincheck;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.NavigableSet;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import dev.dex.core.node.InnerNodeDescriptor;
import dev.dex.core.node.LeafNodeDescriptor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.SortedEntries;

/**
 * Where the six test keys, the static background keys and the partition bounds lie in a bulk-loaded tree
 * of full nodes (fill factor 1.0): one full inner root over {@link InnerNodeDescriptor#MAX_CHILDREN}
 * full leaves, so the first insert or put splits the root and the first insert of an absent test key
 * splits its leaf. Three partitions, held alternately by engine 0 and engine 1:
 *
 * <pre>
 *   leaf:        0 .. 10 .. 29 | 30 .. 40 .. 50 ................. 59
 *   test keys:       k1 k2          k3 k4    k5 | k6
 *   partition:   0 (engine 0)  | 1 (engine 1)     | 2 (engine 0)
 *   bound:       high fence of leaf 29            k5
 * </pre>
 *
 * <ul>
 *   <li>The first bound is the separator the root's split moves up (child 29's high fence), so the split
 *       root's left half lies inside partition 0: an owned inner node, cached dirty in engine 0 when its
 *       leaves split. The root and the right half span partitions: shared, written through.</li>
 *   <li>Leaf 40 is owned by engine 1 under a shared parent.</li>
 *   <li>Leaf 50 holds the second bound between k5 (engine 1) and k6 (engine 0): a shared leaf, never
 *       cached, that both engines write under remote locks. Its split keeps the bound in the upper half
 *       and leaves a lower half owned by engine 1.</li>
 * </ul>
 *
 * <p>Each group leaf holds {@link #BACKGROUND_BEFORE_GROUP} background keys (more than half a leaf), the
 * group (one loaded key, one absent), then background keys up to capacity. A leaf split keeps the lower
 * half, so the separator is a background key below the group and the upper half has room for the whole
 * group: each test leaf splits at most once per run. At least {@link #SCAN_LENGTH} background keys follow
 * each group, and adjacent partitions belong to different engines, so a scan from a test key stays in one
 * leaf and one partition: the only scans the engine promises to be atomic.
 *
 * <p>Background keys are multiples of {@link #KEY_SPACING} with value {@code -key}; no operation under
 * test touches them.
 */
final class PartitionedKeyLayout {
    /** Test keys are 1..TEST_KEYS in operations; {@link #key} maps them to tree keys. */
    static final int TEST_KEYS = 6;
    /** Operations write values 1..MAX_TEST_VALUE; loaded test keys hold {@link #initialValue}, above it. */
    static final int MAX_TEST_VALUE = 5;
    static final int SCAN_LENGTH = 3;
    static final int BACKGROUND_BEFORE_GROUP = 40;
    static final long KEY_SPACING = 10;
    static final int ENGINES = 2;

    private static final int LEAVES = InnerNodeDescriptor.MAX_CHILDREN;
    /** The child whose high fence a split of the full root moves up (the root keeps separators 0..28). */
    private static final int ROOT_SPLIT_CHILD = InnerNodeDescriptor.CAPACITY / 2;
    private static final Map<Integer, int[]> GROUPS_BY_LEAF = Map.of(10, new int[] {1, 2}, 40, new int[] {3, 4}, 50, new int[] {5, 6});
    private static final Set<Integer> INITIALLY_PRESENT = Set.of(2, 4, 6);
    /** The engine holding each partition. */
    private static final int[] ENGINE_OF_PARTITION = {0, 1, 0};

    /** Declared after the constants its constructor reads. */
    static final PartitionedKeyLayout THREE_PARTITIONS_OVER_A_FULL_ROOT = new PartitionedKeyLayout();

    private final long[] keys = new long[TEST_KEYS + 1];
    private final long[] leafHighFences = new long[LEAVES];
    private final NavigableMap<Long, Long> loaded = new TreeMap<>();
    private final NavigableSet<Long> background = new TreeSet<>();
    private final PartitionTable partitions;

    private PartitionedKeyLayout() {
        if (BACKGROUND_BEFORE_GROUP <= LeafNodeDescriptor.CAPACITY / 2
                || BACKGROUND_BEFORE_GROUP + 1 + SCAN_LENGTH > LeafNodeDescriptor.CAPACITY) {
            throw new IllegalStateException("leaf capacity " + LeafNodeDescriptor.CAPACITY + " does not fit this layout");
        }
        long next = KEY_SPACING;
        for (int leaf = 0; leaf < LEAVES; leaf++) {
            int[] group = GROUPS_BY_LEAF.get(leaf);
            int inLeaf = 0;
            long last = 0;
            if (group != null) {
                for (; inLeaf < BACKGROUND_BEFORE_GROUP; inLeaf++, next += KEY_SPACING) {
                    addBackground(next);
                }
                long previousBackground = next - KEY_SPACING;
                for (int i = 0; i < group.length; i++) {
                    keys[group[i]] = previousBackground + 1 + i;
                    if (INITIALLY_PRESENT.contains(group[i])) {
                        loaded.put(keys[group[i]], (long) initialValue(group[i]));
                        inLeaf++;
                    }
                }
            }
            for (; inLeaf < LeafNodeDescriptor.CAPACITY; inLeaf++, next += KEY_SPACING) {
                last = next;
                addBackground(next);
            }
            leafHighFences[leaf] = last;
        }
        partitions = PartitionTable.ofUpperBounds(leafHighFences[ROOT_SPLIT_CHILD], keys[5]);
        for (int k = 1; k <= TEST_KEYS; k++) {
            if (keys[k] == 0) {
                throw new IllegalStateException("test key " + k + " is in no group");
            }
        }
        if (partitions.count() != ENGINE_OF_PARTITION.length) {
            throw new IllegalStateException(partitions + " does not match the engines of " + ENGINE_OF_PARTITION.length + " partitions");
        }
    }

    private void addBackground(long key) {
        background.add(key);
        loaded.put(key, backgroundValue(key));
    }

    static long backgroundValue(long key) {
        return -key;
    }

    /** The value an initially present test key is loaded with. */
    static int initialValue(int testKey) {
        return 100 + testKey;
    }

    /** Nodes per level (0 = leaves) of the bulk-loaded tree. */
    long[] nodesPerLevel() {
        return new long[] {LEAVES, 1};
    }

    int height() {
        return 2;
    }

    PartitionTable partitions() {
        return partitions;
    }

    /** The engine that holds {@code partition}. */
    int engineOfPartition(int partition) {
        return ENGINE_OF_PARTITION[partition];
    }

    /** The engine that serves tree key {@code key}. */
    int engineOf(long key) {
        return engineOfPartition(partitions.partitionOf(key));
    }

    /** The last key a scan from {@code start} can reach: the end of the run of partitions its engine holds. */
    long scanLimit(long start) {
        int p = partitions.partitionOf(start);
        int engine = engineOfPartition(p);
        while (p + 1 < partitions.count() && engineOfPartition(p + 1) == engine) {
            p++;
        }
        return partitions.upperInclusive(p);
    }

    /** The tree key of test key {@code testKey} (1..{@link #TEST_KEYS}). */
    long key(int testKey) {
        if (testKey < 1 || testKey > TEST_KEYS) {
            throw new IllegalArgumentException("test key " + testKey + " outside 1.." + TEST_KEYS);
        }
        return keys[testKey];
    }

    /** The test key whose tree key is {@code key}, or 0 if it is not a test key. */
    int testKeyOf(long key) {
        for (int k = 1; k <= TEST_KEYS; k++) {
            if (keys[k] == key) {
                return k;
            }
        }
        return 0;
    }

    boolean isBackground(long key) {
        return background.contains(key);
    }

    int backgroundCount() {
        return background.size();
    }

    NavigableSet<Long> background() {
        return Collections.unmodifiableNavigableSet(background);
    }

    Set<Integer> initiallyPresent() {
        return INITIALLY_PRESENT;
    }

    /** Everything the bulk load writes, in key order. */
    SortedEntries entries() {
        long[] k = new long[loaded.size()];
        long[] v = new long[loaded.size()];
        int i = 0;
        for (Map.Entry<Long, Long> e : loaded.entrySet()) {
            k[i] = e.getKey();
            v[i++] = e.getValue();
        }
        return SortedEntries.of(k, v);
    }

    /** How a scan reports one entry: {@code k2=5} for a test key, {@code b1010} for an intact background entry. */
    String describe(long key, long value) {
        int testKey = testKeyOf(key);
        if (testKey != 0) {
            return "k" + testKey + "=" + value;
        }
        if (isBackground(key) && value == backgroundValue(key)) {
            return "b" + key;
        }
        return "?" + key + "=" + value;
    }

    /** A scan's result as a string, the form both the engines and the model report. */
    String describe(long[] keys, long[] values, int count) {
        List<String> parts = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            parts.add(describe(keys[i], values[i]));
        }
        return parts.toString();
    }
}
