package dev.dex.bench;

import java.util.ArrayList;
import java.util.List;

import dev.dex.core.engine.IndexEngine;
import dev.dex.core.engine.PartitionedEngine;
import dev.dex.rdma.VerbSnapshot;

/**
 * The compute nodes of a run: one engine instance per compute node, all in this JVM, and the resources they
 * run on (connections, fabric), closed after them in order.
 *
 * <p>Routing: with partitioned engines a worker thread talks to every engine through a
 * {@link PartitionRouter}; otherwise any engine serves any key, and worker thread {@code t} uses engine
 * {@code t mod C}, which spreads the threads evenly over the compute nodes.
 */
final class EngineCluster implements AutoCloseable {
    private final List<? extends IndexEngine> engines;
    private final List<PartitionedEngine> partitioned;
    private final long treeBytes;
    private final List<AutoCloseable> resources;

    /**
     * @param treeBytes bytes of the bulk-loaded tree (what the cache ratio is a fraction of)
     * @param resources closed in this order after the engines
     */
    EngineCluster(List<? extends IndexEngine> engines, long treeBytes, List<AutoCloseable> resources) {
        if (engines.isEmpty()) {
            throw new IllegalArgumentException("a cluster needs at least one engine");
        }
        this.engines = List.copyOf(engines);
        this.treeBytes = treeBytes;
        this.resources = List.copyOf(resources);
        List<PartitionedEngine> p = new ArrayList<>();
        for (IndexEngine engine : engines) {
            if (engine instanceof PartitionedEngine pe) {
                p.add(pe);
            }
        }
        if (!p.isEmpty() && p.size() != engines.size()) {
            throw new IllegalArgumentException("either every engine of a cluster is partitioned or none is");
        }
        this.partitioned = List.copyOf(p);
    }

    List<? extends IndexEngine> engines() {
        return engines;
    }

    long treeBytes() {
        return treeBytes;
    }

    /** A router for worker thread {@code thread}; call on that thread, as sessions belong to it. */
    Router newRouter(int thread) {
        if (!partitioned.isEmpty()) {
            return new PartitionRouter(partitioned);
        }
        return Router.of(engines.get(thread % engines.size()).newSession());
    }

    /** The verbs of every engine since the last reset, summed. */
    VerbSnapshot verbs() {
        VerbSnapshot sum = VerbSnapshot.ZERO;
        for (IndexEngine engine : engines) {
            sum = sum.plus(engine.verbs());
        }
        return sum;
    }

    /** The mean hit ratio of the engines that have a cache, or NaN when none has. */
    double cacheHitRatio() {
        double sum = 0;
        int n = 0;
        for (IndexEngine engine : engines) {
            double ratio = engine.cacheHitRatio();
            if (!Double.isNaN(ratio)) {
                sum += ratio;
                n++;
            }
        }
        return n == 0 ? Double.NaN : sum / n;
    }

    void resetStats() {
        for (IndexEngine engine : engines) {
            engine.resetStats();
        }
    }

    @Override
    public void close() {
        RuntimeException failure = null;
        List<AutoCloseable> all = new ArrayList<>(engines);
        all.addAll(resources);
        for (AutoCloseable c : all) {
            try {
                c.close();
            } catch (Exception e) {
                if (failure == null) {
                    failure = new IllegalStateException("closing the engines failed", e);
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }
}
