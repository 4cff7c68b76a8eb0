package dev.dex.bench;

import java.util.SortedMap;

import org.HdrHistogram.Histogram;

import dev.dex.rdma.VerbSnapshot;

/**
 * What the measured phase of a run produced.
 *
 * @param wallNanos      from the first worker's start to the last worker's end
 * @param latency        every measured operation's latency, in nanoseconds
 * @param outcomes       counts indexed by {@link Outcome#ordinal()}
 * @param verbs          verbs of all engines, counted from the reset after warm-up
 * @param cacheHitRatio  over the engines with a cache, or NaN
 * @param leafAdmission  the DEX engines' mean P_A at the end, or NaN
 * @param failures       operations that threw (warm-up included), by the simple name of the exception; empty
 *                       unless faults were injected, since otherwise the first failure ends the run
 */
record RunStats(long wallNanos, Histogram latency, long[] outcomes, VerbSnapshot verbs, double cacheHitRatio,
                double leafAdmission, SortedMap<String, Long> failures) {
}
