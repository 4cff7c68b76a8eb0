package dev.dex.core.cache;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One session's statistics ({@link CacheStats} slots: hits, misses, restarts, offloads, ...).
 *
 * <pre>
 * Concurrency: one writer, the session's thread, which increments with opaque stores (no read-modify-write is
 * needed with one writer); any thread may read a slot (opaque loads: each value is one the writer stored, and
 * a reader sees them in order) to sum the engine's statistics. A reset from another thread races with the writer
 * by design and may lose the counts of that instant.
 * </pre>
 */
final class SessionCounters {
    private static final VarHandle SLOTS = MethodHandles.arrayElementVarHandle(long[].class);
    private final long[] slots = new long[CacheStats.COUNTERS];

    void count(int slot) {
        SLOTS.setOpaque(slots, slot, slots[slot] + 1);
    }

    long get(int slot) {
        return (long) SLOTS.getOpaque(slots, slot);
    }

    void reset() {
        for (int i = 0; i < slots.length; i++) {
            SLOTS.setOpaque(slots, i, 0L);
        }
    }
}
