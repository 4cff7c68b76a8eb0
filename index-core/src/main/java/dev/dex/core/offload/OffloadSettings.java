package dev.dex.core.offload;

/**
 * Offloading settings of a compute node (paper §6.1).
 *
 * @param policy           {@link Policy#COST_MODEL} (DEX), {@link Policy#ALWAYS} (offload-only),
 *                         {@link Policy#NEVER} (no-offload)
 * @param window           samples per moving average (default 50)
 * @param sampleRate       probability that an operation's latency is sampled (default 0.01)
 * @param exploreRate      probability that a decision is flipped (default 0.01)
 * @param localSearchNanos l_s, a local node search (default 40 ns)
 * @param cacheCoefficient c, the extra cost of going through the cache (default 1.2)
 */
public record OffloadSettings(Policy policy, int window, double sampleRate, double exploreRate, double localSearchNanos,
                              double cacheCoefficient) {

    /** When a compute node offloads an eligible miss. */
    public enum Policy {
        COST_MODEL, ALWAYS, NEVER
    }

    public static final int DEFAULT_WINDOW = 50;
    public static final double DEFAULT_SAMPLE_RATE = 0.01;
    public static final double DEFAULT_EXPLORE_RATE = 0.01;
    public static final double DEFAULT_LOCAL_SEARCH_NANOS = 40;
    public static final double DEFAULT_CACHE_COEFFICIENT = 1.2;

    public OffloadSettings {
        if (window < 1) {
            throw new IllegalArgumentException("offload window must be >= 1 sample: " + window);
        }
        if (!(sampleRate >= 0 && sampleRate <= 1) || !(exploreRate >= 0 && exploreRate <= 1)) {
            throw new IllegalArgumentException("sample and explore rates must be in [0, 1]: " + sampleRate + ", " + exploreRate);
        }
        if (!(localSearchNanos >= 0) || !(cacheCoefficient > 0)) {
            throw new IllegalArgumentException("l_s must be >= 0 and c > 0: " + localSearchNanos + ", " + cacheCoefficient);
        }
    }

    public static OffloadSettings of(Policy policy) {
        return new OffloadSettings(policy, DEFAULT_WINDOW, DEFAULT_SAMPLE_RATE, DEFAULT_EXPLORE_RATE,
                DEFAULT_LOCAL_SEARCH_NANOS, DEFAULT_CACHE_COEFFICIENT);
    }

    public static OffloadSettings never() {
        return of(Policy.NEVER);
    }
}
