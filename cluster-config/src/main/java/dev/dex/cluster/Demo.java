package dev.dex.cluster;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.node.Fabrics;
import dev.dex.actors.node.MemoryNodes;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.Partitioning;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code dex demo}: a whole cluster in this JVM, as separate actor systems on loopback. One memory node
 * and two compute nodes; bulk load; a YCSB-style mix through the client actor; a third compute node joins
 * and partitions move to it (logical repartitioning); every key is checked for its last value.
 */
@Command(name = "demo", mixinStandardHelpOptions = true, usageHelpAutoWidth = true,
        description = "Run a DEX cluster in this JVM: load, serve a mix, scale out, verify.")
final class Demo implements Callable<Integer> {
    /** Seconds of the mix before the third compute node joins: the usual rate the scale-out is compared with. */
    static final int SECONDS_BEFORE_JOIN = 3;
    /** The longest the mix during the scale-out may run. */
    static final int SCALE_OUT_MAX_SECONDS = 150;

    /** Loaded keys are spaced so inserts could fall between them. */
    static final long KEY_SPACING = 16;

    @Option(names = "--keys", paramLabel = "N", converter = dev.dex.bench.CountConverter.class,
            description = "Keys to bulk-load, e.g. 1000000 or 1m (default: dex.demo.keys, 1000000).")
    Long keys;

    @Option(names = "--seconds", paramLabel = "S", description = "Seconds of the mix (default: dex.demo.seconds, 5).")
    Integer seconds;

    @Option(names = "--workload", paramLabel = "W",
            description = "read-only (100%% get), read-intensive (95/5 get/put), write-intensive (50/50) (default: dex.demo.workload).")
    String workload;

    @Option(names = "--cache-size", paramLabel = "SIZE",
            description = "Each compute node's cache (default: dex.demo.cache-size, 64MiB).")
    String cacheSize;

    @Option(names = "--partitions", paramLabel = "P", description = "Logical partitions (default: dex.tree.partitions, 64).")
    Integer partitionsOption;
    /** --partitions, or the setting. */
    private int partitions;

    @Option(names = "--compute-nodes", paramLabel = "C",
            description = "Compute nodes before the scale-out (default: dex.demo.compute-nodes, 2).")
    Integer computeNodesOption;
    /** --compute-nodes, or the setting. */
    int computeNodes;

    @Option(names = "--fabric", paramLabel = "TRANSPORT",
            description = "How the compute nodes reach the memory node: local (in this JVM's memory), tcp (over loopback "
                    + "TCP, as across hosts) or shm (/dev/shm) (default: dex.demo.fabric, local).")
    String fabric;

    @Option(names = "--timeline", paramLabel = "FILE",
            description = "After the join settles, the new compute node leaves again; write the throughput of every 100 ms"
                    + " of the scale-out and the leave to FILE (CSV) and a plot beside it (.png), as bin/dex reproduce does.")
    java.nio.file.Path timelineFile;
    /** Operations completed in each 100 ms of the mix during the scale-out (and the leave), when --timeline is given. */
    private java.util.concurrent.atomic.AtomicLongArray perTick;
    /** One line of reading of the timeline, once it is written. */
    String timelineReading;
    static final long TICK_NANOS = 100_000_000L;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write the mix's result to FILE as one JSON object.")
    java.nio.file.Path json;

    @Option(names = "--in-flight", paramLabel = "N", converter = dev.dex.bench.CountConverter.class,
            description = "Operations the mix keeps in flight through the client, e.g. 4k (default: dex.demo.in-flight).")
    Long inFlight;

    @Option(names = "--rate", paramLabel = "OPS", converter = dev.dex.bench.CountConverter.class,
            description = "Open loop: start operations at this many per second, latency counted from each one's scheduled"
                    + " start (default: 0, closed loop: a new operation as soon as one completes).")
    Long rate;

    @Option(names = "--warmup", paramLabel = "S",
            description = "Seconds of the mix run first and not measured, so the JIT has compiled the hot paths"
                    + " (default: dex.demo.warmup, 2).")
    Integer warmupOption;
    /** --warmup, or the setting. */
    int warmup;

    @Option(names = "--baseline", paramLabel = "on|off", defaultValue = "on",
            description = "bench --cluster: also run the engine alone on the same keys, workload, cache and partitions, and"
                    + " report the cluster's share of its throughput (default: ${DEFAULT-VALUE}).")
    String baseline;

    /** Set by {@code dex bench --cluster}: measure the mix only, without the scale-out and the check. */
    boolean benchOnly;

    private final PrintWriter out = new PrintWriter(System.out, true);
    private PartitionTable table;

