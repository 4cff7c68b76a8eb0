package dev.dex.core.cache;

/**
 * The warm-up of a partition a compute node has just acquired ({@link DexEngine#warm}): one descent per node above
 * the leaves, left to right, each through the ordinary miss path, so its safety is the descent's.
 *
 * <p>Stateless; each call runs on its caller's thread, inside the partition as an operation is.
 */
final class PartitionWarm {
    private PartitionWarm() {
    }

    /** {@link DexEngine#warm(int)} that ends after {@code limitNanos} (then: the descents made so far). */
    static int run(DexEngine engine, int partition, long limitNanos) {
        long deadline = System.nanoTime() + limitNanos;
        engine.held.checkPartition(partition);
        int words = engine.keys.words();
        long[] key = new long[words];
        long[] fence = new long[words];
        long[] end = new long[words];
        if (!engine.held.tryEnter(partition)) {
            return -1;
        }
        int descents = 0;
        try (DexSession session = engine.newSession()) {
            // Inside the partition: its range is the one it has now (a split waits for the partitions it pauses).
            engine.partitions.lowerExclusive(partition, key, words);
            dev.dex.core.engine.IndexSession.successor(key, words); // the partition's first key
            engine.partitions.upperInclusive(partition, end, words);
            boolean again = false;
            while (true) {
                again = !session.warmStep(key, fence, again);
                if (System.nanoTime() - deadline > 0) {
                    return descents + (again ? 0 : 1);
                }
                if (again) {
                    continue;
                }
                descents++;
                if (engine.keys.isPosInfinity(fence, 0) || engine.keys.compare(fence, 0, end, 0) >= 0) {
                    engine.held.boostLeaves(partition, engine.arena.frames() / Math.max(1, engine.held.heldCount()));
                    return descents;
                }
                System.arraycopy(fence, 0, key, 0, words);
                dev.dex.core.engine.IndexSession.successor(key, words);
            }
        } finally {
            engine.held.exit(partition);
        }
    }
}
