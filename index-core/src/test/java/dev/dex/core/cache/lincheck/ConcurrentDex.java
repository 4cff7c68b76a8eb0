package dev.dex.core.cache.lincheck;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.agrona.concurrent.UnsafeBuffer;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.Validate;

import dev.dex.core.cache.CacheStats;
import dev.dex.core.cache.CacheValidator;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.cache.DexSession;
import dev.dex.core.cache.FrameHeaderDescriptor;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.offload.LocalOffloadChannel;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.core.partition.PartitionTable;

/**
 * Lincheck's view of two DEX engines: a fresh pool of two memory servers per invocation, bulk loaded with
 * full nodes after a {@link PartitionedKeyLayout}, its partition table stored in the superblock, and two
 * {@link DexEngine}s opened over two separate clients, as two compute nodes would, each holding the
 * partitions the layout gives it and each with a cache of a few frames, so that cooling, eviction and
 * write-back run during the operations. Every operation goes to the engine holding its key's partition,
 * through the calling thread's own session on that engine.
 *
 * <p>With memory-side offload threads, each invocation also starts a {@link LocalOffloadChannel} over the
 * pool's exported regions, which both engines offload through, and tells for each operation what its
 * offload came to ({@link CountingOffloadChannel}).
 *
 * <p>Lincheck has no per-invocation teardown: {@link #validateEngines} closes the engines and then the
 * offload channel, which stops its memory-side threads; each pool (at least 0.5 MiB off-heap) is left to
 * the garbage collector.
 *
 * <pre>
 * Concurrency: a thread's sessions are created on its first operation (computeIfAbsent, then filled per
 * engine by that thread alone); everything else a thread touches is its own session. The in-flight and
 * started counters only classify operations as overlapping others, and the offload outcomes are only
 * counted, for the statistics; they order nothing.
 * </pre>
 */
@Param(name = "key", gen = IntGen.class, conf = "1:" + PartitionedKeyLayout.TEST_KEYS)
@Param(name = "value", gen = IntGen.class, conf = "1:" + PartitionedKeyLayout.MAX_TEST_VALUE)
public abstract class ConcurrentDex {
    static final int SERVERS = 2;
    private static final long MIN_REGION_LENGTH = 256 << 10;
    private static final int CHUNK_LENGTH = 16 << 10;
    private static final double COOLING_RATIO = 0.1;

    private final PartitionedKeyLayout layout;
    /** Each test key's tree key as words (read-only; sessions copy a key before they use it). */
    private final long[][] words = new long[PartitionedKeyLayout.TEST_KEYS + 1][];
    private final RunStatistics statistics;
    private final RemoteMemory observer;
    private final LeafReloadCounter[] connections = new LeafReloadCounter[PartitionedKeyLayout.ENGINES];
    private final DexEngine[] engines = new DexEngine[PartitionedKeyLayout.ENGINES];
    private final Map<Thread, DexSession[]> sessions = new ConcurrentHashMap<>();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicLong started = new AtomicLong();
    private final LocalOffloadChannel localChannel;
    private final CountingOffloadChannel channel;
    /** Per engine, operations per {@link CountingOffloadChannel.Outcome}. */
    private final AtomicLong[][] outcomes = new AtomicLong[PartitionedKeyLayout.ENGINES][CountingOffloadChannel.Outcome.values().length];
    private final AtomicLong offloadsWhileOverlapping = new AtomicLong();

    /** Engines that never offload. */
    ConcurrentDex(PartitionedKeyLayout layout, RunStatistics statistics, DexEngineSettings... configs) {
        this(layout, statistics, 0, configs);
    }

