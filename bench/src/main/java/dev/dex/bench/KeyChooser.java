package dev.dex.bench;

import java.util.SplittableRandom;

/**
 * Picks the index (in [0, keys)) of the key an operation targets; {@link KeySpace} turns indexes into keys.
 * Implementations are immutable and thread-safe; each thread brings its own random source.
 */
interface KeyChooser {

    long nextIndex(SplittableRandom random);

    static KeyChooser of(Distribution distribution, long keys, double theta) {
        return switch (distribution) {
            case UNIFORM -> random -> random.nextLong(keys);
            case ZIPF -> {
                ZipfGenerator zipf = new ZipfGenerator(keys, theta);
                yield random -> scatter(zipf.rank(random.nextDouble()), keys);
            }
        };
    }

    /**
     * The key index of a Zipf rank: a 64-bit mix of the rank modulo {@code keys}, so the hottest keys are
     * spread over the key space instead of sitting next to each other (YCSB's scrambled Zipfian). Like
     * YCSB's, the map is not one-to-one: a few ranks share an index and a few indexes are never hot.
     */
    static long scatter(long rank, long keys) {
        return Long.remainderUnsigned(mix64(rank), keys);
    }

    /** The splitmix64 finalizer of {@code x} plus the golden-ratio increment (so rank 0 does not map to 0). */
    static long mix64(long x) {
        long z = x + 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
