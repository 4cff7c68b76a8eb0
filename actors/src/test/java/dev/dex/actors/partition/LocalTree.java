package dev.dex.actors.partition;

import java.util.TreeMap;
import java.util.UUID;

import dev.dex.actors.node.Fabrics;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.Partitioning;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;

/**
 * What a compute node's partition entities run on, without a cluster: a JVM-wide local fabric (as
 * {@link Fabrics} opens it) with memory server 0 exported, a tree and its partition table stored there the
 * way {@link dev.dex.actors.node.MemoryNode} and bulk load do it, one DEX engine that admits every owned leaf it reads (so
 * writes stay dirty in its cache until a release), and the engine's workers. Closes what it made.
 */
public final class LocalTree implements AutoCloseable {
    /** Enough frames for every node of the trees these tests build: nothing is evicted before a release. */
    private static final long CACHE_BYTES = 8L << 20;

    public final String fabricName = "entity-test-" + UUID.randomUUID();
    public final Fabric fabric = Fabrics.open(new Fabrics.Spec("local", fabricName, null, 0));
    public final RemoteMemory admin;
    public final PartitionTable table;
    private final RemoteMemory engineMemory;
    public final DexEngine engine;
    public final EngineWorkers workers;

    private LocalTree(long regionBytes, int chunkBytes, int workerThreads, Loader loader) {
        this(regionBytes, chunkBytes, workerThreads, loader, dev.dex.core.log.RedoLogSettings.OFF);
    }

    private LocalTree(long regionBytes, int chunkBytes, int workerThreads, Loader loader, dev.dex.core.log.RedoLogSettings log) {
        this(regionBytes, chunkBytes, workerThreads, loader, log, java.util.function.UnaryOperator.identity(), true);
    }

    private LocalTree(long regionBytes, int chunkBytes, int workerThreads, Loader loader, dev.dex.core.log.RedoLogSettings log,
                      java.util.function.UnaryOperator<RemoteMemory> wrap, boolean warmOnAcquire) {
        fabric.export(0, regionBytes, chunkBytes);
        admin = fabric.connect(0);
        table = loader.load(admin);
        engineMemory = wrap.apply(fabric.connect(0));
        engine = DexEngine.open(engineMemory, DexEngineSettings.withCache("no-offload", CACHE_BYTES).withLeafAdmission(1.0), null, log);
        workers = new EngineWorkers(engine, workerThreads, fabricName, dev.dex.actors.PartitionLoad.DEFAULT_WINDOW, warmOnAcquire);
    }

    private interface Loader {
        PartitionTable load(RemoteMemory memory);
    }

    /**
     * A 16 MiB region bulk-loaded with keys 2, 4, ..., 2n (value = key + 1) and {@code partitions}
     * partitions bounded at leaf fences, so every leaf is owned by one partition.
     */
    public static LocalTree bulkLoaded(int n, int partitions, int workerThreads) {
        return new LocalTree(16L << 20, 64 << 10, workerThreads, bulkLoader(n, partitions));
    }

    /**
     * {@link #bulkLoaded} with the engine's connection wrapped by {@code wrap} (a test's fault injector), and workers that
     * warm a partition they acquire or not ({@code dex.compute.warm-on-acquire}).
     */
    public static LocalTree bulkLoaded(int n, int partitions, int workerThreads, java.util.function.UnaryOperator<RemoteMemory> wrap,
                                       boolean warmOnAcquire) {
        return new LocalTree(16L << 20, 64 << 10, workerThreads, bulkLoader(n, partitions), dev.dex.core.log.RedoLogSettings.OFF,
                wrap, warmOnAcquire);
    }

    /** {@link #bulkLoaded} with an engine that logs its writes (a 64 MiB region: room for the logs). */
    public static LocalTree bulkLoadedWithRedoLog(int n, int partitions, int workerThreads) {
        return new LocalTree(64L << 20, 64 << 10, workerThreads, bulkLoader(n, partitions), dev.dex.core.log.RedoLogSettings.ON);
    }

    private static Loader bulkLoader(int n, int partitions) {
        return memory -> {
            long[] keys = new long[n];
            long[] values = new long[n];
            for (int i = 0; i < n; i++) {
                keys[i] = 2L * i + 2;
                values[i] = keys[i] + 1;
            }
            BulkLoader.formatAndLoad(memory, TreeSettings.defaults(), SortedEntries.of(keys, values), loaded -> { });
            PartitionTable table = Partitioning.fromLeafFences(memory, partitions);
            PartitionTable.store(memory, table);
            return table;
        };
    }

    /** An empty tree with one partition in a region of {@code chunks} chunks of 4 KiB (chunk 0 is the header). */
    public static LocalTree emptyInChunks(int chunks, int workerThreads) {
        return new LocalTree(chunks * 4096L, 4096, workerThreads, memory -> {
            Superblock.format(memory, TreeSettings.defaults());
            PartitionTable table = PartitionTable.ofUpperBounds();
            PartitionTable.store(memory, table);
            return table;
        });
    }

    /** The bulk-loaded entries of {@link #bulkLoaded}. */
    public static TreeMap<Long, Long> loadedModel(int n) {
        TreeMap<Long, Long> model = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            model.put(2L * i + 2, 2L * i + 3);
        }
        return model;
    }

    /** What remote memory holds, after checking the tree's invariants; the engine's cache is not consulted. */
    public TreeMap<Long, Long> remoteEntries() {
        TreeMap<Long, Long> stored = new TreeMap<>();
        TreeValidator.validate(admin, stored::put);
        return stored;
    }

    /** Dirty frames in the engine's cache. */
    public long dirtyFrames() {
        return engine.frameCounts()[3];
    }

    @Override
    public void close() {
        workers.close();
        engineMemory.close();
        admin.close();
        Fabrics.closeLocal(fabricName);
    }
}