    /**
     * @param memoryThreads memory-side offload threads per memory server; 0 for engines without an offload
     *                      channel
     */
    ConcurrentDex(PartitionedKeyLayout layout, RunStatistics statistics, int memoryThreads, DexEngineSettings... configs) {
        if (configs.length != PartitionedKeyLayout.ENGINES) {
            throw new IllegalArgumentException(configs.length + " configurations for " + PartitionedKeyLayout.ENGINES + " engines");
        }
        this.layout = layout;
        for (int k = 1; k <= PartitionedKeyLayout.TEST_KEYS; k++) {
            words[k] = layout.words(k);
        }
        this.statistics = statistics;
        LocalFabric fabric = new LocalFabric();
        int[] servers = new int[SERVERS];
        List<ExportedRegion> regions = new ArrayList<>();
        for (int i = 0; i < SERVERS; i++) {
            servers[i] = i;
            regions.add(fabric.export(i, regionLength(layout), CHUNK_LENGTH));
        }
        observer = fabric.connect(servers);
        BulkLoader.Result loaded = BulkLoader.formatAndLoad(observer, layout.treeSettings(), layout.entries(), n -> { });
        if (loaded.height() != layout.height() || loaded.leaves() != layout.nodesPerLevel()[0]) {
            throw new IllegalStateException("bulk load built " + loaded + ", the layout expects "
                    + Arrays.toString(layout.nodesPerLevel()) + " nodes per level");
        }
        PartitionTable.store(observer, layout.partitions());
        localChannel = memoryThreads == 0 ? null
                : new LocalOffloadChannel(regions, memoryThreads, LocalOffloadChannel.DEFAULT_QUEUE_CAPACITY, 0);
        channel = localChannel == null ? null : new CountingOffloadChannel(localChannel);
        for (AtomicLong[] perEngine : outcomes) {
            Arrays.setAll(perEngine, o -> new AtomicLong());
        }
        for (int e = 0; e < engines.length; e++) {
            connections[e] = new LeafReloadCounter(fabric.connect(servers), layout, e);
            engines[e] = DexEngine.open(connections[e], configs[e], channel);
        }
        for (int p = 0; p < layout.partitions().count(); p++) {
            engines[layout.engineOfPartition(p)].acquire(p);
        }
    }

    /**
     * Room for the whole loaded tree on one server, chunk 0, and a chunk per engine for the nodes its splits
     * allocate; at least 256 KiB.
     */
    private static long regionLength(PartitionedKeyLayout layout) {
        long nodes = Arrays.stream(layout.nodesPerLevel()).sum();
        long chunks = (nodes * NodeHeaderDescriptor.NODE_LENGTH + CHUNK_LENGTH - 1) / CHUNK_LENGTH + 1 + PartitionedKeyLayout.ENGINES;
        return Math.max(MIN_REGION_LENGTH, chunks * CHUNK_LENGTH);
    }

    /** A cache of {@code frames} frames. */
    static DexEngineSettings dex(int frames, double leafAdmission) {
        return new DexEngineSettings("dex", (long) frames * FrameHeaderDescriptor.FRAME_LENGTH, COOLING_RATIO, leafAdmission);
    }

    /** The DEX cache of {@code frames} frames, offloading as {@code mode} says: {@code dex} or {@code offload-only}. */
    static DexEngineSettings withCache(String mode, int frames, double leafAdmission) {
        return new DexEngineSettings(mode, (long) frames * FrameHeaderDescriptor.FRAME_LENGTH, COOLING_RATIO, leafAdmission);
    }

    static DexEngineSettings sherman(int frames) {
        return new DexEngineSettings("sherman", (long) frames * FrameHeaderDescriptor.FRAME_LENGTH, COOLING_RATIO, 0);
    }

    static DexEngineSettings partitioned() {
        return new DexEngineSettings("partitioned", 0, COOLING_RATIO, 0);
    }

    @Operation
    public Long lookup(@Param(name = "key") int key) {
        return run(key, false, () -> lookupThrough(session(key), key));
    }

    @Operation
    public boolean insert(@Param(name = "key") int key, @Param(name = "value") int value) {
        return run(key, true, () -> session(key).insert(words[key], value));
    }

    @Operation
    public boolean update(@Param(name = "key") int key, @Param(name = "value") int value) {
        return run(key, false, () -> session(key).update(words[key], value));
    }

    @Operation
    public boolean put(@Param(name = "key") int key, @Param(name = "value") int value) {
        return run(key, true, () -> session(key).put(words[key], value));
    }

    @Operation
    public boolean delete(@Param(name = "key") int key) {
        return run(key, false, () -> session(key).delete(words[key]));
    }

