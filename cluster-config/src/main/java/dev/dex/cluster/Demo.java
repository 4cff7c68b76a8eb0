package dev.dex.cluster;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;

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
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;
import me.tongfei.progressbar.ProgressBar;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code dex demo}: a whole cluster in this JVM, as separate actor systems on loopback. One memory node
 * and two compute nodes; bulk load; a YCSB-style mix through the client actor; a third compute node joins
 * and partitions move to it (logical repartitioning); every key is checked for its last value.
 *
 * <p>This class is the command and its script: options, the order of the steps and what to say between them. The
 * cluster's waits and its stop are {@link DemoCluster}'s, the keys, the mix and the check {@link DemoWorkload}'s,
 * and the figures it prints {@link DemoReport}'s.
 */
@Command(name = "demo", mixinStandardHelpOptions = true, usageHelpAutoWidth = true,
        description = "Run a DEX cluster in this JVM: load, serve a mix, scale out, verify.")
final class Demo implements Callable<Integer> {
    /**
     * Seconds of the mix before the third compute node joins: the usual rate the join and the leave are compared with is
     * the median of these seconds but the first (which ramps up), so the median of three.
     */
    static final int SECONDS_BEFORE_JOIN = 4;
    /** The warm-up of {@code bench --cluster --processes} unless --warmup says otherwise: every node's JVM compiles its own. */
    static final int PROCESSES_WARMUP = 10;
    /** The longest the mix during the scale-out may run. */
    static final int SCALE_OUT_MAX_SECONDS = 150;

    @Option(names = "--keys", paramLabel = "N", converter = dev.dex.bench.CountConverter.class,
            description = "Keys to bulk-load, e.g. 1000000 or 1m (default: dex.demo.keys, 1000000).")
    Long keys;

    @Option(names = "--seconds", paramLabel = "S", description = "Seconds of the mix (default: dex.demo.seconds, 5).")
    Integer seconds;

    @Option(names = "--workload", paramLabel = "W",
            description = "read-only (100%% get), read-intensive (95/5 get/put), write-intensive (50/50), scan-intensive (95%% scans"
                    + " of 100 entries, 5%% puts) (default: dex.demo.workload).")
    String workload;

    @Option(names = "--cache-size", paramLabel = "SIZE",
            description = "Each compute node's cache (default: dex.demo.cache-size, 64MiB).")
    String cacheSize;

    @Option(names = "--partitions", paramLabel = "P", description = "Logical partitions (default: dex.tree.partitions, 64).")
    Integer partitionsOption;
    /** --partitions, or the setting. */
    private int partitions;

    @Option(names = "--compute-nodes", paramLabel = "C",
            description = "Compute nodes before the scale-out, 1 to " + MAX_COMPUTE_NODES + " (default: dex.demo.compute-nodes, 2).")
    Integer computeNodesOption;
    /** The most compute nodes the demo and bench --cluster start (the scale test bed runs 32 in one JVM). */
    static final int MAX_COMPUTE_NODES = 64;
    /** The most with --processes (a JVM each) or --replicas (which starts its nodes all at once). */
    static final int MAX_COMPUTE_NODES_ELSEWHERE = 16;
    /** --compute-nodes, or the setting. */
    int computeNodes;
    /** Compute nodes this JVM runs (the one that joins too): more than DemoCluster.CROWDED start a group at a time. */
    private int inThisJvm;

    @Option(names = "--fabric", paramLabel = "TRANSPORT",
            description = "How the compute nodes reach the memory node: local (in this JVM's memory), tcp (over loopback "
                    + "TCP, as across hosts) or shm (/dev/shm) (default: dex.demo.fabric, local).")
    String fabric;

    @Option(names = "--timeline", paramLabel = "FILE",
            description = "Write the throughput of every 100 ms of the scale-out and the leave that follows it to FILE (CSV)"
                    + " and a plot beside it (.png), as bin/dex reproduce does.")
    java.nio.file.Path timelineFile;
    /** One line of reading of the timeline, once it is written. */
    String timelineReading;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write the mix's result to FILE as one JSON object.")
    java.nio.file.Path json;

    @Option(names = "--in-flight", paramLabel = "N", converter = dev.dex.bench.CountConverter.class,
            description = "Operations the mix keeps in flight through the client, e.g. 4k (default: dex.demo.in-flight).")
    Long inFlight;

    @Option(names = "--rate", paramLabel = "OPS", converter = dev.dex.bench.CountConverter.class,
            description = "Open loop: start operations at this many per second, latency counted from each one's scheduled"
                    + " start (default: 0, closed loop: a new operation as soon as one completes).")
    Long rate;

