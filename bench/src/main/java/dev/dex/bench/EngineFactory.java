package dev.dex.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentSkipListMap;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.engine.IndexEngine;
import dev.dex.core.offload.LocalOffloadChannel;
import dev.dex.core.offload.MessageOffloadChannel;
import dev.dex.core.offload.OffloadMessageHandler;
import dev.dex.core.offload.OffloadChannel;
import dev.dex.core.partition.PartitionedEngine;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.Partitioning;
import dev.dex.core.tree.BaselineTree;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.FaultInjectingRemoteMemory;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.tcp.TcpSettings;
import me.tongfei.progressbar.ProgressBar;

/**
 * Builds the engines of a run. For the fabric modes: a {@link LocalFabric} with one region per memory node
 * (or, with {@code --fabric tcp}, a memory-side {@link TcpFabric} serving them over loopback and a compute-side
 * one reaching them by their endpoints), the tree bulk-loaded through a connection of its own, then one engine
 * per compute node, each on its own {@code connect(...)} (so each counts its own verbs). For {@code skiplist}: one map, loaded with the same
 * entries, shared by one adapter per compute node.
 *
 * <p>With {@code --inject-faults} each engine's connection goes through a {@link FaultInjectingRemoteMemory}, switched
 * off until the workers start; the bulk load, the initial acquires and the end-of-run checks have connections of
 * their own, without faults.
 *
 * <p>Region sizing: bulk load keeps every level-M subtree (M = 3, about 5 million keys) on one memory node,
 * and the inserts of a run may all land in one subtree, so every memory node is sized for the whole run:
 * 3x the bulk-loaded tree, {@value #BYTES_PER_INSERT} bytes per insert the run may do (a leaf split per
 * ~30 inserts costs about 35), two chunks per connection for partly used chunks, and
 * {@value #SLACK_MIB} MiB.
 */
final class EngineFactory {
    static final int BYTES_PER_INSERT = 64;
    static final int SLACK_MIB = 16;
    static final int SMALL_CHUNK = 64 << 10;
    static final int LARGE_CHUNK = 1 << 20;
    /** Trees from this size on use {@link #LARGE_CHUNK}s. */
    static final long LARGE_TREE_BYTES = 16L << 20;
    private static final int LOAD_PROGRESS_STEP = 4096;

    /** Builds one compute node's engine in a DEX mode. */
    @FunctionalInterface
    interface PartitionedEngineOpener {
        /**
         * @param memory     the compute node's own connection to every memory node
         * @param partitions the logical partitions of the key space
         * @param cacheBytes the compute node's cache size
         */
        PartitionedEngine open(RemoteMemory memory, PartitionTable partitions, long cacheBytes, OffloadChannel channel);
    }

    private EngineFactory() {
    }

    /**
     * The engines for {@code config}, with the tree loaded (and, for the DEX engine modes, the partition
     * table stored in the superblock).
     */
    static EngineCluster create(BenchSettings config, KeySpace keySpace, Progress progress) {
        return switch (config.mode()) {
            case SKIPLIST -> skipList(config, keySpace, progress);
            case BASELINE -> onFabric(config, keySpace, progress, null);
            case PARTITIONED, SHERMAN, DEX, OFFLOAD_ONLY, NO_OFFLOAD ->
                    onFabric(config, keySpace, progress, partitionedEngineOpener(config.mode(), config.redoLog(),
                            config.leafAdmission()));
        };
    }

    /** What opens one compute node's engine in {@code mode}, a DEX engine mode, admitting leaves with P_A {@code leafAdmission}. */
    static PartitionedEngineOpener partitionedEngineOpener(Mode mode, boolean redoLog, double leafAdmission) {
        return (memory, table, cacheBytes, channel) -> DexEngine.open(memory, switch (mode) {
            case DEX, OFFLOAD_ONLY, NO_OFFLOAD -> DexEngineSettings.withCache(mode.engine(), cacheBytes).withLeafAdmission(leafAdmission);
            case SHERMAN -> DexEngineSettings.sherman(cacheBytes);
            case PARTITIONED -> DexEngineSettings.partitioned();
            default -> throw new IllegalArgumentException("not a DEX engine mode: " + mode);
        }, channel, redoLog ? RedoLogSettings.ON : RedoLogSettings.OFF);
    }

    /**
     * Partition bounds at leaf fences (every leaf owned, as the paper chooses them), or equal width over the
     * loaded keys when the tree has fewer leaves than partitions.
     */
    static PartitionTable partitionTable(RemoteMemory loader, BenchSettings config, KeySpace keySpace) {
        try {
            return Partitioning.fromLeafFences(loader, config.partitions());
        } catch (IllegalArgumentException tooFewLeaves) {
            return PartitionTable.equalWidth(config.partitions(), keySpace.minKey(), keySpace.maxKey());
        }
    }