    @Override
    public Integer call() throws Exception {
        String fabricName = "demo-" + UUID.randomUUID();
        Config defaults = DexNodes.config(ConfigFactory.empty());
        long n = keys != null ? keys : defaults.getLong("dex.demo.keys");
        computeNodes = computeNodesOption != null ? computeNodesOption : defaults.getInt("dex.demo.compute-nodes");
        warmup = warmupOption != null ? warmupOption : defaults.getInt("dex.demo.warmup");
        if (fabric == null) {
            fabric = defaults.getString("dex.demo.fabric");
        }
        if (cacheSize == null) {
            cacheSize = defaults.getString("dex.demo.cache-size");
        }
        if (n < 1000 || n > 50_000_000) {
            throw new IllegalArgumentException("--keys must be in [1000, 50000000]: " + n);
        }
        if (computeNodes < 1 || computeNodes > 16) {
            throw new IllegalArgumentException("--compute-nodes must be in [1, 16]: " + computeNodes);
        }
        if (json != null && (json.toAbsolutePath().getParent() == null || !java.nio.file.Files.isDirectory(json.toAbsolutePath().getParent()))) {
            throw new IllegalArgumentException("--json " + json + ": its directory does not exist");
        }
        if (inFlight != null && (inFlight < 1 || inFlight > 100_000)) {
            throw new IllegalArgumentException("--in-flight must be in [1, 100000]: " + inFlight);
        }
        if (rate != null && (rate < 0 || rate > 100_000_000)) {
            throw new IllegalArgumentException("--rate must be in [0, 100000000] operations per second: " + rate);
        }
        if (warmup < 0 || warmup > 600) {
            throw new IllegalArgumentException("--warmup must be in [0, 600] seconds: " + warmup);
        }
        if (!baseline.equals("on") && !baseline.equals("off")) {
            throw new IllegalArgumentException("--baseline must be on or off: " + baseline);
        }
        partitions = partitionsOption != null ? partitionsOption : defaults.getInt("dex.tree.partitions");
        if (partitions < 3 || partitions > PartitionTable.MAX_PARTITIONS) {
            throw new IllegalArgumentException("--partitions must be in [3, " + PartitionTable.MAX_PARTITIONS + "]: " + partitions);
        }
        Config overrides = ConfigFactory.empty()
                .withValue("dex.fabric.transport", ConfigValueFactory.fromAnyRef(fabric))
                .withValue("dex.fabric.local-name", ConfigValueFactory.fromAnyRef(fabricName))
                .withValue("dex.fabric.shm-directory", ConfigValueFactory.fromAnyRef("/dev/shm/" + fabricName))
                .withValue("dex.tree.partitions", ConfigValueFactory.fromAnyRef(partitions))
                .withValue("dex.tree.partition-key-min", ConfigValueFactory.fromAnyRef(1))
                .withValue("dex.tree.partition-key-max", ConfigValueFactory.fromAnyRef(n * KEY_SPACING))
                .withValue("dex.memory.region-size", ConfigValueFactory.fromAnyRef(regionMiB(n, partitions, defaults) + "MiB"))
                .withValue("dex.compute.cache-size", ConfigValueFactory.fromAnyRef(cacheSize));
        if (seconds != null) {
            overrides = overrides.withValue("dex.demo.seconds", ConfigValueFactory.fromAnyRef(seconds));
        }
        if (workload != null) {
            overrides = overrides.withValue("dex.demo.workload", ConfigValueFactory.fromAnyRef(workload));
        }
        if (inFlight != null) {
            overrides = overrides.withValue("dex.demo.in-flight", ConfigValueFactory.fromAnyRef(inFlight));
        }
        Config base = DexNodes.config(overrides);
        DexSettings settings = DexSettings.from(base);
        int putPercent = switch (settings.demoWorkload()) {
            case "read-only" -> 0;
            case "read-intensive" -> 5;
            case "write-intensive" -> 50;
            default -> throw new IllegalArgumentException("--workload must be read-only, read-intensive or write-intensive: "
                    + settings.demoWorkload());
        };
        List<ActorSystem<?>> systems = new ArrayList<>();
        try {
            return run(base, settings, n, putPercent, systems);
        } finally {
            try {
                leaveInOrder(systems);
            } finally {
                Fabrics.closeLocal(fabricName);
                deleteShmDirectory(java.nio.file.Path.of("/dev/shm/" + fabricName));
            }
        }
    }

