package dev.dex.bench;

/**
 * Zipf-distributed ranks in {@code [0, items)}: rank {@code r} has probability proportional to
 * {@code 1 / (r + 1)^theta}, rank 0 the most frequent. The algorithm of Gray et al., "Quickly generating
 * billion-record synthetic databases" (SIGMOD 1994), as YCSB uses it: exact for ranks 0 and 1, a closed-form
 * approximation for the rest, O(1) per draw after {@code zeta(items, theta)} is computed once.
 *
 * <p>Immutable and thread-safe: callers bring their own uniform draws.
 */
public final class ZipfGenerator {
    /** Terms of zeta summed one by one; the rest come from the Euler-Maclaurin formula. */
    static final long EXACT_TERMS = 1 << 20;

    private final long items;
    private final double theta;
    private final double zetaN;
    private final double alpha;
    private final double eta;
    private final double rankOneBound;

    /** @param theta skew in [0, 1): 0 is uniform, 0.99 the paper's default */
    public ZipfGenerator(long items, double theta) {
        if (items < 1) {
            throw new IllegalArgumentException("a Zipf distribution needs at least one item: " + items);
        }
        if (!(theta >= 0 && theta < 1)) {
            throw new IllegalArgumentException("Zipf theta must be in [0, 1): " + theta);
        }
        this.items = items;
        this.theta = theta;
        this.zetaN = zeta(items, theta);
        this.alpha = 1 / (1 - theta);
        double zeta2 = zeta(2, theta);
        this.eta = items <= 2 ? 0 : (1 - Math.pow(2.0 / items, 1 - theta)) / (1 - zeta2 / zetaN);
        this.rankOneBound = 1 + Math.pow(0.5, theta);
    }

    long items() {
        return items;
    }

    double theta() {
        return theta;
    }

    /** The rank for a uniform draw {@code u} in [0, 1). */
    public long rank(double u) {
        double uz = u * zetaN;
        if (uz < 1) {
            return 0;
        }
        if (uz < rankOneBound || items <= 2) {
            return Math.min(1, items - 1);
        }
        long rank = (long) (items * Math.pow(eta * u - eta + 1, alpha));
        return Math.min(rank, items - 1);
    }

    /** The probability of {@code rank} under the exact Zipf law, which tests hold the sampled ranks against. */
    double probability(long rank) {
        return Math.pow(rank + 1, -theta) / zetaN;
    }

    /** {@code zeta(n, theta)}, the sum of {@code 1 / i^theta} for i in [1, n]. */
    static double zeta(long n, double theta) {
        return zeta(n, theta, EXACT_TERMS);
    }

    /**
     * Sums the first {@code exactTerms} terms one by one (smallest first, for accuracy), then adds the rest
     * by Euler-Maclaurin: {@code sum_{i=m+1..n} f(i) ~ integral_m^n f + (f(n) - f(m)) / 2 + (f'(n) - f'(m)) / 12}
     * with {@code f(x) = x^-theta}; the next term is below 1e-15 of the sum for m >= 2^10.
     */
    static double zeta(long n, double theta, long exactTerms) {
        long m = Math.min(n, exactTerms);
        double sum = 0;
        for (long i = m; i >= 1; i--) {
            sum += Math.pow(i, -theta);
        }
        if (n > m) {
            double integral = (Math.pow(n, 1 - theta) - Math.pow(m, 1 - theta)) / (1 - theta);
            double ends = (Math.pow(n, -theta) - Math.pow(m, -theta)) / 2;
            double slopes = -theta * (Math.pow(n, -theta - 1) - Math.pow(m, -theta - 1)) / 12;
            sum += integral + ends + slopes;
        }
        return sum;
    }
}
