package dev.dex.core.tree.lincheck;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.NavigableSet;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import dev.dex.core.tree.SortedEntries;
import dev.dex.core.node.KeyFormat;

/**
 * Where the six test keys and the static background keys lie in a bulk-loaded tree whose nodes are all
 * full (fill factor 1.0), so that the first insert of an absent test key splits nodes.
 *
 * <p>Every leaf holds exactly {@code KeyFormat.EIGHT.leafCapacity()} entries. A leaf with a group of test
 * keys holds {@link #BACKGROUND_BEFORE_GROUP} background keys, then the group (consecutive keys, some
 * loaded, some absent), then background keys up to its capacity. Two consequences the checks rely on:
 * <ul>
 *   <li>A leaf split keeps the lower half of a full leaf, so with more than half the leaf below the
 *       group the separator is always a background key and the group stays together in the upper half,
 *       which then has room for every test key: each test leaf splits at most once per run.</li>
 *   <li>At least {@link #SCAN_LENGTH} background keys follow each group in its leaf, so a scan from a
 *       test key never leaves that leaf. The tree promises atomic scans per leaf only (a scan across
 *       leaves is not a snapshot), so only such scans can be checked for linearizability.</li>
 * </ul>
 *
 * <p>Background keys are multiples of {@link #KEY_SPACING} with value {@code -key}; no operation under
 * test touches them.
 */
final class KeyLayout {
    /** Test keys are 1..TEST_KEYS in operations; {@link #key} maps them to tree keys. */
    static final int TEST_KEYS = 6;
    /** Operations write values 1..MAX_TEST_VALUE; loaded test keys hold {@link #initialValue}, above it. */
    static final int MAX_TEST_VALUE = 5;
    static final int SCAN_LENGTH = 3;
    static final int BACKGROUND_BEFORE_GROUP = 40;
    static final long KEY_SPACING = 10;

    /** One full leaf as the root: the first insert of an absent key splits the root leaf. */
    static final KeyLayout ROOT_LEAF = new KeyLayout(1, Map.of(0, new int[] {1, 2, 3, 4, 5, 6}), Set.of(2, 4, 6));

    /**
     * A full inner root over full leaves: the first insert or put splits the inner root (it is met
     * first), then, if its key is absent, the leaf. The two groups end up on either side of the root's
     * split, so an instance whose cached root went stale meets both outcomes: a root that still covers
     * its key and one that does not.
     */
    static final KeyLayout FULL_INNER_ROOT = new KeyLayout((KeyFormat.EIGHT.innerCapacity() + 1),
            Map.of(10, new int[] {1, 2, 3}, 45, new int[] {4, 5, 6}), Set.of(2, 4, 6));

    /**
     * One leaf more than an inner node holds: a root with room above a full inner node (and one with a
     * single leaf). The first insert or put splits the full inner node under the root, then the leaf;
     * the root never splits.
     */
    static final KeyLayout FULL_INNER_BELOW_ROOT = new KeyLayout((KeyFormat.EIGHT.innerCapacity() + 1) + 1,
            Map.of(10, new int[] {1, 2, 3}, 45, new int[] {4, 5, 6}), Set.of(2, 4, 6));

    private final long[] nodesPerLevel;
    private final long[] keys = new long[TEST_KEYS + 1];
    private final NavigableMap<Long, Long> loaded = new TreeMap<>();
    private final NavigableSet<Long> background = new TreeSet<>();
    private final Set<Integer> initiallyPresent;

    private KeyLayout(int leaves, Map<Integer, int[]> groupsByLeaf, Set<Integer> initiallyPresent) {
        if (BACKGROUND_BEFORE_GROUP <= KeyFormat.EIGHT.leafCapacity() / 2
                || BACKGROUND_BEFORE_GROUP + TEST_KEYS + SCAN_LENGTH > KeyFormat.EIGHT.leafCapacity()) {
            throw new IllegalStateException("leaf capacity " + KeyFormat.EIGHT.leafCapacity() + " does not fit this layout");
        }
        this.nodesPerLevel = nodesPerLevel(leaves);
        this.initiallyPresent = Set.copyOf(initiallyPresent);
        long next = KEY_SPACING;
        for (int leaf = 0; leaf < leaves; leaf++) {
            int[] group = groupsByLeaf.get(leaf);
            int inLeaf = 0;
            if (group != null) {
                for (; inLeaf < BACKGROUND_BEFORE_GROUP; inLeaf++, next += KEY_SPACING) {
                    addBackground(next);
                }
                long previousBackground = next - KEY_SPACING;
                for (int i = 0; i < group.length; i++) {
                    keys[group[i]] = previousBackground + 1 + i;
                    if (initiallyPresent.contains(group[i])) {
                        loaded.put(keys[group[i]], (long) initialValue(group[i]));
                        inLeaf++;
                    }
                }
            }
            for (; inLeaf < KeyFormat.EIGHT.leafCapacity(); inLeaf++, next += KEY_SPACING) {
                addBackground(next);
            }
        }
        for (int k = 1; k <= TEST_KEYS; k++) {
            if (keys[k] == 0) {
                throw new IllegalArgumentException("test key " + k + " is in no group");
            }
        }
    }

    private static long[] nodesPerLevel(long leaves) {
        List<Long> counts = new ArrayList<>();
        for (long nodes = leaves; ; nodes = (nodes + (KeyFormat.EIGHT.innerCapacity() + 1) - 1) / (KeyFormat.EIGHT.innerCapacity() + 1)) {
            counts.add(nodes);
            if (nodes == 1) {
                return counts.stream().mapToLong(Long::longValue).toArray();
            }
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

    /** Nodes per level (0 = leaves) of the bulk-loaded tree: every inner node is full but the last of its level. */
    long[] nodesPerLevel() {
        return nodesPerLevel.clone();
    }

    int height() {
        return nodesPerLevel.length;
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
        return initiallyPresent;
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

    /** A scan's result as a string, the form both the tree and the model report. */
    String describe(long[] keys, long[] values, int count) {
        List<String> parts = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            parts.add(describe(keys[i], values[i]));
        }
        return parts.toString();
    }
}