    /**
     * Stops the cluster the way an operator would, so that a normal exit logs nothing alarming: the client
     * leaves first, then the compute nodes one by one (each hands its partitions off), then the memory node.
     * Each leaves gracefully (coordinated shutdown), so the others see it removed before its connections
     * close; a system that does not stop within 30 s is terminated.
     */
    private static void leaveInOrder(List<ActorSystem<?>> systems) throws Exception {
        List<ActorSystem<?>> clients = new ArrayList<>();
        List<ActorSystem<?>> computeNodes = new ArrayList<>();
        List<ActorSystem<?>> memoryNodes = new ArrayList<>();
        for (ActorSystem<?> system : systems) {
            var roles = Cluster.get(system).selfMember().getRoles();
            (roles.contains("memory") ? memoryNodes : roles.contains("compute") ? computeNodes : clients).add(system);
        }
        // Compute nodes youngest first: the oldest runs the sharding coordinator, which moves once, if at all.
        java.util.Collections.reverse(computeNodes);
        List<ActorSystem<?>> order = new ArrayList<>(clients);
        order.addAll(computeNodes);
        order.addAll(memoryNodes);
        for (ActorSystem<?> system : order) {
            if (!DexCli.leave(system)) {
                system.terminate();
                system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
            }
        }
    }

    /**
     * The memory node's region: the loaded tree (about 96 bytes a key, splits included), one redo log per
     * partition in whole 1 MiB chunks plus the log directory's chunk, and room for the chunks each compute
     * node allocates for its splits.
     */
    static long regionMiB(long keys, int partitions, Config defaults) {
        long chunk = defaults.getBytes("dex.memory.chunk-size");
        long logChunks = (defaults.getBytes("dex.compute.redo-log-size") + chunk - 1) / chunk;
        long logsMiB = (partitions * logChunks + 1) * chunk >> 20;
        return Math.max(64, (keys * 96 >> 20) + 1 + logsMiB + 16);
    }

    /** The demo's own shm directory: the memory node keeps its region file there when it stops; the demo does not. */
    private static void deleteShmDirectory(java.nio.file.Path directory) throws java.io.IOException {
        if (!java.nio.file.Files.isDirectory(directory)) {
            return;
        }
        try (var files = java.nio.file.Files.list(directory)) {
            for (java.nio.file.Path file : (Iterable<java.nio.file.Path>) files::iterator) {
                java.nio.file.Files.deleteIfExists(file);
            }
        }
        java.nio.file.Files.deleteIfExists(directory);
    }

