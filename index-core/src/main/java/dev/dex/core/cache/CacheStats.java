package dev.dex.core.cache;

/**
 * What a {@link DexEngine}'s sessions did: node accesses served from a frame (hits) or by a remote read
 * (misses), nodes admitted into frames, frames cooled and evicted, stale shared nodes refreshed,
 * operations restarted, operations completed by offloading, offloads that fell back to the cache, nodes
 * read wider than their parent's slot and clipped to it (a split seen half-written, see docs/durability.md), and
 * offloaded writes not sent because something below the missed node was cached or in use here (counted among the
 * fallbacks too; docs/offloading.md), and frames freed without an eviction: dropped by a release, by an acquire (stale
 * frames of the partition, parents that span it), or by a merge (the nodes it changes). Every frame admitted is
 * either still cached, or was evicted or dropped.
 */
public record CacheStats(long hits, long misses, long admissions, long coolings, long evictions, long refreshes,
                         long restarts, long offloads, long offloadFallbacks, long repairs, long offloadsExcluded, long drops) {
    static final int HITS = 0;
    static final int MISSES = 1;
    static final int ADMISSIONS = 2;
    static final int COOLINGS = 3;
    static final int EVICTIONS = 4;
    static final int REFRESHES = 5;
    static final int RESTARTS = 6;
    static final int OFFLOADS = 7;
    static final int OFFLOAD_FALLBACKS = 8;
    static final int REPAIRS = 9;
    static final int OFFLOADS_EXCLUDED = 10;
    static final int DROPS = 11;
    static final int COUNTERS = 12;

    static CacheStats of(long[] c) {
        return new CacheStats(c[HITS], c[MISSES], c[ADMISSIONS], c[COOLINGS], c[EVICTIONS], c[REFRESHES], c[RESTARTS],
                c[OFFLOADS], c[OFFLOAD_FALLBACKS], c[REPAIRS], c[OFFLOADS_EXCLUDED], c[DROPS]);
    }

    /** hits / (hits + misses), or NaN before any node access. */
    public double hitRatio() {
        return hits + misses == 0 ? Double.NaN : (double) hits / (hits + misses);
    }
}
