package dev.dex.bench;

import java.util.SplittableRandom;

/**
 * The loaded keys delete-heavy deletes, each once, in a random order (a seeded shuffle of the key indexes): the
 * warm-up deletes the first {@code warmup} of the order, the measured run the next ones, and thread t of n takes every
 * n-th of its phase's part starting at t, so the threads never delete the same key.
 *
 * <p>Immutable once made; read by every worker thread.
 */
final class DeleteOrder {
    private final int[] order;
    private final long warmup;
    private final int threads;

    /**
     * @param keys    the loaded keys, at most {@link Integer#MAX_VALUE}
     * @param warmup  the warm-up's operations (all deletes)
     * @param threads the worker threads
     */
    DeleteOrder(long keys, long warmup, int threads, long seed) {
        if (keys > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("delete-heavy shuffles at most " + Integer.MAX_VALUE + " keys: " + keys);
        }
        this.order = new int[(int) keys];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        SplittableRandom random = new SplittableRandom(seed ^ 0xDE1E7EL);
        for (int i = order.length - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int swap = order[i];
            order[i] = order[j];
            order[j] = swap;
        }
        this.warmup = warmup;
        this.threads = threads;
    }

    /**
     * The index of the key that thread {@code thread} deletes as its {@code i}-th operation of the warm-up or of the
     * measured run; with {@link BenchRunner#share} per thread, every index of the phase comes once.
     */
    long index(boolean measured, long i, int thread) {
        return order[(int) ((measured ? warmup : 0) + i * threads + thread)];
    }
}
