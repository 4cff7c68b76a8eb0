package dev.dex.core.cache;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import dev.dex.core.node.WideKeys;
import dev.dex.core.offload.LocalOffloadChannel;
import dev.dex.core.offload.MessageOffloadChannel;
import dev.dex.core.offload.OffloadChannel;
import dev.dex.core.offload.OffloadMessageHandler;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.Partitioning;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.tcp.TcpSettings;

/**
 * A memory pool with a bulk-loaded tree (keys 2, 4, ..., 2n; value = key + 1), a partition table, and
 * C engines over it, engine {@code p % C} holding partition p. Closes everything it made.
 */
final class DexFixture implements AutoCloseable {
    /** The compute side's fabric: engines and the admin connection connect through it. */
    final Fabric fabric;
    /** The memory side's fabric: the same object, except over tcp. */
    private final Fabric memorySide;
    private final Map<Integer, String> endpoints = new TreeMap<>();
    /** Over tcp: offloads go as messages on a connection of their own. */
    private RemoteMemory messages;
    final List<ExportedRegion> regions = new ArrayList<>();
    final RemoteMemory admin;
    LocalOffloadChannel channel;
    /** Wraps the offload channel the engines get (a test's hook); set before {@link #open}. */
    java.util.function.UnaryOperator<OffloadChannel> offloadWrapper = java.util.function.UnaryOperator.identity();
    final List<DexEngine> engines = new ArrayList<>();
    /** Wraps each engine's connection (a test's fault injector); set before {@link #open}. */
    java.util.function.UnaryOperator<RemoteMemory> connectionWrapper = java.util.function.UnaryOperator.identity();
    /** The redo log settings engines open with; set before {@link #open}. */
    dev.dex.core.log.RedoLogSettings redoLog = dev.dex.core.log.RedoLogSettings.OFF;
    final PartitionTable table;
    final int loaded;
    /** The keys' width, and how the tests' long keys become keys of it. */
    final WideKeys wide;

    /**
     * @param leafFences partition bounds from the leaves' fences (all leaves owned) or equal width
     *                   (leaves straddling a bound are shared)
     */
    DexFixture(int servers, int subtreeLevel, int loaded, int partitions, boolean leafFences, long latencyNs) {
        this(servers, subtreeLevel, loaded, partitions, leafFences, latencyNs, TreeSettings.DEFAULT_BULK_FILL_FACTOR);
    }

    /** As above, with bulk load filling nodes to {@code fill} (1.0: every leaf full, so inserts split). */
    DexFixture(int servers, int subtreeLevel, int loaded, int partitions, boolean leafFences, long latencyNs, double fill) {
        this(servers, subtreeLevel, loaded, partitions, leafFences, latencyNs, fill, false);
    }

    /**
     * As above; {@code overTcp}: the memory servers serve their regions over loopback TCP from a fabric object of
     * their own, engines reach them by endpoint, and offloads travel as messages on those connections.
     */
    DexFixture(int servers, int subtreeLevel, int loaded, int partitions, boolean leafFences, long latencyNs, double fill,
               boolean overTcp) {
        this(servers, subtreeLevel, loaded, partitions, leafFences, latencyNs, fill, overTcp, 8);
    }

