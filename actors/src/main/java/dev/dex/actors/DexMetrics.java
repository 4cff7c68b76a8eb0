package dev.dex.actors;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.ToLongFunction;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;

import dev.dex.core.cache.CacheStats;
import dev.dex.core.cache.DexEngine;
import dev.dex.rdma.VerbSnapshot;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.datapoints.DistributionDataPoint;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/**
 * A node's metrics, for Prometheus to scrape ({@code docs/operations.md} lists each one): the verbs its engine
 * issued by kind, its cache's hits, misses, admissions, evictions and offloads, the partitions it holds and hands
 * off, the operations it ran per partition, the offloads a memory node ran, and a client's request latencies. One per actor system (a Pekko extension, {@link #get});
 * the engine's own counters are read when scraped, so nothing is added to an operation's path.
 *
 * <p>The recording methods ({@link #engine}, {@link #acquired}, {@link #memoryOffload}, {@link #request}, ...) are
 * public only because the roles that record live in the module's three role packages; they are for those, not for
 * code outside the module.
 *
 * <pre>
 * Concurrency: thread-safe. Engines (and their partitions' loads) are registered in copy-on-write lists (a compute node registers one when it
 * is ready, and removes it when it stops); the counters are the Prometheus client's (lock-free adds); a scrape
 * reads the engines' counters, which are sums of per-session counters written with opaque stores, so a scrape
 * sees each counter as of some moment during the scrape.
 * </pre>
 */
public final class DexMetrics implements Extension {
    /** The extension's id; {@link #get} registers it. */
    public static final ExtensionId<DexMetrics> ID = new ExtensionId<>() {
        @Override
        public DexMetrics createExtension(ActorSystem<?> system) {
            return new DexMetrics();
        }
    };

    private final PrometheusRegistry registry = new PrometheusRegistry();
    private final List<DexEngine> engines = new CopyOnWriteArrayList<>();
    private final List<PartitionLoad> loads = new CopyOnWriteArrayList<>();
    private final Counter handoffs;
    private final Counter memoryOffloads;
    private final Histogram requestSeconds;
    private final java.util.concurrent.atomic.AtomicLong rebalanceRounds = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong rebalanceMoves = new java.util.concurrent.atomic.AtomicLong();
    DexMetrics() {
        CounterWithCallback.builder().name("dex_verbs").help("Verbs the compute node's engine issued to remote memory, by kind")
                .labelNames("kind")
                .callback(callback -> {
                    VerbSnapshot verbs = verbs();
                    callback.call(verbs.reads(), "read");
                    callback.call(verbs.writes(), "write");
                    callback.call(verbs.atomics(), "atomic");
                    callback.call(verbs.twoSided(), "two_sided");
                })
                .register(registry);
        CounterWithCallback.builder().name("dex_verb_bytes").help("Bytes the compute node's engine moved with its verbs")
                .callback(callback -> callback.call(verbs().bytes())).register(registry);
        cacheCounter("dex_cache_hits", "Node accesses served from the cache", CacheStats::hits);
        cacheCounter("dex_cache_misses", "Node accesses that missed the cache", CacheStats::misses);
        cacheCounter("dex_cache_admissions", "Nodes admitted into the cache", CacheStats::admissions);
        cacheCounter("dex_cache_evictions", "Frames evicted from the cache", CacheStats::evictions);
        cacheCounter("dex_offloads", "Operations completed on a memory node (offloaded misses)", CacheStats::offloads);
        cacheCounter("dex_offload_fallbacks", "Offload attempts that fell back to the caching path", CacheStats::offloadFallbacks);
        CounterWithCallback.builder().name("dex_leaf_merges")
                .help("Leaves merged away after deletes left them sparse, reused by splits (inherited: freed by a previous"
                        + " owner of the partition), and nodes left behind (docs/merges.md)")
                .labelNames("event")
                .callback(callback -> {
                    long[] sums = new long[4];
                    for (DexEngine engine : engines) {
                        long[] counts = engine.mergeCounts();
                        for (int i = 0; i < sums.length; i++) {
                            sums[i] += counts[i];
                        }
                    }
                    callback.call(sums[0], "merged");
                    callback.call(sums[1], "reused");
                    callback.call(sums[2], "leaked");
                    callback.call(sums[3], "inherited");
                })
                .register(registry);
        CounterWithCallback.builder().name("dex_partition_splits")
                .help("Partitions this compute node split by load (dex.compute.split, docs/partition-splits.md)")
                .callback(callback -> callback.call(loads.stream().mapToLong(PartitionLoad::splits).sum()))
                .register(registry);
        CounterWithCallback.builder().name("dex_partition_merges")
                .help("Pairs of cold neighbouring partitions this compute node merged (dex.compute.split.merge-below)")
                .callback(callback -> callback.call(loads.stream().mapToLong(PartitionLoad::merges).sum()))
                .register(registry);
        CounterWithCallback.builder().name("dex_merge_sweeps")
                .help("Partitions swept after their deletes stopped (dex.compute.merge-sweep, docs/merges.md)")
                .callback(callback -> callback.call(engines.stream().mapToLong(engine -> engine.mergeCounts()[4]).sum()))
                .register(registry);
        GaugeWithCallback.builder().name("dex_cache_hit_ratio").help("Hits over node accesses since the node started")
                .callback(callback -> {
                    long hits = sum(CacheStats::hits);
                    long accesses = hits + sum(CacheStats::misses);
                    callback.call(accesses == 0 ? 0 : (double) hits / accesses);
                })
                .register(registry);
        GaugeWithCallback.builder().name("dex_leaf_admission").help("P_A now: the probability that a leaf read on a miss is"
                        + " admitted (fixed, or tuned with dex.compute.leaf-admission = auto)")
                .callback(callback -> callback.call(engines.stream().mapToDouble(DexEngine::leafAdmission).average().orElse(0)))
                .register(registry);
        GaugeWithCallback.builder().name("dex_partitions_held").help("Partitions the compute node holds now")
                .callback(callback -> callback.call(engines.stream().mapToLong(DexMetrics::held).sum())).register(registry);
        CounterWithCallback.builder().name("dex_partition_operations")
                .help("Operations the compute node ran for each partition since it started (kept after a move away)")
                .labelNames("partition")
                .callback(callback -> {
                    // Summed over the loads registered (one per compute node; a label may be reported only once).
                    long[] operations = new long[loads.stream().mapToInt(PartitionLoad::partitions).max().orElse(0)];
                    for (PartitionLoad load : loads) {
                        for (int p = 0; p < load.partitions(); p++) {
                            operations[p] += load.operations(p);
                        }
                    }
                    for (int p = 0; p < operations.length; p++) {
                        if (operations[p] > 0) {
                            callback.call(operations[p], Integer.toString(p));
                        }
                    }
                })
                .register(registry);
        this.handoffs = Counter.builder().name("dex_partition_handoffs")
                .help("Partitions acquired (a move to this node or a start) and released (a move away) by this compute node")
                .labelNames("event").register(registry);
        CounterWithCallback.builder().name("dex_rebalance_rounds")
                .help("Rebalance rounds that moved partitions, run by the shard coordinator while it was on this node")
                .callback(callback -> callback.call(rebalanceRounds.get())).register(registry);
        CounterWithCallback.builder().name("dex_rebalance_moves")
                .help("Partitions those rounds moved (a join's, a leave's drain, a balance among the others)")
                .callback(callback -> callback.call(rebalanceMoves.get())).register(registry);
        this.memoryOffloads = Counter.builder().name("dex_memory_offloads")
                .help("Offloaded operations this memory node ran, by outcome").labelNames("outcome").register(registry);
        this.requestSeconds = Histogram.builder().name("dex_client_request_seconds")
                .help("A client's requests, from its call to the answer (retries included)").labelNames("op")
                .classicOnly().classicExponentialUpperBounds(0.0001, 2, 16).register(registry);
    }

