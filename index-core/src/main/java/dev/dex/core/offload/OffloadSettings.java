package dev.dex.core.offload;

/**
 * Offloading settings of a compute node (paper §6.1).
 *
 * @param policy           {@link Policy#COST_MODEL} (DEX), {@link Policy#ALWAYS} (offload-only),
 *                         {@link Policy#NEVER} (no-offload)
 * @param window           samples per moving average
 * @param sampleRate       probability that an operation's latency is sampled
 * @param exploreRate      probability that a decision is flipped
 * @param localSearchNanos l_s, a local node search in nanoseconds
 * @param cacheCoefficient c, the extra cost of going through the cache
 * @param exploreBudget    the share of a compute thread's time that its flipped decisions may cost, at most (0: no
 *                         limit): a flip costs the gap between the two choices' averages, so after one the thread
 *                         flips no other for that gap divided by this share
 * The defaults are {@code dex.compute.offload} in index-core's reference.conf ({@link #of}).
 */
public record OffloadSettings(Policy policy, int window, double sampleRate, double exploreRate, double localSearchNanos,
                              double cacheCoefficient, double exploreBudget) {

    /** Settings whose explorations are not limited in time: every decision the explore rate draws is flipped. */
    public OffloadSettings(Policy policy, int window, double sampleRate, double exploreRate, double localSearchNanos,
                           double cacheCoefficient) {
        this(policy, window, sampleRate, exploreRate, localSearchNanos, cacheCoefficient, 0);
    }

    /** When a compute node offloads an eligible miss. */
    public enum Policy {
        COST_MODEL, ALWAYS, NEVER
    }

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
        if (!(exploreBudget >= 0 && exploreBudget <= 1)) {
            throw new IllegalArgumentException("the explore budget must be in [0, 1]: " + exploreBudget);
        }
    }

    /** The cost model of a {@code dex.compute.offload} section, for a compute node of {@code policy}. */
    public static OffloadSettings fromConfig(Policy policy, com.typesafe.config.Config offload) {
        return new OffloadSettings(policy, offload.getInt("window"), offload.getDouble("sample-rate"),
                offload.getDouble("explore-rate"), offload.getDouble("local-search-ns"), offload.getDouble("cache-coefficient"),
                offload.getDouble("explore-budget"));
    }

    /** The defaults of {@code dex.compute.offload} (index-core's reference.conf, their one home) for {@code policy}. */
    public static OffloadSettings of(Policy policy) {
        return fromConfig(policy, com.typesafe.config.ConfigFactory.defaultReferenceUnresolved().getConfig("dex.compute.offload"));
    }

    public static OffloadSettings never() {
        return of(Policy.NEVER);
    }
}