    private int run(Config base, DexSettings settings, long n, int putPercent, List<ActorSystem<?>> systems) throws Exception {
        // The engine alone first, while no actor system of the cluster shares the cores or the memory.
        double engine = benchOnly && baseline.equals("on") ? engineBaseline(base, settings, n) : Double.NaN;
        out.printf("DEX on Pekko %s: 1 memory node, %d compute node(s) and a client, each its own actor system in this JVM;"
                + " fabric %s; %s%n", benchOnly ? "cluster bench" : "demo", computeNodes, settings.fabric().transport(),
                base.getBoolean("dex.security.tls") ? "mutual TLS between the nodes"
                        : "plain TCP on loopback (no TLS: for a cluster across hosts see docs/security.md)");
        ActorSystem<Void> memory = DexNodes.memoryNode(DexNodes.nodeConfig(base, "memory", "127.0.0.1", 0, List.of()), settings);
        systems.add(memory);
        List<String> seed = List.of(DexNodes.hostPort(memory));

        long loadStart = System.nanoTime();
        Fabric loaderFabric = Fabrics.open(settings.fabric());
        try (RemoteMemory loader = awaitFormatted(memory, loaderFabric)) {
            long[] loadedKeys = new long[1];
            SortedEntries entries = new SortedEntries() {
                private long i;

                @Override
                public boolean next() {
                    return ++i <= n;
                }

                @Override
                public long key() {
                    return i * KEY_SPACING;
                }

                @Override
                public long value() {
                    return i * KEY_SPACING + 1;
                }
            };
            try (ProgressBar bar = bar("load", n)) {
                BulkLoader.load(loader, 0.8, entries, loaded -> {
                    bar.stepTo(loaded);
                    loadedKeys[0] = loaded;
                });
            }
            table = Partitioning.fromLeafFences(loader, partitions);
            Superblock.writePartitions(loader, table);
        } finally {
            if (settings.fabric().perNode()) {
                loaderFabric.close();
            }
        }
        out.printf("bulk-loaded %,d keys in %.2f s; %d partitions at leaf fences%n", n, (System.nanoTime() - loadStart) / 1e9, partitions);

        for (int c = 0; c < computeNodes; c++) {
            systems.add(DexNodes.computeNode(DexNodes.nodeConfig(base, "compute", "127.0.0.1", 0, seed), settings));
        }
        ActorSystem<DexClient.Command> clientSystem = DexNodes.client(DexNodes.nodeConfig(base, "client", "127.0.0.1", 0, seed), settings);
        systems.add(clientSystem);
        awaitUp(systems, Duration.ofSeconds(60));
        awaitComputeNodes(clientSystem, computeNodes, Duration.ofSeconds(60));
        DexClientApi client = new DexClientApi(clientSystem, clientSystem, settings.requestTimeout());

        // Sharding spreads the partitions over the compute nodes in the first seconds; the mix measures the settled map.
        long settleStart = System.nanoTime();
        awaitRebalance(client, clientSystem, n, computeNodes, Duration.ofSeconds(90));
        out.printf("partitions settled on %d compute node(s) in %.2f s%n", computeNodes, (System.nanoTime() - settleStart) / 1e9);
        Map<Long, Long> written = new ConcurrentHashMap<>();
        if (warmup > 0) {
            out.printf("warming up for %d s (not measured)%n", warmup);
            mix(client, n, putPercent, warmup, settings.demoInFlight(), rate == null ? 0 : rate, written);
        }
        List<ComputeNode.Status> measuredFrom = DexCli.computeStatuses(clientSystem);
        Result mix = mix(client, n, putPercent, settings.demoSeconds(), settings.demoInFlight(), rate == null ? 0 : rate, written);
        List<ComputeNode.Status> after = DexCli.computeStatuses(clientSystem);
        report(mix, measuredFrom, after, settings, n, engine);
        if (benchOnly) {
            return 0;
        }

        out.println();
        out.println("partition map before scale-out:");
        printMap(after);
        out.printf("joining another compute node while the mix goes on (%d s before the join are the usual rate)...%n",
                SECONDS_BEFORE_JOIN);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicLongArray perSecond = new java.util.concurrent.atomic.AtomicLongArray(SCALE_OUT_MAX_SECONDS);
        if (timelineFile != null) {
            perTick = new java.util.concurrent.atomic.AtomicLongArray((int) (SCALE_OUT_MAX_SECONDS * (1_000_000_000L / TICK_NANOS)));
        }
        java.util.concurrent.FutureTask<Result> during = new java.util.concurrent.FutureTask<>(() -> mix(client, n, putPercent,
                SCALE_OUT_MAX_SECONDS, settings.demoInFlight(), 0, written, stop, perSecond, "mix during scale-out (s)"));
        Thread mixer = new Thread(during, "demo-mix-during-scale-out");
        mixer.setDaemon(true);
        long mixStart = System.nanoTime();
        mixer.start();
        Thread.sleep(TimeUnit.SECONDS.toMillis(SECONDS_BEFORE_JOIN));
        long joinStart = System.nanoTime();
        ActorSystem<Void> computeC = DexNodes.computeNode(DexNodes.nodeConfig(base, "compute", "127.0.0.1", 0, seed), settings);
        systems.add(computeC);
        awaitUp(systems, Duration.ofSeconds(60));
        List<ComputeNode.Status> settled = awaitRebalance(client, clientSystem, n, computeNodes + 1, Duration.ofSeconds(90));
        double settledAt = (System.nanoTime() - joinStart) / 1e9;
        Thread.sleep(1_500);
        double leaveAt = 0;
        double leftAt = 0;
        if (timelineFile != null) {
            out.println("the new compute node leaves again while the mix goes on...");
            long leaveStart = System.nanoTime();
            computeC.terminate();
            computeC.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
            awaitRebalance(client, clientSystem, n, computeNodes, Duration.ofSeconds(90));
            leaveAt = (leaveStart - mixStart) / 1e9;
            leftAt = (System.nanoTime() - mixStart) / 1e9;
            out.printf("partitions back on %d compute node(s) %.2f s after the leave%n", computeNodes, leftAt - leaveAt);
            Thread.sleep(1_500);
        }
        long stopAt = System.nanoTime();
        int wholeSeconds = (int) ((stopAt - mixStart) / 1_000_000_000L);
        stop.set(true);
        Result duringScaleOut;
        try {
            duringScaleOut = during.get(120, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            throw new IllegalStateException("the mix during the scale-out failed: " + e.getCause(), e.getCause());
        }
        out.printf("rebalance settled %.2f s after the join (each partition's handoff: see the 'handed off' lines)%n", settledAt);
        if (timelineFile != null) {
            writeTimeline((joinStart - mixStart) / 1e9, (joinStart - mixStart) / 1e9 + settledAt, leaveAt, leftAt,
                    (stopAt - mixStart) / 1e9);
        }
        reportScaleOut(perSecond, (joinStart - mixStart) / 1e9, (joinStart - mixStart) / 1e9 + settledAt, wholeSeconds);
        if (duringScaleOut.ops() == 0) {
            throw new IllegalStateException("no operation completed during the scale-out");
        }
        out.println("partition map after scale-out:");
        printMap(settled);

        long mismatches = verify(client, n, settings.demoInFlight(), written);
        if (mismatches == 0) {
            out.printf("verified: all %,d keys hold their last written value%n", n);
            return 0;
        }
        out.printf("FAILED: %,d keys do not hold their last written value%n", mismatches);
        return 1;
    }

    /** Waits until memory server 0 has formatted the tree, and returns a connection for the loader. */
    private static RemoteMemory awaitFormatted(ActorSystem<?> memoryNode, Fabric fabric) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Map<Integer, String> endpoints = MemoryNodes.endpoints(memoryNode, 1, Duration.ofSeconds(30));
        while (true) {
            try {
                RemoteMemory memory = fabric.connect(endpoints);
                try {
                    Superblock.readPartitions(memory);
                    return memory;
                } catch (IllegalStateException notYet) {
                    memory.close();
                }
            } catch (IllegalArgumentException notExported) {
                // the memory node has not exported its region yet
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("memory node 0 did not format the tree within 30 s");
            }
            Thread.sleep(20);
        }
    }

