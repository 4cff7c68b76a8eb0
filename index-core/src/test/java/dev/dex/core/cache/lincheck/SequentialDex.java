package dev.dex.core.cache.lincheck;

import java.util.Map;
import java.util.TreeMap;

/**
 * The sequential specification of {@link ConcurrentDex}: a {@link TreeMap} of the test keys, with the
 * layout's background keys (which no operation changes) merged into scans, and scans cut at the end of
 * the partitions the start key's engine holds. Method signatures mirror the operations, as Lincheck
 * requires; it needs a public no-argument constructor, so each other layout has a subclass that passes it.
 */
public class SequentialDex {
    private final PartitionedKeyLayout layout;
    private final TreeMap<Long, Long> entries = new TreeMap<>();

    /** The specification over {@link PartitionedKeyLayout#THREE_PARTITIONS_OVER_A_FULL_ROOT}. */
    public SequentialDex() {
        this(PartitionedKeyLayout.THREE_PARTITIONS_OVER_A_FULL_ROOT);
    }

    SequentialDex(PartitionedKeyLayout layout) {
        this.layout = layout;
        for (int k : layout.initiallyPresent()) {
            entries.put(layout.key(k), (long) PartitionedKeyLayout.initialValue(k));
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
        long limit = layout.scanLimit(start);
        TreeMap<Long, Long> visible = new TreeMap<>(entries.subMap(start, true, limit, true));
        layout.background().subSet(start, true, limit, true).stream().limit(PartitionedKeyLayout.SCAN_LENGTH)
                .forEach(b -> visible.put(b, PartitionedKeyLayout.backgroundValue(b)));
        long[] keys = new long[PartitionedKeyLayout.SCAN_LENGTH];
        long[] values = new long[PartitionedKeyLayout.SCAN_LENGTH];
        int n = 0;
        for (Map.Entry<Long, Long> e : visible.entrySet()) {
            if (n == PartitionedKeyLayout.SCAN_LENGTH) {
                break;
            }
            keys[n] = e.getKey();
            values[n++] = e.getValue();
        }
        return layout.describe(keys, values, n);
    }
}