    private static EngineCluster onFabric(BenchSettings config, KeySpace keySpace, Progress progress,
                                          PartitionedEngineOpener opener) {
        KeyFormat keyFormat = KeyFormat.of(config.keyBytes());
        long estimate = estimatedTreeBytes(config.keys(), keyFormat);
        int chunk = estimate >= LARGE_TREE_BYTES ? LARGE_CHUNK : SMALL_CHUNK;
        long region = regionLength(config, estimate, chunk);
        List<IndexEngine> engines = new ArrayList<>();
        List<AutoCloseable> resources = new ArrayList<>();
        boolean tcp = config.fabric().equals("tcp");
        // Over tcp the memory side and the compute side have event loops of their own, as on two hosts.
        // The memory side's event loops are its memory-side threads: they run offloaded operations too.
        Fabric memorySide = tcp ? new TcpFabric(TcpSettings.DEFAULTS.withIoThreads(config.memoryThreads()),
                dev.dex.rdma.tcp.ReplicaSettings.DEFAULTS.withCopyRate(config.copyRate()).withFailoverWait(java.time.Duration.ZERO), 0,
                null, null) : new LocalFabric(config.latencyNs(), dev.dex.rdma.Region.DEFAULT_SEGMENT_SHIFT, config.replicas());
        Fabric computeSide = tcp ? new TcpFabric(TcpSettings.DEFAULTS, config.latencyNs()) : memorySide;
        try {
            Map<Integer, String> servers = new TreeMap<>();
            List<ExportedRegion> exported = new ArrayList<>();
            for (int id = 0; id < config.memoryNodes(); id++) {
                ExportedRegion memoryNode = export(memorySide, id, region, chunk);
                exported.add(memoryNode);
                servers.put(id, memoryNode.endpoint());
            }
            // On local a fabric of replicas holds every server's backups itself, written by the compute side.
            ReplicaCopy copy = config.replicas() > 1 && tcp ? replicate((TcpFabric) memorySide, exported, config, region, chunk) : null;
            List<TcpFabric> backups = copy == null ? List.of() : copy.backups();
            BulkLoader.Result loaded;
            PartitionTable table = null;
            try (RemoteMemory loader = computeSide.connect(servers); ProgressBar bar = progress.start("load", config.keys())) {
                loaded = BulkLoader.formatAndLoad(loader, TreeSettings.defaults().withKeyBytes(config.keyBytes()),
                        new BenchKeys(config.keyBytes()).entries(keySpace.entries()), bar::stepTo);
                if (opener != null) {
                    table = partitionTable(loader, config, keySpace);
                    PartitionTable.store(loader, table);
                }
            }
            long treeBytes = (loaded.leaves() + loaded.innerNodes()) * NodeHeaderDescriptor.NODE_LENGTH;
            List<PartitionedEngine> partitioned = new ArrayList<>();
            OffloadChannel channel = null;
            if (opener != null && config.mode().offloads() && tcp) {
                for (ExportedRegion memoryNode : exported) {
                    ((TcpFabric) memorySide).handleMessages(memoryNode.serverId(),
                            new OffloadMessageHandler(memoryNode.serverId(), memoryNode.region(), memoryNode.memorySideWrites()));
                }
                RemoteMemory messages = computeSide.connect(servers);
                resources.add(messages);
                channel = new MessageOffloadChannel((MessageSender) messages);
            } else if (opener != null && config.mode().offloads()) {
                channel = new LocalOffloadChannel(exported, config.memoryThreads(),
                        LocalOffloadChannel.DEFAULT_QUEUE_CAPACITY, config.latencyNs());
            }
            List<FaultInjectingRemoteMemory> injectors = new ArrayList<>();
            // Each compute node draws its own faults, from a seed of its own derived from --seed.
            SplittableRandom faultSeeds = new SplittableRandom(~config.seed());
            for (int c = 0; c < config.computeNodes(); c++) {
                RemoteMemory memory = computeSide.connect(servers);
                resources.add(memory);
                if (config.faults() != null) {
                    FaultInjectingRemoteMemory injector = new FaultInjectingRemoteMemory(memory,
                            config.faults().withSeed(faultSeeds.nextLong()));
                    injector.enabled(false);
                    injectors.add(injector);
                    memory = injector;
                }
                if (opener == null) {
                    engines.add(BaselineTree.open(memory));
                } else {
                    PartitionedEngine engine = opener.open(memory, table, config.cacheBytesFor(treeBytes), channel);
                    engines.add(engine);
                    partitioned.add(engine);
                }
            }
            if (!partitioned.isEmpty()) {
                OwnerRouter.assign(partitioned);
            }
            if (channel != null) {
                resources.add(channel);
            }
            if (computeSide != memorySide) {
                resources.add(computeSide);
            }
            resources.add(memorySide);
            resources.addAll(backups); // after their primaries, which would otherwise wait for them
            EngineCluster cluster = new EngineCluster(engines, treeBytes, resources, injectors, () -> computeSide.connect(servers));
            if (copy != null && config.copyUnderLoad()) {
                cluster.copyUnderLoad(copy);
            }
            return cluster;
        } catch (RuntimeException | Error e) {
            closeQuietly(engines, e);
            closeQuietly(resources, e);
            computeSide.close();
            memorySide.close();
            throw e;
        }
    }

