package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ZipfGeneratorTest {
    private static final int DRAWS = 200_000;

    private static long[] histogram(ZipfGenerator zipf, int draws, long seed) {
        long[] counts = new long[(int) zipf.items()];
        SplittableRandom random = new SplittableRandom(seed);
        for (int i = 0; i < draws; i++) {
            counts[(int) zipf.rank(random.nextDouble())]++;
        }
        return counts;
    }

    @Test
    void rankZeroIsFarMoreFrequentThanTheMiddleRank() {
        ZipfGenerator zipf = new ZipfGenerator(1000, 0.99);
        long[] counts = histogram(zipf, DRAWS, 1);
        // The law says p(0) / p(500) = 501^0.99, about 470.
        assertTrue(counts[0] > 100 * Math.max(1, counts[500]), "rank 0: " + counts[0] + ", rank 500: " + counts[500]);
        assertTrue(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[100],
                "frequencies must fall with rank");
    }

    @ParameterizedTest
    @ValueSource(doubles = {0.5, 0.9, 0.99})
    void ranksZeroAndOneFollowTheZipfLaw(double theta) {
        ZipfGenerator zipf = new ZipfGenerator(10_000, theta);
        long[] counts = histogram(zipf, DRAWS, 2);
        for (int rank = 0; rank <= 1; rank++) {
            double expected = zipf.probability(rank) * DRAWS;
            assertEquals(expected, counts[rank], 0.05 * expected, "rank " + rank + " at theta " + theta);
        }
    }

    @Test
    void thetaZeroIsUniform() {
        ZipfGenerator zipf = new ZipfGenerator(1000, 0);
        long[] counts = histogram(zipf, DRAWS, 3);
        for (int bucket = 0; bucket < 10; bucket++) {
            long inBucket = 0;
            for (int r = bucket * 100; r < (bucket + 1) * 100; r++) {
                inBucket += counts[r];
            }
            assertEquals(DRAWS / 10.0, inBucket, DRAWS * 0.007, "bucket " + bucket);
        }
    }

    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3, 5, 1000})
    void ranksStayWithinTheItems(long items) {
        ZipfGenerator zipf = new ZipfGenerator(items, 0.99);
        SplittableRandom random = new SplittableRandom(4);
        for (int i = 0; i < 10_000; i++) {
            long rank = zipf.rank(random.nextDouble());
            assertTrue(rank >= 0 && rank < items, "rank " + rank + " of " + items);
        }
        assertEquals(0, zipf.rank(0.0));
    }

    @ParameterizedTest
    @ValueSource(doubles = {0.0, 0.5, 0.99})
    void zetaTailFormulaMatchesTheExactSum(double theta) {
        long n = 3_000_000;
        double exact = ZipfGenerator.zeta(n, theta, n);
        double approximated = ZipfGenerator.zeta(n, theta, 1024);
        assertEquals(exact, approximated, exact * 1e-12);
    }

    @Test
    void badParametersAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> new ZipfGenerator(0, 0.5));
        assertThrows(IllegalArgumentException.class, () -> new ZipfGenerator(10, 1.0));
        assertThrows(IllegalArgumentException.class, () -> new ZipfGenerator(10, -0.1));
        assertThrows(IllegalArgumentException.class, () -> new ZipfGenerator(10, Double.NaN));
    }
}
