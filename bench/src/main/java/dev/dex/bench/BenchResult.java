package dev.dex.bench;

import org.HdrHistogram.Histogram;

import dev.dex.rdma.VerbSnapshot;

/**
 * The outcome of a run, as the summary and the JSON report show it.
 *
 * @param treeBytes          bytes of the bulk-loaded tree (estimated for skiplist, which has none)
 * @param cacheBytes         cache bytes per compute node
 * @param cacheRatio         {@code cacheBytes / treeBytes}
 * @param throughputOpsPerSec measured operations per second of wall time
 * @param verbs              verbs of the measured operations, all engines summed
 * @param outcomes           counts indexed by {@link Outcome#ordinal()}
 * @param leafAdmission      the DEX engines' mean P_A at the end of the run (tuned with {@code auto}), or NaN
 */
record BenchResult(BenchSettings config, long treeBytes, long cacheBytes, double cacheRatio, long wallNanos,
                   double throughputOpsPerSec, VerbSnapshot verbs, double cacheHitRatio, long p50Nanos,
                   long p99Nanos, long p999Nanos, long maxNanos, double meanNanos, long[] outcomes,
                   double leafAdmission) {

    static BenchResult of(BenchSettings config, long treeBytes, RunStats stats) {
        Histogram latency = stats.latency();
        return new BenchResult(config, treeBytes, config.cacheBytesFor(treeBytes), config.cacheRatioFor(treeBytes),
                stats.wallNanos(), config.ops() * 1e9 / stats.wallNanos(), stats.verbs(), stats.cacheHitRatio(),
                latency.getValueAtPercentile(50), latency.getValueAtPercentile(99),
                latency.getValueAtPercentile(99.9), latency.getMaxValue(), latency.getMean(), stats.outcomes().clone(),
                stats.leafAdmission());
    }

    /** {@code count} per measured operation. */
    double perOp(long count) {
        return (double) count / config.ops();
    }

    long outcome(Outcome outcome) {
        return outcomes[outcome.ordinal()];
    }
}
