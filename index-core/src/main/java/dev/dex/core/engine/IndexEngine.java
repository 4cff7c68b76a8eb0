package dev.dex.core.engine;

import dev.dex.rdma.VerbSnapshot;

/** A compute node's index engine: hands out per-thread sessions and reports what it did. */
public interface IndexEngine extends AutoCloseable {

    /** The engine mode: {@code baseline}, {@code partitioned}, {@code sherman}, {@code dex}. */
    String mode();

    /** A session for the calling thread. */
    IndexSession newSession();

    /** Verbs this engine issued since the last {@link #resetStats()}. */
    VerbSnapshot verbs();

    /** Cache hits / (hits + misses) since the last reset, or {@code NaN} for an engine without a cache. */
    double cacheHitRatio();

    /** Zeroes the verb counters and cache statistics (for example after warm-up). */
    void resetStats();

    @Override
    void close();
}