    /**
     * A reader of the tree that took no part in the run, over {@code memory}: for the DEX modes a new engine (without
     * offloading) that acquires every partition, which replays what their redo logs hold; else the baseline tree.
     */
    static IndexEngine openReader(BenchSettings config, RemoteMemory memory, long cacheBytes) {
        if (!config.mode().partitioned()) {
            return BaselineTree.open(memory);
        }
        PartitionedEngine reader = partitionedEngineOpener(Mode.NO_OFFLOAD, config.redoLog(), config.leafAdmission())
                .open(memory, null, cacheBytes, null);
        try {
            for (int p = 0; p < reader.partitions().count(); p++) {
                reader.acquire(p);
            }
        } catch (RuntimeException | Error e) {
            reader.close();
            throw e;
        }
        return reader;
    }

    /**
     * Gives each memory server {@code replicas - 1} backups, each in a fabric of its own (its own event loops, as on
     * another host); unless the copy is to run under load, makes the exported regions their primaries and returns once
     * every backup's copy is complete.
     */
    private static ReplicaCopy replicate(TcpFabric primaries, List<ExportedRegion> exported, BenchSettings config, long region,
                                         int chunk) {
        List<TcpFabric> backups = new ArrayList<>();
        for (int b = 1; b < config.replicas(); b++) {
            backups.add(new TcpFabric(TcpSettings.DEFAULTS.withIoThreads(config.memoryThreads()), 0));
        }
        try {
            ReplicaCopy copy = new ReplicaCopy(primaries, exported, backups, region, chunk);
            if (!config.copyUnderLoad()) {
                copy.start();
                copy.await(10);
            }
            return copy;
        } catch (RuntimeException e) {
            backups.forEach(TcpFabric::close);
            throw e;
        }
    }

    private static ExportedRegion export(Fabric fabric, int id, long region, int chunk) {
        try {
            return fabric.export(id, region, chunk);
        } catch (OutOfMemoryError e) {
            throw new IllegalStateException(String.format(
                    "not enough direct memory for memory node %d's region of %,d MiB; raise the JVM's limit, e.g."
                            + " DEX_JAVA_OPTS=-XX:MaxDirectMemorySize=8g", id, region >> 20), e);
        }
    }

    private static EngineCluster skipList(BenchSettings config, KeySpace keySpace, Progress progress) {
        ConcurrentSkipListMap<Long, Long> map = new ConcurrentSkipListMap<>();
        try (ProgressBar bar = progress.start("load", config.keys())) {
            SortedEntries entries = keySpace.entries();
            long loaded = 0;
            while (entries.next()) {
                map.put(entries.key(), entries.value());
                if (++loaded % LOAD_PROGRESS_STEP == 0) {
                    bar.stepTo(loaded);
                }
            }
            bar.stepTo(loaded);
        }
        List<IndexEngine> engines = new ArrayList<>();
        for (int c = 0; c < config.computeNodes(); c++) {
            engines.add(new SkipListEngine(map));
        }
        return new EngineCluster(engines, estimatedTreeBytes(config.keys(), KeyFormat.EIGHT), List.of());
    }

    /** Bytes of the tree {@link BulkLoader} builds from {@code keys} entries with the default fill factor. */
    static long estimatedTreeBytes(long keys) {
        return estimatedTreeBytes(keys, KeyFormat.EIGHT);
    }

    /** As above, for keys in {@code format}. */
    static long estimatedTreeBytes(long keys, KeyFormat format) {
        double fill = TreeSettings.DEFAULT_BULK_FILL_FACTOR;
        long leafFill = Math.max(1, (long) Math.floor(format.leafCapacity() * fill));
        long fanOut = Math.max(2, (long) Math.floor((format.innerCapacity() + 1) * fill));
        long level = Math.max(1, ceilDiv(keys, leafFill));
        long nodes = level;
        while (level > 1) {
            level = ceilDiv(level, fanOut);
            nodes += level;
        }
        return nodes * NodeHeaderDescriptor.NODE_LENGTH;
    }

    /** Bytes of each memory node's region (see the class comment), a multiple of {@code chunk}. */
    static long regionLength(BenchSettings config, long treeBytes, int chunk) {
        long inserts = (long) Math.ceil((config.warmup() + config.ops()) * config.workload().percent(Op.INSERT) / 100.0);
        long connections = config.computeNodes() + 1L;
        long bytes = 3 * treeBytes + inserts * BYTES_PER_INSERT + 2 * connections * chunk + ((long) SLACK_MIB << 20);
        if (config.redoLog()) {
            // Partition p's log lives on memory node p mod M, and the log directory takes a chunk of node 0.
            long logs = ceilDiv(config.partitions(), config.memoryNodes());
            bytes += logs * ceilDiv(RedoLogSettings.DEFAULT_BYTES, chunk) * chunk + chunk;
        }
        return ceilDiv(bytes, chunk) * chunk;
    }

    private static long ceilDiv(long a, long b) {
        return -Math.floorDiv(-a, b);
    }

    private static void closeQuietly(List<? extends AutoCloseable> closeables, Throwable failure) {
        for (AutoCloseable c : closeables) {
            try {
                c.close();
            } catch (Exception e) {
                failure.addSuppressed(e);
            }
        }
    }
}
