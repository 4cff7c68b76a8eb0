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
import java.util.function.Function;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.TreeSettings;

/**
 * Where the six test keys, the static background keys and the partition bounds lie in a bulk-loaded tree
 * of full nodes (fill factor 1.0), so that the first insert of an absent test key splits its leaf, and the
 * first insert or put that walks through a full inner node on the caching path splits that node. Two
 * layouts, each with partitions held alternately by engine 0 and engine 1:
 * {@link #THREE_PARTITIONS_OVER_A_FULL_ROOT} (two levels, the root splits) and
 * {@link #FOUR_PARTITIONS_OVER_OWNED_SUBTREES} (three levels, level-1 nodes are offloaded).
 *
 * <p>Each group leaf holds {@link #BACKGROUND_BEFORE_GROUP} background keys (more than half a leaf), the
 * group (at most one loaded key, one absent), then background keys up to capacity. A leaf split keeps the
 * lower half, so the separator is a background key below the group and the upper half has room for the
 * whole group: each test leaf splits at most once per run. At least {@link #SCAN_LENGTH} background keys
 * follow each group, and adjacent partitions belong to different engines, so a scan from a test key stays
 * in one leaf and one partition: the only scans the engine promises to be atomic.
 *
 * <p>A full inner node keeps separators 0..28 when it splits and moves up the high fence of its child
 * {@code KeyFormat.EIGHT.innerCapacity() / 2}: a partition bound placed there makes both halves owned.
 *
 * <p>Background keys are multiples of {@link #KEY_SPACING} with value {@code -key}; no operation under
 * test touches them. Test keys 2, 4 and 6 are loaded with {@link #initialValue}.
 */
final class PartitionedKeyLayout {
    /** Test keys are 1..TEST_KEYS in operations; {@link #key} maps them to tree keys. */
    static final int TEST_KEYS = 6;
    /** Operations write values 1..MAX_TEST_VALUE; loaded test keys hold {@link #initialValue}, above it. */
    static final int MAX_TEST_VALUE = 5;
    static final int SCAN_LENGTH = 3;
    /** Background keys before a group in an 8-byte layout; narrower leaves take fewer ({@link #backgroundBeforeGroup}). */
    static final int BACKGROUND_BEFORE_GROUP = 40;
    static final long KEY_SPACING = 10;
    static final int ENGINES = 2;

    /** Declared before the layouts, whose constructor reads it. */
    private static final Set<Integer> INITIALLY_PRESENT = Set.of(2, 4, 6);

    /**
     * One full inner root over {@code KeyFormat.EIGHT.innerCapacity() + 1} full leaves, so the first insert or
     * put also splits the root. M = 0: leaves stay with the sibling they split from, inner nodes go round
     * robin over the memory servers.
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
     */
    static final PartitionedKeyLayout THREE_PARTITIONS_OVER_A_FULL_ROOT = threePartitionsOverAFullRoot(KeyFormat.EIGHT);

    /**
     * {@link #THREE_PARTITIONS_OVER_A_FULL_ROOT} for keys in {@code format}: the same shape over its fan-out F (the
     * group leaves at F/6, 2F/3 and 5F/6: 10, 40 and 50 when F is 60), keys of the format's width whose first word
     * is the layout's long key ({@link #words}).
     */
    static PartitionedKeyLayout threePartitionsOverAFullRoot(KeyFormat format) {
        int f = format.innerCapacity() + 1;
        int split = format.innerCapacity() / 2;
        return new PartitionedKeyLayout(format, 0, f,
                Map.of(f / 6, new int[] {1, 2}, 2 * f / 3, new int[] {3, 4}, 5 * f / 6, new int[] {5, 6}), new int[] {0, 1, 0},
                layout -> PartitionTable.ofUpperBounds(layout.leafHighFences[split], layout.keys[5]));
    }

    /**
     * A root over three full level-1 nodes A, B and S, each over {@code KeyFormat.EIGHT.innerCapacity() + 1}
     * full leaves, with M = 1: each level-1 subtree lies on one memory server, so a miss on an owned
     * level-1 node under the cached root may be offloaded. The root spans every partition (shared); it has
     * room for the separators the level-1 splits move up, so it never splits.
     *
     * <pre>
     *   level 1:     A                 | B                  | S
     *   leaf:        0 .. 40 .. 59     | 60 .. 100 .. 119   | 120 .. 130 .. 149 | 150 .. 160 .. 179
     *   test keys:       k1 k2         |        k3 k4       |        k5         |        k6
     *   partition:   0 (engine 0)      | 1 (engine 1)       | 2 (engine 0)      | 3 (engine 1)
     *   bound:       high fence of leaf 59, of leaf 119, of leaf 149
     * </pre>
     *
     * <ul>
     *   <li>A and B are owned: their misses are offloaded. Leaves 40 and 100 lie in their upper halves, so
     *       a split of A or B moves them to the new right sibling, and a frame caching one of them is
     *       orphaned while the new sibling is not cached: the next miss on that sibling is offloaded onto
     *       a path holding a cached node.</li>
     *   <li>S is shared (partitions 2 and 3), so it is cached and never offloaded, until an insert or put
     *       of k5 or k6 splits it at the third bound: S keeps leaves 120..149, owned by engine 0, and the
     *       new right sibling takes leaves 150..179, owned by engine 1. The engine that did not split S
     *       keeps a stale copy of it until a fence mismatch or a stale write refreshes it; engine 1's
     *       cached leaf 160 then lies under an owned level-1 node it has never cached.</li>
     * </ul>
     */
    static final PartitionedKeyLayout FOUR_PARTITIONS_OVER_OWNED_SUBTREES = fourPartitionsOverOwnedSubtrees(KeyFormat.EIGHT);