    private static void awaitUp(List<ActorSystem<?>> systems, Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        for (ActorSystem<?> system : systems) {
            while (Cluster.get(system).selfMember().status() != MemberStatus.up()) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the cluster did not come up in " + max.toSeconds() + " s");
                }
                Thread.sleep(20);
            }
        }
    }

    private static void awaitComputeNodes(ActorSystem<?> system, int count, Duration max) throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        while (DexCli.computeStatuses(system).size() < count) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(count + " compute nodes did not come up in " + max.toSeconds() + " s");
            }
            Thread.sleep(100);
        }
    }

    record Result(long ops, long gets, long puts, long nanos, Histogram latency) {
    }

    /**
     * The engine alone ({@code dex bench}) on the cluster's configuration: the same number of keys, workload,
     * uniform keys, cache per compute node, partitions and compute nodes, one thread per worker thread of the
     * cluster, with the redo log and group commit the cluster uses. Its throughput in operations per second.
     */
    private double engineBaseline(Config base, DexSettings settings, long n) {
        int threads = computeNodes * settings.compute().workerThreads();
        long cacheMiB = Math.max(1, base.getBytes("dex.compute.cache-size") >> 20);
        long ops = Math.max(500_000, Math.min(4_000_000, n * 2));
        out.printf("the engine alone, same configuration (%d compute node(s), %d threads, uniform keys)...%n", computeNodes, threads);
        return dev.dex.bench.BenchCommand.engineThroughput("--mode", "dex", "--workload", settings.demoWorkload(), "--dist", "uniform",
                "--keys", Long.toString(n), "--ops", Long.toString(ops), "--warmup", Long.toString(ops / 4),
                "--threads", Integer.toString(threads), "--compute-nodes", Integer.toString(computeNodes),
                "--cache-mb", Long.toString(cacheMiB), "--partitions", Integer.toString(partitions),
                "--redo-log", "on", "--commit-batch", "16");
    }

    /**
     * The mix: uniform keys over the loaded ones; a key has at most one write in flight, so its last value is known.
     * Closed loop ({@code rate} 0): a new operation as soon as one of the {@code inFlight} slots is free. Open loop:
     * operation i is scheduled at {@code i / rate} s and its latency counts from then, so time spent waiting for a
     * slot (the system falling behind) is counted too.
     */
    private Result mix(DexClientApi client, long n, int putPercent, int seconds, int inFlight, long rate, Map<Long, Long> written)
            throws InterruptedException {
        return mix(client, n, putPercent, seconds, inFlight, rate, written, null, null, "mix (s)");
    }

    /**
     * The mix, ended early when {@code stop} is set (if given), counting completed operations per second of its
     * run in {@code perSecond} (if given).
     */
    private Result mix(DexClientApi client, long n, int putPercent, int seconds, int inFlight, long rate, Map<Long, Long> written,
            java.util.concurrent.atomic.AtomicBoolean stop, java.util.concurrent.atomic.AtomicLongArray perSecond, String task)
            throws InterruptedException {
        Semaphore slots = new Semaphore(inFlight);
        Set<Long> writing = ConcurrentHashMap.newKeySet();
        Recorder recorder = new Recorder(3);
        AtomicLong gets = new AtomicLong();
        AtomicLong puts = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        SplittableRandom random = new SplittableRandom(42);
        long start = System.nanoTime();
        long end = start + TimeUnit.SECONDS.toNanos(seconds);
        long ops = 0;
        try (ProgressBar bar = bar(task, seconds)) {
            while (System.nanoTime() < end && (stop == null || !stop.get())) {
                long scheduled = rate > 0 ? start + (long) (ops * (1e9 / rate)) : 0;
                if (rate > 0) {
                    for (long wait; (wait = scheduled - System.nanoTime()) > 0; ) {
                        java.util.concurrent.locks.LockSupport.parkNanos(Math.min(wait, 200_000));
                    }
                }
                slots.acquire();
                long key = (1 + random.nextLong(n)) * KEY_SPACING;
                long t0 = rate > 0 ? scheduled : System.nanoTime();
                if (random.nextInt(100) < putPercent && writing.add(key)) {
                    long value = random.nextLong();
                    client.put(key, value).whenComplete((replaced, failure) -> {
                        if (failure == null) {
                            written.put(key, value);
                            puts.incrementAndGet();
                        } else {
                            failures.incrementAndGet();
                        }
                        writing.remove(key);
                        done(recorder, t0, start, perSecond, perSecond == null ? null : perTick);
                        slots.release();
                    });
                } else {
                    client.get(key).whenComplete((value, failure) -> {
                        if (failure == null) {
                            gets.incrementAndGet();
                        } else {
                            failures.incrementAndGet();
                        }
                        done(recorder, t0, start, perSecond, perSecond == null ? null : perTick);
                        slots.release();
                    });
                }
                if ((++ops & 1023) == 0) {
                    bar.stepTo(Math.min(seconds, (System.nanoTime() - start) / 1_000_000_000L));
                }
            }
            slots.acquire(inFlight);
            slots.release(inFlight);
            bar.stepTo(seconds);
        }
        if (failures.get() > 0) {
            throw new IllegalStateException(failures.get() + " operations of the mix failed");
        }
        return new Result(ops, gets.get(), puts.get(), System.nanoTime() - start, recorder.getIntervalHistogram());
    }

    private static void done(Recorder recorder, long t0, long start, java.util.concurrent.atomic.AtomicLongArray perSecond,
                             java.util.concurrent.atomic.AtomicLongArray perTick) {
        long now = System.nanoTime();
        recorder.recordValue(now - t0);
        if (perSecond != null) {
            int second = (int) ((now - start) / 1_000_000_000L);
            if (second < perSecond.length()) {
                perSecond.incrementAndGet(second);
            }
        }
        if (perTick != null) {
            int tick = (int) ((now - start) / TICK_NANOS);
            if (tick < perTick.length()) {
                perTick.incrementAndGet(tick);
            }
        }
    }

    /**
     * Writes the scale-out's and the leave's throughput per 100 ms ({@code timelineFile}, CSV: seconds since the mix
     * started, operations per second in that 100 ms; only the 100 ms wholly before the mix was stopped at
     * {@code endAt}) and its plot, with the join, the settled map, the leave and the
     * map back as vertical markers; sets {@link #timelineReading}.
     */
    private void writeTimeline(double joinAt, double settledAt, double leaveAt, double leftAt, double endAt) throws java.io.IOException {
        int ticks = Math.min(perTick.length(), (int) (endAt * 1e9 / TICK_NANOS));
        double perSecond = 1e9 / TICK_NANOS;
        StringBuilder csv = new StringBuilder("t_seconds,ops_per_second\n");
        double[] t = new double[ticks];
        double[] rate = new double[ticks];
        double usual = 0;
        int before = 0;
        double lowest = Double.MAX_VALUE;
        for (int i = 0; i < ticks; i++) {
            t[i] = (i + 0.5) * TICK_NANOS / 1e9;
            rate[i] = perTick.get(i) * perSecond;
            csv.append(String.format(java.util.Locale.ROOT, "%.1f,%.0f%n", t[i], rate[i]));
            if (t[i] >= 1 && t[i] < joinAt) {
                usual += rate[i];
                before++;
            } else if (t[i] >= joinAt) {
                lowest = Math.min(lowest, rate[i]);
            }
        }
        usual = before == 0 ? 0 : usual / before;
        java.nio.file.Files.writeString(timelineFile, csv);
        org.knowm.xchart.XYChart chart = new org.knowm.xchart.XYChartBuilder().width(800).height(500)
                .title("Throughput while a compute node joins and leaves").xAxisTitle("time (s)").yAxisTitle("ops/s").build();
        chart.getStyler().setMarkerSize(0);
        chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.OutsideS);
        chart.addSeries("ops/s per 100 ms", t, rate);
        double top = java.util.Arrays.stream(rate).max().orElse(1);
        String[] names = {"join", "partitions settled", "leave", "partitions back"};
        double[] at = {joinAt, settledAt, leaveAt, leftAt};
        for (int i = 0; i < names.length; i++) {
            if (at[i] > 0) {
                chart.addSeries(names[i], new double[] {at[i], at[i]}, new double[] {0, top});
            }
        }
        String png = timelineFile.toString().replaceAll("\\.csv$", "") + ".png";
        System.setProperty("java.awt.headless", "true");
        org.knowm.xchart.BitmapEncoder.saveBitmap(chart, png, org.knowm.xchart.BitmapEncoder.BitmapFormat.PNG);
        timelineReading = String.format(java.util.Locale.ROOT, "%d compute node(s), one more joins at %.1f s: the partitions"
                + " settle %.1f s later; it leaves at %.1f s and the map is back %.1f s later. The usual rate before the join"
                + " is %,.0f ops/s; the lowest 100 ms after it, %,.0f ops/s (%.0f%%).", computeNodes, joinAt, settledAt - joinAt,
                leaveAt, leftAt - leaveAt, usual, lowest == Double.MAX_VALUE ? 0 : lowest,
                usual == 0 ? 0 : 100 * (lowest == Double.MAX_VALUE ? 0 : lowest) / usual);
        out.println("timeline: " + timelineFile + " and " + png);
    }

    private void report(Result mix, List<ComputeNode.Status> before, List<ComputeNode.Status> after, DexSettings settings, long n,
            double engine) throws java.io.IOException {
        String workload = settings.demoWorkload();
        long[] delta = new long[5];
        for (ComputeNode.Status s : after) {
            delta[0] += s.reads();
            delta[1] += s.writes();
            delta[2] += s.atomics();
            delta[3] += s.twoSided();
            delta[4] += s.bytes();
        }
        for (ComputeNode.Status s : before) {
            delta[0] -= s.reads();
            delta[1] -= s.writes();
            delta[2] -= s.atomics();
            delta[3] -= s.twoSided();
            delta[4] -= s.bytes();
        }
        double ops = mix.ops();
        Histogram h = mix.latency();
        double throughput = ops / (mix.nanos() / 1e9);
        out.printf("%nmix %s through the client actor: %,d operations (%,d gets, %,d puts) in %.2f s, %s%n", workload, mix.ops(),
                mix.gets(), mix.puts(), mix.nanos() / 1e9, rate != null && rate > 0
                        ? String.format("open loop at %,d ops/s (at most %,d in flight)", rate, settings.demoInFlight())
                        : String.format("closed loop, %,d in flight", settings.demoInFlight()));
        out.printf("throughput   %,.0f ops/s%n", throughput);
        if (!Double.isNaN(engine)) {
            out.printf("engine alone %,.0f ops/s: the cluster serves %.1f%% of it%n", engine, 100 * throughput / engine);
        }
        out.printf("latency      p50 %.0f us   p99 %.0f us   p99.9 %.0f us%n", h.getValueAtPercentile(50) / 1e3,
                h.getValueAtPercentile(99) / 1e3, h.getValueAtPercentile(99.9) / 1e3);
        out.printf("verbs per operation (all compute nodes):%n");
        out.printf("  %-10s %-10s %-10s %-10s %-10s%n", "reads", "writes", "atomics", "two-sided", "bytes");
        out.printf("  %-10.3f %-10.3f %-10.3f %-10.4f %-10.1f%n", delta[0] / ops, delta[1] / ops, delta[2] / ops, delta[3] / ops,
                delta[4] / ops);
        if (json != null) {
            com.fasterxml.jackson.databind.ObjectMapper mapper = new com.fasterxml.jackson.databind.ObjectMapper();
            var root = mapper.createObjectNode();
            root.put("workload", workload).put("mode", "cluster").put("keys", n).put("ops", mix.ops())
                    .put("computeNodes", computeNodes).put("throughputOpsPerSec", throughput)
                    .put("inFlight", settings.demoInFlight()).put("rateOpsPerSec", rate == null ? 0 : rate);
            if (!Double.isNaN(engine)) {
                root.put("engineOpsPerSec", engine).put("clusterToEngine", throughput / engine);
            }
            root.putObject("perOp").put("reads", delta[0] / ops).put("writes", delta[1] / ops).put("atomics", delta[2] / ops)
                    .put("twoSided", delta[3] / ops).put("bytes", delta[4] / ops);
            root.putObject("latencyNs").put("p50", h.getValueAtPercentile(50)).put("p99", h.getValueAtPercentile(99))
                    .put("p999", h.getValueAtPercentile(99.9));
            mapper.writerWithDefaultPrettyPrinter().writeValue(json.toFile(), root);
        }
    }

    /**
     * Operations completed in each whole second of the mix during the scale-out, and the lowest second from the
     * join until the map settled against the median second before the join.
     */
    private void reportScaleOut(java.util.concurrent.atomic.AtomicLongArray perSecond, double joinAt, double settledAt, int seconds) {
        List<Long> counts = new ArrayList<>();
        for (int i = 0; i < Math.min(seconds, perSecond.length()); i++) {
            counts.add(perSecond.get(i));
        }
        out.printf("operations per second during the scale-out (join at %.1f s, settled at %.1f s): %s%n", joinAt, settledAt,
                counts.stream().map(c -> String.format("%,d", c)).toList());
        List<Long> before = new ArrayList<>(counts.subList(0, Math.min(counts.size(), (int) joinAt)));
        // The first second ramps up (the in-flight window fills): the usual rate is the median of the rest.
        if (before.size() > 1) {
            before.remove(0);
        }
        before.sort(null);
        int from = (int) joinAt;
        int to = Math.min(counts.size(), (int) Math.ceil(settledAt) + 1);
        if (before.isEmpty() || from >= to) {
            return;
        }
        long usual = before.get(before.size() / 2);
        long lowest = Long.MAX_VALUE;
        for (int i = from; i < to; i++) {
            lowest = Math.min(lowest, counts.get(i));
        }
        out.printf("lowest second from the join until settled: %,d operations, %.0f%% of the usual %,d per second%n", lowest,
                usual == 0 ? 0.0 : 100.0 * lowest / usual, usual);
    }

    private void printMap(List<ComputeNode.Status> statuses) {
        for (ComputeNode.Status s : statuses) {
            out.printf("  %-30s %2d partitions %s%n", s.address(), s.partitionsHeld().size(), s.partitionsHeld());
        }
    }

    /**
     * Touches every partition (sharding starts a moved partition on its first message) until each of {@code nodes}
     * compute nodes holds its share and every partition is held exactly once, for two checks in a row.
     */
    private List<ComputeNode.Status> awaitRebalance(DexClientApi client, ActorSystem<?> system, long n, int nodes, Duration max)
            throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        String previous = "";
        while (System.nanoTime() < deadline) {
            for (int p = 0; p < partitions; p++) {
                // A partition's upper bound is a loaded key (bounds are leaf fences); the last one is the largest key.
                long key = p == partitions - 1 ? n * KEY_SPACING : table.upperInclusive(p);
                client.get(key).toCompletableFuture().get(60, TimeUnit.SECONDS);
            }
            List<ComputeNode.Status> statuses;
            try {
                statuses = DexCli.computeStatuses(system);
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                // A compute node that just left may still be listed and no longer answers: not settled yet.
                previous = "";
                Thread.sleep(250);
                continue;
            }
            int total = 0;
            int smallest = Integer.MAX_VALUE;
            for (ComputeNode.Status s : statuses) {
                total += s.partitionsHeld().size();
                smallest = Math.min(smallest, s.partitionsHeld().size());
            }
            String map = statuses.stream().map(ComputeNode.Status::partitionsHeld).toList().toString();
            boolean balanced = statuses.size() == nodes && total == partitions && smallest >= partitions / nodes - 1;
            if (balanced && map.equals(previous)) {
                return statuses;
            }
            previous = balanced ? map : "";
            Thread.sleep(250);
        }
        throw new IllegalStateException("partitions did not settle on " + nodes + " compute nodes within "
                + max.toSeconds() + " s");
    }

    private long verify(DexClientApi client, long n, int inFlight, Map<Long, Long> written) throws InterruptedException {
        Semaphore slots = new Semaphore(inFlight);
        AtomicLong mismatches = new AtomicLong();
        try (ProgressBar bar = bar("verify", n)) {
            for (long i = 1; i <= n; i++) {
                long key = i * KEY_SPACING;
                long expected = written.getOrDefault(key, key + 1);
                slots.acquire();
                client.get(key).whenComplete((OptionalLong value, Throwable failure) -> {
                    if (failure != null || value.isEmpty() || value.getAsLong() != expected) {
                        if (mismatches.incrementAndGet() <= 5) {
                            System.err.println("key " + key + ": expected " + expected + ", got " + (failure != null ? failure : value));
                        }
                    }
                    slots.release();
                });
                if ((i & 1023) == 0) {
                    bar.stepTo(i);
                }
            }
            slots.acquire(inFlight);
            bar.stepTo(n);
        }
        return mismatches.get();
    }

    private static ProgressBar bar(String task, long total) {
        return new ProgressBarBuilder().setTaskName(task).setInitialMax(total).setStyle(ProgressBarStyle.ASCII)
                .setConsumer(new me.tongfei.progressbar.ConsoleProgressBarConsumer(System.err)).build();
    }
}
