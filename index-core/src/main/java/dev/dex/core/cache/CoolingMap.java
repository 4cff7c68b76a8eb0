package dev.dex.core.cache;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The cooling map (paper §5.2): a hash table of small FIFO buckets holding the frames that are
 * candidates for eviction. A cooled frame goes to the tail of the bucket its node's address hashes to; a
 * full bucket evicts its head to make room; a thread short of free frames evicts the head of a random
 * bucket. Buckets hold {@value #SLOTS} frames; there are about {@code coolingRatio * frames / 6} of them.
 *
 * <pre>
 * Concurrency: one monitor per bucket ({@link #monitor}). Every method except {@link #size()} and
 * {@link #bucketOf} must be called with the bucket's monitor held. Lock order: a thread may take a
 * bucket monitor while it holds frame locks (to remove a frame it is reheating), but while it holds a
 * bucket monitor it only ever TRIES frame locks, so the two orders cannot deadlock.
 * </pre>
 */
final class CoolingMap {
    static final int SLOTS = 6;

    private final int buckets;
    private final int[] slots;
    private final int[] counts;
    private final Object[] monitors;
    private final AtomicInteger size = new AtomicInteger();

    CoolingMap(int frames, double coolingRatio) {
        this.buckets = Math.max(1, (int) Math.ceil(frames * coolingRatio / SLOTS));
        this.slots = new int[buckets * SLOTS];
        Arrays.fill(slots, FrameHeaderDescriptor.NO_FRAME);
        this.counts = new int[buckets];
        this.monitors = new Object[buckets];
        for (int i = 0; i < buckets; i++) {
            monitors[i] = new Object();
        }
    }

    int buckets() {
        return buckets;
    }

    /** Frames held in all buckets; approximate while others change it. */
    int size() {
        return size.get();
    }

    /** Frames the map can hold. */
    int capacity() {
        return buckets * SLOTS;
    }

    int bucketOf(long address) {
        long h = address * 0xC2B2AE3D27D4EB4FL;
        return (int) Math.floorMod(h >>> 32, (long) buckets);
    }

    Object monitor(int bucket) {
        return monitors[bucket];
    }

    int count(int bucket) {
        return counts[bucket];
    }

    boolean isFull(int bucket) {
        return counts[bucket] == SLOTS;
    }

    /** The oldest frame of the bucket; the bucket must not be empty. */
    int head(int bucket) {
        return slots[bucket * SLOTS];
    }

    int slot(int bucket, int index) {
        return slots[bucket * SLOTS + index];
    }

    void removeHead(int bucket) {
        removeAt(bucket, 0);
    }

    /** Appends at the tail; the bucket must not be full. */
    void append(int bucket, int frame) {
        slots[bucket * SLOTS + counts[bucket]++] = frame;
        size.incrementAndGet();
    }

    /** Removes {@code frame} if the bucket holds it. */
    boolean remove(int bucket, int frame) {
        int base = bucket * SLOTS;
        for (int i = 0; i < counts[bucket]; i++) {
            if (slots[base + i] == frame) {
                removeAt(bucket, i);
                return true;
            }
        }
        return false;
    }

    private void removeAt(int bucket, int index) {
        int base = bucket * SLOTS;
        int n = counts[bucket];
        System.arraycopy(slots, base + index + 1, slots, base + index, n - index - 1);
        slots[base + n - 1] = FrameHeaderDescriptor.NO_FRAME;
        counts[bucket] = n - 1;
        size.decrementAndGet();
    }
}