    /** The metrics of {@code system}'s node. */
    public static DexMetrics get(ActorSystem<?> system) {
        return system.registerExtension(ID);
    }

    private void cacheCounter(String name, String help, ToLongFunction<CacheStats> field) {
        CounterWithCallback.builder().name(name).help(help).callback(callback -> callback.call(sum(field))).register(registry);
    }

    private long sum(ToLongFunction<CacheStats> field) {
        long sum = 0;
        for (DexEngine engine : engines) {
            sum += field.applyAsLong(engine.stats());
        }
        return sum;
    }

    private VerbSnapshot verbs() {
        VerbSnapshot sum = VerbSnapshot.ZERO;
        for (DexEngine engine : engines) {
            VerbSnapshot v = engine.verbs();
            sum = new VerbSnapshot(sum.reads() + v.reads(), sum.writes() + v.writes(), sum.atomics() + v.atomics(),
                    sum.twoSided() + v.twoSided(), sum.bytes() + v.bytes());
        }
        return sum;
    }

    private static long held(DexEngine engine) {
        long held = 0;
        for (int p : engine.partitions().ids()) {
            if (engine.holds(p)) {
                held++;
            }
        }
        return held;
    }

    /** A compute node's engine and the load its workers measure, ready: their counters are exported from now on. */
    public void engine(DexEngine engine, PartitionLoad load) {
        engines.add(engine);
        loads.add(load);
    }

    /** The compute node stopped: its engine and load are no longer exported. */
    public void engineStopped(DexEngine engine, PartitionLoad load) {
        engines.remove(engine);
        loads.remove(load);
    }

    /** A partition was acquired by this compute node. */
    public void acquired() {
        handoffs.labelValues("acquired").inc();
    }

    /** A partition was released by this compute node (handed off). */
    public void released() {
        handoffs.labelValues("released").inc();
    }

    /** The shard coordinator on this node started a rebalance round that moves {@code partitions} partitions (&gt; 0). */
    public void rebalanceRound(int partitions) {
        rebalanceRounds.incrementAndGet();
        rebalanceMoves.addAndGet(partitions);
    }

    /** Rebalance rounds that moved partitions, run by the shard coordinator while it was on this node. */
    public long rebalanceRounds() {
        return rebalanceRounds.get();
    }

    /** Partitions those rounds moved. */
    public long rebalanceMoves() {
        return rebalanceMoves.get();
    }

    /** This memory node ran an offloaded operation with {@code outcome} (ok, refused, ...). */
    public void memoryOffload(String outcome) {
        memoryOffloads.labelValues(outcome).inc();
    }

    /** A client request of kind {@code op} (get, put, delete, scan) took {@code nanos} from call to answer. */
    public void request(String op, long nanos) {
        requestSeconds.labelValues(op).observe(nanos / 1e9);
    }

    /**
     * A recorder of a client's requests of operation {@code op} (nanoseconds each), as {@link #request(String, long)}
     * records them but through a data point looked up once: a caller that keeps it allocates nothing per request.
     */
    public java.util.function.LongConsumer requests(String op) {
        DistributionDataPoint point = requestSeconds.labelValues(op);
        return nanos -> point.observe(nanos / 1e9);
    }

    /** Every metric in the Prometheus text format (version 0.0.4), as a scrape of {@code /metrics} answers. */
    public String scrape() {
        ByteArrayOutputStream out = new ByteArrayOutputStream(8192);
        try {
            PrometheusTextFormatWriter.create().write(out, registry.scrape());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toString(java.nio.charset.StandardCharsets.UTF_8);
    }
}