    /**
     * {@link #FOUR_PARTITIONS_OVER_OWNED_SUBTREES} for keys in {@code format}, its leaves placed as fractions of the
     * fan-out F (40, 100, 130 and 160 when F is 60).
     */
    static PartitionedKeyLayout fourPartitionsOverOwnedSubtrees(KeyFormat format) {
        int f = format.innerCapacity() + 1;
        int split = format.innerCapacity() / 2;
        return new PartitionedKeyLayout(format, 1, 3 * f,
                Map.of(2 * f / 3, new int[] {1, 2}, f + 2 * f / 3, new int[] {3, 4}, 2 * f + f / 6, new int[] {5},
                        2 * f + 2 * f / 3, new int[] {6}), new int[] {0, 1, 0, 1},
                layout -> PartitionTable.ofUpperBounds(layout.leafHighFences[f - 1], layout.leafHighFences[2 * f - 1],
                        layout.leafHighFences[2 * f + split]));
    }

    /** The width of the keys; a key's first word is the layout's long key, the others {@link #FILLER}. */
    private final KeyFormat format;
    private final int backgroundBeforeGroup;
    /** The words after the first of every key: "-key-pad" as a key word. */
    static final long FILLER = 0x2d6b_6579_2d70_6164L ^ Long.MIN_VALUE;

    private final TreeSettings treeSettings;
    private final long[] nodesPerLevel;
    /** The engine holding each partition. */
    private final int[] engineOfPartition;
    private final long[] keys = new long[TEST_KEYS + 1];
    private final long[] leafHighFences;
    private final NavigableMap<Long, Long> loaded = new TreeMap<>();
    private final NavigableSet<Long> background = new TreeSet<>();
    private final PartitionTable partitions;

    /**
     * @param subtreeLevel  M of the tree
     * @param leaves        leaves of the bulk-loaded tree
     * @param groupsByLeaf  the test keys each group leaf holds, in key order
     * @param bounds        the partition table, from the leaves' high fences and the test keys
     */
    private PartitionedKeyLayout(KeyFormat format, int subtreeLevel, int leaves, Map<Integer, int[]> groupsByLeaf,
                                 int[] engineOfPartition, Function<PartitionedKeyLayout, PartitionTable> bounds) {
        int capacity = format.leafCapacity();
        this.format = format;
        this.backgroundBeforeGroup = Math.min(BACKGROUND_BEFORE_GROUP, capacity - 2 - SCAN_LENGTH);
        if (backgroundBeforeGroup <= capacity / 2 || backgroundBeforeGroup + 1 + SCAN_LENGTH > capacity) {
            throw new IllegalStateException("leaf capacity " + capacity + " does not fit this layout");
        }
        int fanOut = format.innerCapacity() + 1;
        this.treeSettings = new TreeSettings(subtreeLevel, 1.0).withKeyBytes(format.bytes());
        this.engineOfPartition = engineOfPartition;
        this.leafHighFences = new long[leaves];
        List<Long> perLevel = new ArrayList<>();
        for (long n = leaves; ; n = (n + fanOut - 1) / fanOut) {
            perLevel.add(n);
            if (n == 1) {
                break;
            }
        }
        this.nodesPerLevel = perLevel.stream().mapToLong(Long::longValue).toArray();
        long next = KEY_SPACING;
        for (int leaf = 0; leaf < leaves; leaf++) {
            int[] group = groupsByLeaf.get(leaf);
            int inLeaf = 0;
            long last = 0;
            if (group != null) {
                for (; inLeaf < backgroundBeforeGroup; inLeaf++, next += KEY_SPACING) {
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
            for (; inLeaf < capacity; inLeaf++, next += KEY_SPACING) {
                last = next;
                addBackground(next);
            }
            leafHighFences[leaf] = last;
        }
        for (int k = 1; k <= TEST_KEYS; k++) {
            if (keys[k] == 0) {
                throw new IllegalStateException("test key " + k + " is in no group");
            }
        }
        partitions = bounds.apply(this);
        if (partitions.count() != engineOfPartition.length) {
            throw new IllegalStateException(partitions + " does not match the engines of " + engineOfPartition.length + " partitions");
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

    /** M and the fill factor of the bulk load. */
    TreeSettings treeSettings() {
        return treeSettings;
    }

    /** Nodes per level (0 = leaves) of the bulk-loaded tree. */
    long[] nodesPerLevel() {
        return nodesPerLevel.clone();
    }

    int height() {
        return nodesPerLevel.length;
    }

    PartitionTable partitions() {
        return partitions;
    }

    /** The engine that holds {@code partition}. */
    int engineOfPartition(int partition) {
        return engineOfPartition[partition];
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
        SortedEntries longs = SortedEntries.of(k, v);
        return SortedEntries.withWords(longs, this::words);
    }

    /** The width of the layout's keys. */
    KeyFormat format() {
        return format;
    }

    /** The words of the layout's long key {@code key}: it, then {@link #FILLER}. */
    void words(long key, long[] out) {
        out[0] = key;
        java.util.Arrays.fill(out, 1, format.words(), FILLER);
    }

    /** The words of test key {@code testKey}'s tree key. */
    long[] words(int testKey) {
        long[] out = new long[format.words()];
        words(key(testKey), out);
        return out;
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
