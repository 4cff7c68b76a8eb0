package dev.dex.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

import dev.dex.core.engine.IndexEngine;
import dev.dex.core.partition.PartitionedEngine;
import dev.dex.rdma.FaultInjectingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbSnapshot;

/**
 * The compute nodes of a run: one engine instance per compute node, all in this JVM, and the resources they
 * run on (connections, fabric), closed after them in order.
 *
 * <p>Routing: with partitioned engines a worker thread talks to every engine through a
 * {@link OwnerRouter}; otherwise any engine serves any key, and worker thread {@code t} uses engine
 * {@code t mod C}, which spreads the threads evenly over the compute nodes.
 *
 * <p>With injected faults each engine's connection is a {@link FaultInjectingRemoteMemory}; the end-of-run checks
 * switch them off, {@link #closeEngines close the engines} and look at the memory through {@link #connect new
 * connections}, before {@link #close} closes the rest. A run that got stuck inside an engine is {@link #leaveOpen
 * left open}: closing would wait for the stuck thread, or free memory under it.
 *
 * <p>Concurrency: confined to the bench's main thread, except {@link #recovery()}, which the workers share (see
 * {@link PartitionRecovery}), and the checks, which run on a thread of their own while the main thread waits.
 */
final class EngineCluster implements AutoCloseable {
    private final List<? extends IndexEngine> engines;
    private final List<PartitionedEngine> partitioned;
    private final long treeBytes;
    private final List<AutoCloseable> resources;
    private final List<FaultInjectingRemoteMemory> injectors;
    private final Supplier<RemoteMemory> connector;
    private final PartitionRecovery recovery;
    /** Backups to copy a third of the way into the measured run ({@code --copy-under-load}), or null. */
    private ReplicaCopy copyUnderLoad;
    private volatile boolean enginesClosed;
    private volatile boolean leaveOpen;

    /**
     * @param treeBytes bytes of the bulk-loaded tree (what the cache ratio is a fraction of)
     * @param resources closed in this order after the engines
     */
    EngineCluster(List<? extends IndexEngine> engines, long treeBytes, List<AutoCloseable> resources) {
        this(engines, treeBytes, resources, List.of(), null);
    }

    /**
     * @param injectors the fault injectors the engines' connections go through (none without injected faults)
     * @param connector a new connection to every memory node, for the checks; null without a fabric
     */
    EngineCluster(List<? extends IndexEngine> engines, long treeBytes, List<AutoCloseable> resources,
                  List<FaultInjectingRemoteMemory> injectors, Supplier<RemoteMemory> connector) {
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
        this.injectors = List.copyOf(injectors);
        this.connector = connector;
        this.recovery = partitioned.isEmpty() ? null : new PartitionRecovery(partitioned);
    }

    void copyUnderLoad(ReplicaCopy copy) {
        this.copyUnderLoad = copy;
    }

    /** The backups to copy during the measured run, or null. */
    ReplicaCopy copyUnderLoad() {
        return copyUnderLoad;
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
            return new OwnerRouter(partitioned);
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

    /** The mean P_A of the DEX engines now (where tuning took it, with {@code --leaf-admission auto}), or NaN. */
    double leafAdmission() {
        return engines.stream().filter(e -> e instanceof dev.dex.core.cache.DexEngine)
                .mapToDouble(e -> ((dev.dex.core.cache.DexEngine) e).leafAdmission()).average().orElse(Double.NaN);
    }

    void resetStats() {
        for (IndexEngine engine : engines) {
            engine.resetStats();
        }
    }

    /** The partitioned engines (none in the other modes), partition p held by engine p mod their number. */
    List<PartitionedEngine> partitioned() {
        return partitioned;
    }

    /** Takes partitions up again after failures; null when the engines are not partitioned. */
    PartitionRecovery recovery() {
        return recovery;
    }

    /** The fault injectors of the engines' connections; empty without injected faults. */
    List<FaultInjectingRemoteMemory> injectors() {
        return injectors;
    }

    /** Turns fault injection on or off on every engine's connection. */
    void injectFaults(boolean on) {
        for (FaultInjectingRemoteMemory injector : injectors) {
            injector.enabled(on);
        }
    }

    /** A new connection to every memory node, with no faults; the caller closes it. */
    RemoteMemory connect() {
        if (connector == null) {
            throw new IllegalStateException("this cluster has no fabric");
        }
        return connector.get();
    }

    /** Closes the engines (which writes every dirty page back) but not what they run on. */
    void closeEngines() {
        enginesClosed = true;
        closeAll(new ArrayList<>(engines));
    }

    /** Makes {@link #close} do nothing: a thread is stuck inside an engine. */
    void leaveOpen() {
        leaveOpen = true;
    }

    @Override
    public void close() {
        if (leaveOpen) {
            return;
        }
        List<AutoCloseable> all = new ArrayList<>();
        if (!enginesClosed) {
            all.addAll(engines);
        }
        all.addAll(resources);
        closeAll(all);
    }

    private static void closeAll(List<AutoCloseable> all) {
        RuntimeException failure = null;
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