    @Option(names = "--trace-sample", paramLabel = "N",
            description = "Trace about one in N operations of the measured mix through every hop (the client, the wire, the"
                    + " node's router, the partition, the engine's worker and back) and print the time spent at each hop"
                    + " (default: 0, none).")
    Integer traceSample;

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

    @Option(names = "--replicas", paramLabel = "R",
            description = "Memory nodes that hold the memory server (2 or 3; tcp fabric): a replica group whose primary streams"
                    + " every change to its backups before it is acknowledged (docs/replication.md). The keys (default 50k)"
                    + " are written through the client, the scale-out is left out, and --seconds is the mix after the"
                    + " failover's copy (default: 1).")
    Integer replicas;

    @Option(names = "--kill-memory-node", paramLabel = "ROLE", arity = "0..1", fallbackValue = "primary",
            description = "With --replicas: stop the memory node of the group's primary (the default) or of a backup"
                    + " (--kill-memory-node=backup) under the mix, print the operations of every second through the view"
                    + " change and the time until the index serves again, then start a replacement that is copied while the"
                    + " mix goes on, and verify every key.")
    String killMemoryNode;

    @Option(names = "--kill-compute-node",
            description = "After the leave, kill a compute node under the mix and print the time until its partitions serve"
                    + " again on the others (also in --json); every key is verified after. Over tcp or shm (without TLS) the"
                    + " node is one more compute node started in a process of its own and killed with SIGKILL; otherwise one"
                    + " of the demo's nodes stops its actor system without leaving. Needs --compute-nodes 2 or more.")
    boolean killComputeNode;

    @Option(names = "--kill-coordinator",
            description = "After the leave, stop the compute node that runs the shard coordinator inside this JVM without"
                    + " leaving the cluster, and print the time until a new coordinator runs and until the stopped node's"
                    + " partitions serve again on the others (also in --json as coordinatorKill); every key is verified after."
                    + " With bench --cluster --processes: after the measured mix, kill that node's process with SIGKILL under"
                    + " the mix instead (no key is checked there). Goes with the demo, bench --cluster --join-leave and bench --cluster --processes; needs"
                    + " --compute-nodes 2 or more.")
    boolean killCoordinator;

    @Option(names = "--processes",
            description = "bench --cluster: run the memory node and each compute node in a JVM of its own, this JVM being the"
                    + " client (started and stopped by the bench; fabric shm unless --fabric tcp), as a deployment on one host"
                    + " runs, instead of every node's actor system in this JVM. Its --warmup defaults to " + PROCESSES_WARMUP
                    + " s (each JVM compiles its own hot paths).")
    boolean processes;

    @Option(names = "--join-leave",
            description = "bench --cluster: after the mix, join one more compute node under the mix and make it leave again,"
                    + " as the demo does, and print for each the rebalance rounds, the partitions moved, the seconds until the"
                    + " map settled, the lowest second and the longest operation (also in --json); every key is verified"
                    + " after. The scale test bed of docs/benchmarks.md.")
    boolean joinLeave;
    @Option(names = "--dist", paramLabel = "uniform|zipf", defaultValue = "uniform",
            description = "bench --cluster: the mix's keys, uniform (default) or Zipf-distributed with --theta (the hottest keys"
                    + " the smallest, so they lie together in the first partitions).")
    String dist;

    @Option(names = "--theta", paramLabel = "T", defaultValue = "0.99", description = "bench --cluster --dist zipf: the skew, in [0, 1).")
    double theta;

    @Option(names = "--splits", paramLabel = "on|off", defaultValue = "off",
            description = "bench --cluster: whether compute nodes split their hot partitions (dex.compute.split: every second,"
                    + " a partition 2x the node's others and above " + SPLIT_MIN_RATE + " operations a second, over 2 s load"
                    + " windows; the region has room for " + SPLITS_ROOM + " more partitions' logs), and the report adds the"
                    + " splits made and the load spread between the nodes; docs/partition-splits.md.")
    String splits;
    /** The rate a partition needs to split in bench --cluster --splits on: a hot one, not every partition above its node's mean. */
    static final int SPLIT_MIN_RATE = 20_000;
    /** The partitions' logs beyond --partitions that bench --cluster --splits on sizes the memory node's region for. */
    static final int SPLITS_ROOM = 256;

    /** The share of the mix's operations that are scans (--workload scan-intensive: 95). */
    private int scanPercent;

