package dev.dex.core.cache;

/**
 * The IO markers one session holds (the paper's I/O flags): an address whose entry in the mapping table is
 * {@link MappingTable#IO} because this thread is reading, offloading or using that node uncached. While a marker
 * is held no other thread of the compute node can read, write or admit the node; the session releases every
 * marker it still holds when its operation ends or restarts.
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession}, so by one thread. A marker is taken by the session itself
 * (MappingTable.putIfAbsent of IO, which fails when another thread holds one or the node is cached) and then
 * recorded here with {@link #hold}; {@link #release} and {@link #releaseAll} remove the table's entry only if it
 * is still this IO marker; {@link #forget} stops tracking a marker the session replaced by a frame. The ranges
 * the operation entered in the engine's {@link OffloadExclusion} (a write in flight, descents into owned nodes
 * below shared ones) are held the same way and left with the markers.
 * </pre>
 */
final class Markers {
    private final MappingTable mapping;
    private final OffloadExclusion exclusion;
    private final long[] addresses;
    private int count;
    private final java.util.ArrayList<OffloadExclusion.Range> ranges = new java.util.ArrayList<>(4);

    /** This session's slots for its descents' escapes in the exclusion. */
    final OffloadExclusion.Descents descents;

    Markers(MappingTable mapping, OffloadExclusion exclusion, int capacity) {
        this.mapping = mapping;
        this.exclusion = exclusion;
        this.addresses = new long[capacity];
        this.descents = exclusion.descents();
    }

    /** The session closed: its (empty) descent slots are dropped from the exclusion. */
    void close() {
        releaseAll();
        exclusion.forget(descents);
    }

    /** Records a range this operation entered in the engine's exclusion; left by {@link #releaseAll}. */
    void hold(OffloadExclusion.Range range) {
        if (range != OffloadExclusion.NOTHING) {
            ranges.add(range);
        }
    }

    /** Records a marker this session has just put into the mapping table. */
    void hold(long address) {
        addresses[count++] = address;
    }

    boolean holds(long address) {
        for (int i = 0; i < count; i++) {
            if (addresses[i] == address) {
                return true;
            }
        }
        return false;
    }

    /** Stops tracking a marker that was replaced by a frame in the mapping table. */
    void forget(long address) {
        for (int i = 0; i < count; i++) {
            if (addresses[i] == address) {
                addresses[i] = addresses[--count];
                return;
            }
        }
    }

    /** Releases one marker: removes its entry from the mapping table. */
    void release(long address) {
        for (int i = 0; i < count; i++) {
            if (addresses[i] == address) {
                mapping.remove(address, MappingTable.IO);
                addresses[i] = addresses[--count];
                return;
            }
        }
    }

    /** Releases every marker and every exclusion range this session holds. */
    void releaseAll() {
        while (count > 0) {
            mapping.remove(addresses[--count], MappingTable.IO);
        }
        for (int i = ranges.size() - 1; i >= 0; i--) {
            exclusion.release(ranges.remove(i));
        }
    }
}