    @Operation
    public String scan(@Param(name = "key") int key) {
        return run(key, false, () -> {
            int w = layout.format().words();
            long[] keyWords = new long[PartitionedKeyLayout.SCAN_LENGTH * w];
            long[] values = new long[PartitionedKeyLayout.SCAN_LENGTH];
            int n = session(key).scan(words[key], PartitionedKeyLayout.SCAN_LENGTH, keyWords, values);
            long[] keys = new long[n];
            for (int i = 0; i < n; i++) {
                keys[i] = firstWordOfLayoutKey(keyWords, i * w);
            }
            return layout.describe(keys, values, n);
        });
    }

    /**
     * After each invocation: both caches are valid; every test key is read through its engine; closing
     * the engines writes every dirty frame back; then the tree in remote memory is valid, every background
     * entry is intact, no key or value appears that no operation could have written, and every test key
     * holds what the engines returned just before closing. With an offload channel, each engine's offload
     * counters agree with the outcomes the channel saw, no request failed on the memory side, and the
     * channel is closed, after the engines, even when a check fails.
     */
    @Validate
    public void validateEngines() {
        try {
            if (channel != null) {
                checkAndRecordOffloads();
            }
            validateAndCloseEngines();
        } finally {
            if (localChannel != null) {
                localChannel.close();
            }
        }
    }

    /** Before the validation's own lookups, which may offload too. */
    private void checkAndRecordOffloads() {
        if (localChannel.failures() != 0) {
            throw new IllegalStateException(localChannel.failures() + " offload requests threw on the memory side");
        }
        for (int e = 0; e < engines.length; e++) {
            CacheStats stats = engines[e].stats();
            long[] counts = Arrays.stream(outcomes[e]).mapToLong(AtomicLong::get).toArray();
            long completed = counts[CountingOffloadChannel.Outcome.COMPLETED.ordinal()];
            long fallbacks = counts[CountingOffloadChannel.Outcome.NEEDS_SPLIT.ordinal()]
                    + counts[CountingOffloadChannel.Outcome.OTHER_FALLBACK.ordinal()];
            // A read answered OK either completed the lookup or fell back when the compute side validated it; a write
            // the exclusion refused was never sent.
            long reads = counts[CountingOffloadChannel.Outcome.READ_ANSWERED.ordinal()];
            long readFallbacks = stats.offloadFallbacks() - fallbacks - stats.offloadsExcluded();
            if (readFallbacks < 0 || readFallbacks > reads || stats.offloads() != completed + reads - readFallbacks) {
                throw new IllegalStateException("engine " + e + " counted " + stats.offloads() + " offloads and "
                        + stats.offloadFallbacks() + " fallbacks (" + stats.offloadsExcluded() + " writes excluded), its"
                        + " operations' requests show " + completed + " completed, " + fallbacks + " fallbacks and " + reads
                        + " answered reads");
            }
            statistics.recordOffloads(e, stats.offloads(), counts[CountingOffloadChannel.Outcome.NEEDS_SPLIT.ordinal()],
                    stats.offloadsExcluded() + readFallbacks, stats.offloadFallbacks());
        }
        statistics.recordOffloadsWhileOverlapping(offloadsWhileOverlapping.get());
    }