    /** As above, with keys {@code keyBytes} wide ({@link WideKeys}: the tests' long keys keep their order). */
    DexFixture(int servers, int subtreeLevel, int loaded, int partitions, boolean leafFences, long latencyNs, double fill,
               boolean overTcp, int keyBytes) {
        this.wide = new WideKeys(keyBytes);
        this.memorySide = overTcp ? new TcpFabric() : new LocalFabric(latencyNs);
        this.fabric = overTcp ? new TcpFabric(TcpSettings.DEFAULTS, latencyNs) : memorySide;
        for (int i = 0; i < servers; i++) {
            ExportedRegion region = memorySide.export(i, 64L << 20, 64 << 10);
            regions.add(region);
            endpoints.put(i, region.endpoint());
        }
        this.admin = fabric.connect(endpoints);
        this.loaded = loaded;
        long[] keys = new long[loaded];
        long[] values = new long[loaded];
        for (int i = 0; i < loaded; i++) {
            keys[i] = 2L * i + 2;
            values[i] = keys[i] + 1;
        }
        BulkLoader.formatAndLoad(admin, new TreeSettings(subtreeLevel, fill).withKeyBytes(keyBytes), wide.entries(keys, values), n -> { });
        this.table = leafFences ? Partitioning.fromLeafFences(admin, partitions)
                : PartitionTable.equalWidth(partitions, 0, wide.firstWord(2L * loaded + 2));
        PartitionTable.store(admin, table);
    }

    /** Opens C engines, each on its own connection, holding partitions round robin. */
    List<DexEngine> open(int count, DexEngineSettings config) {
        return open(count, config, 0);
    }

    /** As {@link #open(int, DexEngineSettings)}, offloading to {@code offloadThreads} threads per memory server (0: none). */
    List<DexEngine> open(int count, DexEngineSettings config, int offloadThreads) {
        OffloadChannel offloads = null;
        if (offloadThreads > 0 && memorySide instanceof TcpFabric tcp) {
            for (ExportedRegion region : regions) {
                tcp.handleMessages(region.serverId(), new OffloadMessageHandler(region.serverId(), region.region()));
            }
            messages = fabric.connect(endpoints);
            offloads = new MessageOffloadChannel((MessageSender) messages);
        } else if (offloadThreads > 0) {
            channel = new LocalOffloadChannel(regions, offloadThreads, 64, 0);
            offloads = channel;
        }
        if (offloads != null) {
            offloads = offloadWrapper.apply(offloads);
        }
        for (int c = 0; c < count; c++) {
            engines.add(DexEngine.open(connectionWrapper.apply(fabric.connect(endpoints)), config, offloads, redoLog));
        }
        for (int p = 0; p < table.count(); p++) {
            engines.get(p % count).acquire(p);
        }
        return engines;
    }

    /**
     * One more engine on a connection of its own, holding nothing yet, offloading through {@code offloads} (the
     * channel {@link #open} made, for instance); closed with the others.
     */
    DexEngine openEngine(DexEngineSettings config, OffloadChannel offloads) {
        DexEngine engine = DexEngine.open(connectionWrapper.apply(fabric.connect(endpoints)), config, offloads, redoLog);
        engines.add(engine);
        return engine;
    }

    /** The loaded entries. */
    TreeMap<Long, Long> initialModel() {
        TreeMap<Long, Long> model = new TreeMap<>();
        for (int i = 0; i < loaded; i++) {
            model.put(2L * i + 2, 2L * i + 3);
        }
        return model;
    }

    /** Validates every engine's cache, flushes them all, then validates the remote tree and its free leaves, and returns it. */
    TreeMap<Long, Long> validateFlushAndRead() {
        engines.forEach(CacheValidator::validate);
        engines.forEach(DexEngine::close);
        engines.forEach(CacheValidator::validate);
        for (DexEngine engine : engines) {
            if (engine.dirtyFrames.get() != 0) {
                throw new AssertionError("dirty frames left after close: " + engine.dirtyFrames.get());
            }
        }
        TreeMap<Long, Long> stored = new TreeMap<>();
        TreeValidator.validateWords(admin, (key, value) -> stored.put(wide.fromWords(key, 0), value));
        FreeLeaves.validate(admin); // every free leaf dead, unreachable, on one chain
        return stored;
    }

    /** The partition of the test key {@code n}. */
    int partitionOf(long n) {
        return table.partitionOf(wide.firstWord(n));
    }

    @Override
    public void close() {
        if (channel != null) {
            channel.close();
        }
        if (messages != null) {
            messages.close();
        }
        fabric.close();
        memorySide.close();
    }
}
