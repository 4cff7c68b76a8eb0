package dev.dex.core.cache;

import org.agrona.collections.Long2LongHashMap;

/**
 * The cache's mapping table: global address of a node to the frame caching it, or to {@link #IO}, the
 * marker of a node that one thread of this compute node is reading, writing uncached, or loading. A
 * thread that finds the marker restarts its operation rather than issue the same remote access again.
 *
 * <p>Concurrency: lock striping. Each of 2^k stripes is a primitive open-addressing map guarded by its own
 * monitor; an address hashes to one stripe, so threads touching different nodes rarely meet. Every
 * method is atomic with respect to the others. The table is consulted only on a cache miss or an
 * unswizzled pointer: swizzled pointers bypass it.
 */
final class MappingTable {
    static final long ABSENT = -1;
    static final long IO = -2;

    private final Long2LongHashMap[] stripes;
    private final int mask;

    MappingTable(int expectedEntries, int concurrency) {
        int count = Integer.highestOneBit(Math.max(1, concurrency * 16) - 1) << 1;
        this.mask = count - 1;
        this.stripes = new Long2LongHashMap[count];
        int perStripe = Math.max(8, expectedEntries / count * 2);
        for (int i = 0; i < count; i++) {
            stripes[i] = new Long2LongHashMap(perStripe, 0.65f, ABSENT);
        }
    }

    private Long2LongHashMap stripe(long address) {
        long h = address * 0x9E3779B97F4A7C15L;
        return stripes[(int) (h >>> 40) & mask];
    }

    /** The frame id, {@link #IO}, or {@link #ABSENT}. */
    long get(long address) {
        Long2LongHashMap s = stripe(address);
        synchronized (s) {
            return s.get(address);
        }
    }

    /** Maps {@code address} to {@code value} if it has no entry; returns the entry found, or ABSENT. */
    long putIfAbsent(long address, long value) {
        Long2LongHashMap s = stripe(address);
        synchronized (s) {
            long found = s.get(address);
            if (found == ABSENT) {
                s.put(address, value);
            }
            return found;
        }
    }

    /** Replaces the entry of {@code address} if it is {@code expected}. */
    boolean replace(long address, long expected, long value) {
        Long2LongHashMap s = stripe(address);
        synchronized (s) {
            if (s.get(address) != expected) {
                return false;
            }
            s.put(address, value);
            return true;
        }
    }

    /** Removes the entry of {@code address} if it is {@code expected}. */
    boolean remove(long address, long expected) {
        Long2LongHashMap s = stripe(address);
        synchronized (s) {
            if (s.get(address) != expected) {
                return false;
            }
            s.remove(address);
            return true;
        }
    }

    /** Entries (frames and markers); for validation and statistics. */
    long size() {
        long n = 0;
        for (Long2LongHashMap s : stripes) {
            synchronized (s) {
                n += s.size();
            }
        }
        return n;
    }

    /** Calls {@code visitor} for every entry, stripe by stripe; for validation while quiescent. */
    void forEach(org.agrona.collections.LongLongConsumer visitor) {
        for (Long2LongHashMap s : stripes) {
            synchronized (s) {
                s.forEachLong(visitor);
            }
        }
    }
}