    private void validateAndCloseEngines() {
        boolean[] cooling = new boolean[engines.length];
        boolean[] reloaded = new boolean[engines.length];
        for (int e = 0; e < engines.length; e++) {
            CacheValidator.validate(engines[e]);
            cooling[e] = engines[e].frameCounts()[2] > 0;
            reloaded[e] = connections[e].reloads() > 0;
        }
        Long[] seen = new Long[PartitionedKeyLayout.TEST_KEYS + 1];
        for (int k = 1; k <= PartitionedKeyLayout.TEST_KEYS; k++) {
            seen[k] = lookupThrough(session(k), k);
        }
        for (int e = 0; e < engines.length; e++) {
            DexEngine engine = engines[e];
            CacheValidator.validate(engine);
            statistics.recordCache(e, reloaded[e], cooling[e], engine.frameCounts()[3] > 0);
            engine.close();
            CacheValidator.validate(engine);
            if (engine.frameCounts()[3] != 0) {
                throw new IllegalStateException(engine.frameCounts()[3] + " dirty frames left after close");
            }
        }
        Long[] stored = new Long[PartitionedKeyLayout.TEST_KEYS + 1];
        long[] background = new long[1];
        TreeValidator.Report report = TreeValidator.validateWords(observer, (keyWords, value) -> {
            long key = firstWordOfLayoutKey(keyWords, 0);
            int testKey = layout.testKeyOf(key);
            if (testKey != 0) {
                if ((value < 1 || value > PartitionedKeyLayout.MAX_TEST_VALUE) && value != PartitionedKeyLayout.initialValue(testKey)) {
                    throw new IllegalStateException("test key " + testKey + " holds " + value + ", which nobody wrote");
                }
                stored[testKey] = value;
            } else if (layout.isBackground(key) && value == PartitionedKeyLayout.backgroundValue(key)) {
                background[0]++;
            } else {
                throw new IllegalStateException("entry " + key + "=" + value + " was never written");
            }
        });
        if (background[0] != layout.backgroundCount()) {
            throw new IllegalStateException(background[0] + " of " + layout.backgroundCount() + " background entries are left");
        }
        for (int k = 1; k <= PartitionedKeyLayout.TEST_KEYS; k++) {
            if (!Objects.equals(seen[k], stored[k])) {
                throw new IllegalStateException("test key " + k + " read " + seen[k] + " through its engine before close, but remote memory holds "
                        + stored[k] + " after close");
            }
        }
        statistics.recordValidated(report, layout);
    }

    private Long lookupThrough(DexSession session, int key) {
        return session.lookup(words[key]) ? session.value() : null;
    }

    /** The layout's long key whose words are at {@code keyWords[offset..]}; words that are not a layout key's throw. */
    private long firstWordOfLayoutKey(long[] keyWords, int offset) {
        for (int w = 1; w < layout.format().words(); w++) {
            if (keyWords[offset + w] != PartitionedKeyLayout.FILLER) {
                throw new IllegalStateException("a key whose word " + w + " is " + Long.toHexString(keyWords[offset + w])
                        + ": never written");
            }
        }
        return keyWords[offset];
    }

    /** The calling thread's session on the engine holding test key {@code key}. */
    private DexSession session(int key) {
        int e = layout.engineOf(layout.key(key));
        DexSession[] mine = sessions.computeIfAbsent(Thread.currentThread(), thread -> new DexSession[engines.length]);
        if (mine[e] == null) {
            mine[e] = engines[e].newSession();
        }
        return mine[e];
    }

    /**
     * Runs one operation on test key {@code key}. For one that may split, records whether the root or a
     * child of the root split during it while another operation was in flight (the root pointer or the
     * root's version moved: the root spans partitions, so it is shared and every change to it is written
     * through). With an offload channel, counts what the operation's offload came to, and whether it was
     * completed by offloading while another operation was in flight.
     */
    private <T> T run(int key, boolean maySplit, Supplier<T> operation) {
        long startedBefore = started.getAndIncrement();
        boolean overlapped = inFlight.getAndIncrement() > 0;
        RootStamp before = maySplit ? rootStamp() : null;
        long mark = channel == null ? 0 : channel.mark();
        try {
            return operation.get();
        } finally {
            if (maySplit) {
                RootStamp after = rootStamp();
                overlapped |= started.get() != startedBefore + 1;
                if (overlapped && !after.equals(before)) {
                    statistics.recordSplitWhileOverlapping();
                }
            }
            if (channel != null) {
                CountingOffloadChannel.Outcome outcome = channel.outcomeSince(mark);
                outcomes[layout.engineOf(layout.key(key))][outcome.ordinal()].incrementAndGet();
                overlapped |= started.get() != startedBefore + 1;
                if (outcome == CountingOffloadChannel.Outcome.COMPLETED && overlapped) {
                    offloadsWhileOverlapping.incrementAndGet();
                }
            }
            inFlight.decrementAndGet();
        }
    }

    /** Where the root is and its version. A read torn by a concurrent split only makes that split show. */
    private RootStamp rootStamp() {
        long root = Superblock.read(observer).root();
        NodeView rootImage = new NodeView(layout.format()).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        observer.read(root, rootImage.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
        return new RootStamp(root, rootImage.version());
    }

    private record RootStamp(long address, long version) {
    }
}
