package dev.dex.core.tree.lincheck;

import java.util.Map;
import java.util.TreeMap;

/**
 * The sequential specification of {@link ConcurrentTree}: a {@link TreeMap} of the test keys, with the
 * layout's background keys (which no operation changes) merged into scans. Method signatures mirror the
 * operations, as Lincheck requires.
 */
public abstract class SequentialTree {
    private final KeyLayout layout;
    private final TreeMap<Long, Long> entries = new TreeMap<>();

    SequentialTree(KeyLayout layout) {
        this.layout = layout;
        for (int k : layout.initiallyPresent()) {
            entries.put(layout.key(k), (long) KeyLayout.initialValue(k));
        }
    }

    public Long lookup(int key) {
        return entries.get(layout.key(key));
    }

    public boolean insert(int key, int value) {
        return entries.putIfAbsent(layout.key(key), (long) value) == null;
    }

    public boolean update(int key, int value) {
        return entries.replace(layout.key(key), (long) value) != null;
    }

    public boolean put(int key, int value) {
        return entries.put(layout.key(key), (long) value) != null;
    }

    public boolean delete(int key) {
        return entries.remove(layout.key(key)) != null;
    }

    public String scan(int key) {
        long start = layout.key(key);
        TreeMap<Long, Long> visible = new TreeMap<>(entries.tailMap(start, true));
        layout.background().tailSet(start, true).stream().limit(KeyLayout.SCAN_LENGTH)
                .forEach(b -> visible.put(b, KeyLayout.backgroundValue(b)));
        long[] keys = new long[KeyLayout.SCAN_LENGTH];
        long[] values = new long[KeyLayout.SCAN_LENGTH];
        int n = 0;
        for (Map.Entry<Long, Long> e : visible.entrySet()) {
            if (n == KeyLayout.SCAN_LENGTH) {
                break;
            }
            keys[n] = e.getKey();
            values[n++] = e.getValue();
        }
        return layout.describe(keys, values, n);
    }
}