    /** Set by {@code dex bench --cluster}: measure the mix only, without the scale-out and the check. */
    boolean benchOnly;

    private final PrintWriter out = new PrintWriter(System.out, true);

    @Override
    public Integer call() throws Exception {
        String fabricName = "demo-" + UUID.randomUUID();
        Config defaults = DexNodes.config(ConfigFactory.empty());
        long n = keys != null ? keys : defaults.getLong("dex.demo.keys");
        computeNodes = computeNodesOption != null ? computeNodesOption : defaults.getInt("dex.demo.compute-nodes");
        // Three JVMs compiling their hot paths at once on a small host need longer than one: with 2 s, the processes
        // bench at 5,000 ops/s measured the compilers (p50 3.5-5.5 ms), with 15 s the cluster (0.58 ms).
        warmup = warmupOption != null ? warmupOption : processes ? PROCESSES_WARMUP : defaults.getInt("dex.demo.warmup");
        int memoryReplicas = replicas == null ? 1 : replicas;
        if (memoryReplicas < 1 || memoryReplicas > 3) {
            throw new IllegalArgumentException("--replicas must be 1, 2 or 3: " + memoryReplicas);
        }
        if (killMemoryNode != null && !killMemoryNode.equals("primary") && !killMemoryNode.equals("backup")) {
            throw new IllegalArgumentException("--kill-memory-node takes primary or backup: " + killMemoryNode);
        }
        if (killMemoryNode != null && memoryReplicas == 1) {
            throw new IllegalArgumentException("--kill-memory-node needs --replicas 2 or 3: with one replica a killed memory node"
                    + " takes its part of the index with it");
        }
        if (fabric == null) {
            fabric = memoryReplicas > 1 ? "tcp" : processes ? "shm" : defaults.getString("dex.demo.fabric");
        }
        if (memoryReplicas > 1 && !fabric.equals("tcp") && !fabric.equals("local")) {
            throw new IllegalArgumentException("--replicas " + memoryReplicas + " needs --fabric tcp or local: " + fabric);
        }
        if (killComputeNode && (memoryReplicas > 1 || benchOnly)) {
            throw new IllegalArgumentException("--kill-compute-node goes with the demo of one replica: "
                    + (benchOnly ? "bench --cluster measures the mix only" : "--replicas " + memoryReplicas));
        }
        boolean killable = !benchOnly || joinLeave || processes;
        if (killCoordinator && (killComputeNode || memoryReplicas > 1 || !killable || computeNodes < 2)) {
            throw new IllegalArgumentException("--kill-coordinator " + (killComputeNode ? "and --kill-compute-node: one kill per run"
                    : memoryReplicas > 1 ? "goes with the demo of one replica" : !killable
                    ? "goes with the demo, bench --cluster --join-leave or bench --cluster --processes"
                    : "needs --compute-nodes 2 or more: the coordinator's node's partitions need a node to move to"));
        }
        if (joinLeave && (!benchOnly || processes)) {
            throw new IllegalArgumentException("--join-leave goes with bench --cluster in one JVM"
                    + (benchOnly ? ", not --processes" : " (the demo always joins and leaves)"));
        }
        if (processes && !benchOnly) {
            throw new IllegalArgumentException("--processes goes with bench --cluster (the demo runs its nodes in one JVM)");
        }
        if (memoryReplicas > 1 && benchOnly) {
            throw new IllegalArgumentException("bench --cluster runs one replica; use bench --fabric tcp --replicas for the cost");
        }
        if (memoryReplicas > 1 && keys == null) {
            n = 50_000; // written through the client, not bulk-loaded
        }
        if (cacheSize == null) {
            cacheSize = defaults.getString("dex.demo.cache-size");
        }
        if (n < 1000 || n > 50_000_000) {
            throw new IllegalArgumentException("--keys must be in [1000, 50000000]: " + n);
        }
        if (computeNodes < 1 || computeNodes > MAX_COMPUTE_NODES) {
            throw new IllegalArgumentException("--compute-nodes must be in [1, " + MAX_COMPUTE_NODES + "]: " + computeNodes);
        }
        if (computeNodes > MAX_COMPUTE_NODES_ELSEWHERE && (processes || memoryReplicas > 1)) {
            throw new IllegalArgumentException("--compute-nodes above " + MAX_COMPUTE_NODES_ELSEWHERE + " goes with the demo and"
                    + " bench --cluster in one JVM, not with " + (processes ? "--processes" : "--replicas"));
        }
        if (killComputeNode && computeNodes < 2) {
            throw new IllegalArgumentException("--kill-compute-node needs --compute-nodes 2 or more: the killed node's partitions"
                    + " need a node to move to");
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
        if (traceSample != null && (traceSample < 0 || traceSample > 1_000_000)) {
            throw new IllegalArgumentException("--trace-sample must be in [0, 1000000] (1: every operation; 0: none): " + traceSample);
        }
        if (warmup < 0 || warmup > 600) {
            throw new IllegalArgumentException("--warmup must be in [0, 600] seconds: " + warmup);
        }
        if (!baseline.equals("on") && !baseline.equals("off")) {
            throw new IllegalArgumentException("--baseline must be on or off: " + baseline);
        }
        if (!dist.equals("uniform") && !dist.equals("zipf") || !(theta >= 0 && theta < 1)) {
            throw new IllegalArgumentException("--dist must be uniform or zipf, --theta in [0, 1): " + dist + ", " + theta);
        }
        if (!splits.equals("on") && !splits.equals("off") || (splits.equals("on") || dist.equals("zipf")) && (!benchOnly || processes
                || joinLeave)) {
            throw new IllegalArgumentException("--splits on|off and --dist go with bench --cluster in one JVM, without"
                    + " --join-leave: " + splits + ", " + dist);
        }
        partitions = partitionsOption != null ? partitionsOption : defaults.getInt("dex.tree.partitions");
        if (partitions < 3 || partitions > PartitionTable.MAX_PARTITIONS) {
            throw new IllegalArgumentException("--partitions must be in [3, " + PartitionTable.MAX_PARTITIONS + "]: " + partitions);
        }
        Config overrides = ConfigFactory.empty()
                .withValue("dex.memory.replicas", ConfigValueFactory.fromAnyRef(memoryReplicas))
                .withValue("dex.fabric.transport", ConfigValueFactory.fromAnyRef(fabric))
                .withValue("dex.fabric.local-name", ConfigValueFactory.fromAnyRef(fabricName))
                .withValue("dex.fabric.shm-directory", ConfigValueFactory.fromAnyRef("/dev/shm/" + fabricName))
                .withValue("dex.tree.partitions", ConfigValueFactory.fromAnyRef(partitions))
                .withValue("dex.tree.partition-key-min", ConfigValueFactory.fromAnyRef(1))
                .withValue("dex.tree.partition-key-max", ConfigValueFactory.fromAnyRef(n * DemoWorkload.KEY_SPACING))
                .withValue("dex.memory.region-size", ConfigValueFactory.fromAnyRef(DemoCluster.regionMiB(n, partitions, defaults) + "MiB"))
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
        if (splits.equals("on")) {
            overrides = overrides.withFallback(ConfigFactory.parseString("dex.compute.split { interval = 1s, rate-factor = 2,"
                    + " min-rate = " + SPLIT_MIN_RATE + " }\ndex.compute.load-window = 2s"))
                    // Each new partition's redo log takes room on a memory server: room for SPLITS_ROOM of them.
                    .withValue("dex.memory.region-size", ConfigValueFactory.fromAnyRef(
                            DemoCluster.regionMiB(n, partitions + SPLITS_ROOM, defaults) + "MiB"));
        } else if (benchOnly && dist.equals("zipf")) {
            // The same load windows and region as with splits on, so that the two runs differ in the splits alone.
            overrides = overrides.withValue("dex.compute.load-window", ConfigValueFactory.fromAnyRef("2s"))
                    .withValue("dex.memory.region-size", ConfigValueFactory.fromAnyRef(
                            DemoCluster.regionMiB(n, partitions + SPLITS_ROOM, defaults) + "MiB"));
        }
        Config given = DexNodes.config(overrides);
        // Every node in this JVM (the one that joins the demo's cluster too): more than DemoCluster.CROWDED need longer pauses.
        inThisJvm = processes ? 0 : computeNodes + (memoryReplicas > 1 || benchOnly && !joinLeave ? 0 : 1);
        Config base = DemoCluster.forCrowdedJvm(given, inThisJvm, ConfigFactory.defaultOverrides().withFallback(
                ConfigFactory.defaultApplication()));
        if (base != given) {
            out.printf("%d compute nodes in one JVM: the failure detector allows pauses of %s and the split-brain resolver waits %s"
                    + " (a crowded JVM misses heartbeats while it forms and rebalances; docs/cluster.md)%n", inThisJvm,
                    base.getString(DemoCluster.HEARTBEAT_PAUSE), base.getString(DemoCluster.STABLE_AFTER));
            if (inThisJvm > DemoCluster.VERY_CROWDED) {
                out.printf("more than %d: the cluster's gossip, leader and heartbeat ticks are Pekko's defaults (gossip every %s),"
                        + " and the nodes start %d at a time%n", DemoCluster.VERY_CROWDED, base.getString("pekko.cluster.gossip-interval"),
                        DemoCluster.START_GROUP);
            }
        }
        DexSettings settings = DexSettings.from(base);
        int putPercent = switch (settings.demoWorkload()) {
            case "read-only" -> 0;
            case "read-intensive" -> 5;
            case "write-intensive" -> 50;
            case "scan-intensive" -> 5;
            default -> throw new IllegalArgumentException("--workload must be read-only, read-intensive, write-intensive or"
                    + " scan-intensive: " + settings.demoWorkload());
        };
        int scanPercent = settings.demoWorkload().equals("scan-intensive") ? 95 : 0;
        if (scanPercent > 0 && memoryReplicas > 1) {
            throw new IllegalArgumentException("--workload scan-intensive goes with one replica (the replicated demo's mix is gets and"
                    + " puts)");
        }
        this.scanPercent = scanPercent;
        List<ActorSystem<?>> systems = new ArrayList<>();
        try {
            if (memoryReplicas > 1) {
                return new ReplicaDemo(out, base, settings, memoryReplicas, computeNodes).run(n, putPercent, killMemoryNode, systems);
            }
            if (processes) {
                ProcessBench.check(base, settings); // before the engine's own run, which takes seconds
                double engine = baseline.equals("on") ? engineBaseline(base, settings, n) : Double.NaN;
                return ProcessBench.run(out, base, settings, new ProcessBench.Options(n, putPercent, scanPercent, computeNodes, partitions,
                        cacheSize, warmup, settings.demoSeconds(), settings.demoInFlight(), rate == null ? 0 : rate,
                        traceSample == null ? 0 : traceSample, engine, killCoordinator), new DemoReport(out, computeNodes, rate, json), fabricName);
            }
            return run(base, settings, n, putPercent, systems);
        } finally {
            try {
                DemoCluster.leaveInOrder(systems);
            } finally {
                Fabrics.closeLocal(fabricName);
                DemoCluster.deleteFlatDirectory(java.nio.file.Path.of("/dev/shm/" + fabricName));
            }
        }
    }

    private int run(Config base, DexSettings settings, long n, int putPercent, List<ActorSystem<?>> systems) throws Exception {
        // The engine alone first, while no actor system of the cluster shares the cores or the memory.
        double engine = benchOnly && baseline.equals("on") ? engineBaseline(base, settings, n) : Double.NaN;
        DemoReport report = new DemoReport(out, computeNodes, rate, json);
        out.printf("DEX on Pekko %s: 1 memory node, %d compute node(s) and a client, each its own actor system in this JVM;"
                + " fabric %s; %s%n", benchOnly ? "cluster bench" : "demo", computeNodes, settings.fabric().transport(),
                base.getBoolean("dex.security.tls") ? "mutual TLS between the nodes"
                        : "plain TCP on loopback (no TLS: for a cluster across hosts see docs/security.md)");
        ActorSystem<Void> memory = DexNodes.memoryNode(DexNodes.nodeConfig(base, "memory", "127.0.0.1", 0, List.of()), settings);
        systems.add(memory);
        List<String> seed = List.of(DexNodes.hostPort(memory));

        long loadStart = System.nanoTime();
        PartitionTable table;
        Fabric loaderFabric = Fabrics.open(settings.fabric());
        try (RemoteMemory loader = DemoCluster.awaitFormatted(memory, loaderFabric)) {
            SortedEntries entries = DemoWorkload.entries(n);
            try (ProgressBar bar = DemoWorkload.bar("load", n)) {
                BulkLoader.load(loader, 0.8, entries, bar::stepTo);
            }
            table = Partitioning.fromLeafFences(loader, partitions);
            PartitionTable.store(loader, table);
        } finally {
            if (settings.fabric().perNode()) {
                loaderFabric.close();
            }
        }
        out.printf("bulk-loaded %,d keys in %.2f s; %d partitions at leaf fences%n", n, (System.nanoTime() - loadStart) / 1e9, partitions);

        List<ActorSystem<Void>> computeSystems = new ArrayList<>();
        // With --kill-compute-node a compute node's actor system stops, when terminated, without leaving the cluster first
        // (the demo's own stop at the end still leaves gracefully: ClusterMember.leave).
        Config computeBase = killComputeNode || killCoordinator ? base.withValue("pekko.coordinated-shutdown.run-by-actor-system-terminate",
                ConfigValueFactory.fromAnyRef("off")) : base;
        for (int c = 0; c < computeNodes; c++) {
            ActorSystem<Void> node = DexNodes.computeNode(DexNodes.nodeConfig(computeBase, "compute", "127.0.0.1", 0, seed), settings);
            systems.add(node);
            computeSystems.add(node);
            if (inThisJvm > DemoCluster.CROWDED && (c + 1) % DemoCluster.START_GROUP == 0) {
                // A crowded JVM starts its nodes a group at a time: all at once, their start-up starves the heartbeats.
                DemoCluster.awaitUp(systems, Duration.ofSeconds(60));
            }
        }
        ActorSystem<DexClient.Command> clientSystem = DexNodes.client(DexNodes.nodeConfig(base, "client", "127.0.0.1", 0, seed), settings);
        systems.add(clientSystem);
        DemoCluster.awaitUp(systems, Duration.ofSeconds(60));
        DemoCluster.awaitComputeNodes(clientSystem, computeNodes, Duration.ofSeconds(60));
        DexClientApi client = new DexClientApi(clientSystem, clientSystem, settings.requestTimeout());
        long lastKey = n * DemoWorkload.KEY_SPACING;

        // Sharding spreads the partitions over the compute nodes in the first seconds; the mix measures the settled map.
        long settleStart = System.nanoTime();
        DemoCluster.awaitRebalance(client, clientSystem, table, partitions, lastKey, computeNodes, Duration.ofSeconds(90));
        out.printf("partitions settled on %d compute node(s) in %.2f s%n", computeNodes, (System.nanoTime() - settleStart) / 1e9);
        Map<Long, Long> written = new ConcurrentHashMap<>();
        java.util.function.ToLongFunction<java.util.SplittableRandom> keyIndex = dist.equals("zipf") ? DemoWorkload.zipf(n, theta)
                : DemoWorkload.uniform(n);
        if (warmup > 0) {
            out.printf("warming up for %d s (not measured)%s%n", warmup, splits.equals("on") ? "; hot partitions split meanwhile" : "");
            DemoWorkload.mix(client, keyIndex, n, putPercent, scanPercent, warmup, settings.demoInFlight(), rate == null ? 0 : rate,
                    written, null, null, null, null, "warm-up (s)");
        }
        DemoReport.Measured measured = report.measure(clientSystem, client, traceSample == null ? 0 : traceSample, settings, n, engine,
                () -> DemoWorkload.mix(client, keyIndex, n, putPercent, scanPercent, settings.demoSeconds(), settings.demoInFlight(),
                        rate == null ? 0 : rate, written, null, null, null, null, "mix (s)"));
        DemoWorkload.Result mix = measured.mix();
        List<ComputeNode.Status> after = measured.after();
        if (benchOnly && !joinLeave) {
            if (dist.equals("zipf") || splits.equals("on")) {
                long madeSplits = after.stream().mapToLong(ComputeNode.Status::splits).sum();
                long merges = after.stream().mapToLong(ComputeNode.Status::merges).sum();
                out.printf("keys %s; splits %s: %d made, %d merges, %d partitions now%n%s%n", dist.equals("zipf") ? "zipf " + theta
                        : "uniform", splits, madeSplits, merges, partitions + madeSplits - merges, ClusterMember.balanceLine(after));
                report.putSplits(splits.equals("on"), madeSplits, after);
            }
            return 0;
        }
        double share = base.getDouble("dex.demo.open-loop-share");
        if ((rate == null || rate == 0) && share > 0 && !benchOnly) {
            if (share > 1) {
                throw new IllegalArgumentException("dex.demo.open-loop-share must be in [0, 1]: " + share);
            }
            long openRate = Math.max(1, Math.round(mix.ops() / (mix.nanos() / 1e9) * share));
            int openSeconds = base.getInt("dex.demo.open-loop-seconds");
            out.printf("%nthe same mix as an open loop at %,d ops/s (%.0f%% of the closed loop's throughput) for %d s...%n", openRate,
                    100 * share, openSeconds);
            DemoWorkload.Result open = DemoWorkload.mix(client, n, putPercent, scanPercent, openSeconds, settings.demoInFlight(), openRate, written,
                    null, null, null, null, "open loop (s)");
            report.printOpenLoop(open, openRate, share);
        }

        out.println();
        out.println("partition map before scale-out:");
        report.printMap(after);
        out.printf("joining another compute node while the mix goes on (%d s before the join are the usual rate)...%n",
                SECONDS_BEFORE_JOIN);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicLongArray perSecond = new java.util.concurrent.atomic.AtomicLongArray(SCALE_OUT_MAX_SECONDS);
        java.util.concurrent.atomic.AtomicLongArray longest = new java.util.concurrent.atomic.AtomicLongArray(SCALE_OUT_MAX_SECONDS);
        // Operations completed in each 100 ms of the mix during the scale-out (and the leave), when --timeline is given.
        java.util.concurrent.atomic.AtomicLongArray perTick = timelineFile == null ? null : new java.util.concurrent.atomic
                .AtomicLongArray((int) (SCALE_OUT_MAX_SECONDS * (1_000_000_000L / DemoWorkload.TICK_NANOS)));
        java.util.concurrent.FutureTask<DemoWorkload.Result> during = new java.util.concurrent.FutureTask<>(() ->
                DemoWorkload.mix(client, n, putPercent, scanPercent, SCALE_OUT_MAX_SECONDS, settings.demoInFlight(), 0, written, stop, perSecond,
                        longest, perTick, "mix during scale-out (s)"));
        Thread mixer = new Thread(during, "demo-mix-during-scale-out");
        mixer.setDaemon(true);
        long mixStart = System.nanoTime();
        mixer.start();
        Thread.sleep(TimeUnit.SECONDS.toMillis(SECONDS_BEFORE_JOIN));
        long joinStart = System.nanoTime();
        DemoReport.Rounds roundsBeforeJoin = DemoReport.Rounds.of(systems);
        ActorSystem<Void> computeC = DexNodes.computeNode(DexNodes.nodeConfig(base, "compute", "127.0.0.1", 0, seed), settings);
        systems.add(computeC);
        DemoCluster.awaitUp(systems, Duration.ofSeconds(60));
        List<ComputeNode.Status> settled = DemoCluster.awaitRebalance(client, clientSystem, table, partitions, lastKey,
                computeNodes + 1, Duration.ofSeconds(90));
        double settledAt = (System.nanoTime() - joinStart) / 1e9;
        DemoReport.Rounds joinRounds = DemoReport.Rounds.of(systems).since(roundsBeforeJoin);
        Thread.sleep(1_500);
        // The new node leaves gracefully (coordinated shutdown: its router refuses what still comes, its partitions are
        // handed off, then it leaves the cluster), as an operator's Ctrl-C would make it.
        out.println("the new compute node leaves again while the mix goes on...");
        long leaveStart = System.nanoTime();
        DemoReport.Rounds roundsBeforeLeave = DemoReport.Rounds.of(systems);
        computeC.terminate();
        computeC.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
        DemoCluster.removeSame(systems, computeC);
        DemoCluster.awaitRebalance(client, clientSystem, table, partitions, lastKey, computeNodes, Duration.ofSeconds(90));
        // The shard coordinator runs on the oldest compute node, never the one that left: its count is still here.
        DemoReport.Rounds leaveRounds = DemoReport.Rounds.of(systems).since(roundsBeforeLeave);
        double leaveAt = (leaveStart - mixStart) / 1e9;
        double leftAt = (System.nanoTime() - mixStart) / 1e9;
        out.printf("partitions back on %d compute node(s) %.2f s after the leave%n", computeNodes, leftAt - leaveAt);
        Thread.sleep(1_500);
        double killAt = Double.NaN;
        String noProcess = DemoKill.notPossible(base, settings.fabric().transport());
        DemoKill.Result kill = killComputeNode && noProcess == null
                ? DemoKill.killAProcess(out, base, settings, client, clientSystem, table, lastKey, computeNodes, seed.get(0)) : null;
        if (kill != null) {
            killAt = (kill.killedAtNanos() - mixStart) / 1e9;
            report.putKill(kill.servedAgainSeconds(), kill.partitions());
            Thread.sleep(1_500);
        } else if (killComputeNode || killCoordinator) {
            ActorSystem<Void> victim;
            if (killCoordinator) {
                org.apache.pekko.actor.Address coordinator = DemoCluster.awaitCoordinator(clientSystem,
                        computeSystems.stream().map(ActorSystem::address).toList(), Duration.ofSeconds(10));
                victim = computeSystems.stream().filter(node -> node.address().equals(coordinator)).findFirst().orElseThrow();
                out.printf("killing the shard coordinator's compute node, %s, under the mix...%n", victim.address());
            } else {
                out.printf("(the node to kill is stopped inside this JVM: %s)%n", noProcess != null ? noProcess
                        : "the process did not come up");
                // The youngest: the oldest runs the shard coordinator, whose move would be measured too.
                victim = computeSystems.stream().max(java.util.Comparator.comparing(
                        node -> org.apache.pekko.cluster.typed.Cluster.get(node).selfMember(),
                        org.apache.pekko.cluster.Member.ageOrdering())).orElseThrow();
            }
            String address = victim.address().toString();
            List<Integer> held = ClusterMember.computeStatuses(clientSystem).stream().filter(s -> s.address().equals(address))
                    .findFirst().map(ComputeNode.Status::partitionsHeld).orElse(List.of());
            if (held.isEmpty()) {
                throw new IllegalStateException("the compute node to kill, " + address + ", holds no partition");
            }
            out.printf("killing compute node %s under the mix (its actor system stops without leaving the cluster); it holds"
                    + " partitions %s...%n", address, held);
            long killed = System.nanoTime();
            killAt = (killed - mixStart) / 1e9;
            victim.terminate();
            DemoCluster.removeSame(systems, victim);
            DemoCluster.removeSame(computeSystems, victim);
            victim.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
            double coordinatorAgain = Double.NaN;
            // Both waits run from the kill: the partitions are asked meanwhile, not after the coordinator is found.
            java.util.concurrent.CompletableFuture<Double> serving = DemoCluster.partitionsServe(client, table, held, killed,
                    Duration.ofSeconds(90));
            if (killCoordinator) {
                org.apache.pekko.actor.Address next = DemoCluster.awaitCoordinator(clientSystem,
                        computeSystems.stream().map(ActorSystem::address).toList(), Duration.ofSeconds(90));
                coordinatorAgain = (System.nanoTime() - killed) / 1e9;
                out.printf("a new shard coordinator runs on %s %.2f s after the kill%n", next, coordinatorAgain);
            }
            double servedAgain = DemoCluster.awaitServed(serving, Duration.ofSeconds(90));
            out.printf("its %d partitions served again %.2f s after the kill (the downing, the removal, then each new owner"
                    + " replays the partition's redo log; a node stopped inside this JVM announces its end, so its removal waits"
                    + " for the failure detector, where a killed process is found by its hang-up: docs/durability.md)%n",
                    held.size(), servedAgain);
            if (killCoordinator) {
                report.putCoordinatorKill(coordinatorAgain, servedAgain, held.size());
            } else {
                report.putKill(servedAgain, held.size());
            }
            Thread.sleep(1_500);
        }
        long stopAt = System.nanoTime();
        int wholeSeconds = (int) ((stopAt - mixStart) / 1_000_000_000L);
        stop.set(true);
        DemoWorkload.Result duringScaleOut;
        try {
            duringScaleOut = during.get(120, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            throw new IllegalStateException("the mix during the scale-out failed: " + e.getCause(), e.getCause());
        }
        out.printf("rebalance settled %.2f s after the join (each partition's handoff: see the 'handed off' lines)%n", settledAt);
        if (timelineFile != null) {
            timelineReading = report.writeTimeline(timelineFile, perTick, (joinStart - mixStart) / 1e9,
                    (joinStart - mixStart) / 1e9 + settledAt, leaveAt, leftAt, (stopAt - mixStart) / 1e9);
        }
        if (!Double.isNaN(killAt)) {
            out.printf("a compute node was killed at %.1f s of the mix%n", killAt);
        }
        report.printChanges(perSecond, longest, (joinStart - mixStart) / 1e9, (joinStart - mixStart) / 1e9 + settledAt, leaveAt, leftAt,
                killAt, wholeSeconds, joinRounds, leaveRounds);
        if (duringScaleOut.ops() == 0) {
            throw new IllegalStateException("no operation completed during the scale-out");
        }
        out.println("partition map after scale-out:");
        report.printMap(settled);

        long mismatches = DemoWorkload.verify(client, n, settings.demoInFlight(), written);
        if (mismatches == 0) {
            out.printf("verified: all %,d keys hold their last written value%n", n);
            return 0;
        }
        out.printf("FAILED: %,d keys do not hold their last written value%n", mismatches);
        return 1;
    }

    /**
     * The engine alone ({@code dex bench}) on the cluster's configuration: the same number of keys, workload,
     * uniform keys, cache per compute node, partitions and compute nodes, one thread per worker thread of the
     * cluster, with the redo log and group commit the cluster uses. Its throughput in operations per second.
     */
    double engineBaseline(Config base, DexSettings settings, long n) {
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
}
