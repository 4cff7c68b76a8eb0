package dev.dex.cluster;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.pekko.actor.typed.ActorSystem;

import com.typesafe.config.Config;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.Fabrics;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.Partitioning;
import dev.dex.core.tree.BulkLoader;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;
import me.tongfei.progressbar.ProgressBar;

/**
 * {@code dex bench --cluster --processes}: the cluster bench as a deployment runs, every node in a JVM of its own on this
 * host. This JVM is the client (and runs the engine alone first, unless {@code --baseline off}); it starts the memory
 * node, bulk-loads it through the fabric ({@code shm} or {@code tcp}: memory another process can reach), stores the
 * partition table at the leaves' fences, starts the compute nodes, waits until the partitions have settled on them, and
 * measures the demo's mix through the client actor. Each node collects its own garbage and has its own threads, so the
 * figures are not those of four actor systems sharing one heap, as in the in-JVM bench.
 *
 * <p>Nodes log into a directory of the run (printed), and are stopped when the bench ends, fails or is interrupted
 * ({@link NodeProcesses}).
 */
final class ProcessBench {
    private static final Duration NODE_START = Duration.ofSeconds(90);

    private ProcessBench() {
    }

    /** What the bench takes from {@code dex bench --cluster}'s options. */
    record Options(long keys, int putPercent, int scanPercent, int computeNodes, int partitions, String cacheSize, int warmup, int seconds,
                   int inFlight, long rate, int traceSample, double engine, boolean killCoordinator) {
    }

    /** Fails clearly when the bench cannot run with these settings: before anything is measured. */
    static void check(Config base, DexSettings settings) {
        String transport = settings.fabric().transport();
        if (!transport.equals("shm") && !transport.equals("tcp")) {
            throw new IllegalArgumentException("--processes needs --fabric shm or tcp (memory another process reaches), not " + transport);
        }
        if (base.getBoolean("dex.security.tls")) {
            throw new IllegalArgumentException("--processes runs its nodes without TLS; turn dex.security.tls off for the bench");
        }
    }

    static int run(PrintWriter out, Config base, DexSettings settings, Options options, DemoReport report, String fabricName)
            throws Exception {
        check(base, settings);
        String transport = settings.fabric().transport();
        Path shm = Path.of("/dev/shm/" + fabricName);
        Path logs = Files.createTempDirectory("dex-bench-processes-");
        List<ActorSystem<?>> systems = new ArrayList<>();
        try (NodeProcesses nodes = new NodeProcesses(logs, jvmFlags(), shm)) {
            // The client leaves while the nodes still run (closing the nodes stops them after this block).
            try {
                out.printf("DEX on Pekko cluster bench, one process per node: 1 memory node, %d compute node(s), and this JVM as the"
                        + " client; fabric %s; plain TCP on loopback; node logs in %s%n", options.computeNodes(), transport, logs);
                long n = options.keys();
                List<String> common = nodeArguments(base, transport, shm);
                List<String> memoryArguments = new ArrayList<>(List.of("memory-node", "--server-id", "0", "--region-size",
                        base.getBytes("dex.memory.region-size") / (1 << 20) + "MiB"));
                memoryArguments.addAll(common);
                String seed = nodes.start("memory-0", memoryArguments).awaitUp(NODE_START);

                ActorSystem<DexClient.Command> clientSystem = DexNodes.client(DexNodes.nodeConfig(base, "client", "127.0.0.1", 0,
                        List.of(seed)), settings);
                systems.add(clientSystem);
                DemoCluster.awaitUp(systems, NODE_START);
                long loadStart = System.nanoTime();
                PartitionTable table;
                Fabric loaderFabric = Fabrics.open(settings.fabric());
                try (RemoteMemory loader = DemoCluster.awaitFormatted(clientSystem, loaderFabric)) {
                    try (ProgressBar bar = DemoWorkload.bar("load", n)) {
                        BulkLoader.load(loader, 0.8, DemoWorkload.entries(n), bar::stepTo);
                    }
                    table = Partitioning.fromLeafFences(loader, options.partitions());
                    PartitionTable.store(loader, table);
                } finally {
                    loaderFabric.close();
                }
                out.printf("bulk-loaded %,d keys in %.2f s; %d partitions at leaf fences%n", n, (System.nanoTime() - loadStart) / 1e9,
                        options.partitions());

                List<NodeProcesses.Node> computeNodes = new ArrayList<>();
                Map<String, NodeProcesses.Node> byAddress = new java.util.HashMap<>();
                for (int c = 0; c < options.computeNodes(); c++) {
                    List<String> arguments = new ArrayList<>(List.of("compute-node", "--cache-size", options.cacheSize(), "--seed", seed));
                    arguments.addAll(common);
                    NodeProcesses.Node node = nodes.start("compute-" + c, arguments);
                    computeNodes.add(node);
                    if (options.computeNodes() > TOGETHER) {
                        // One at a time: 4 or 8 JVMs starting together on a 2-core host starved each other's heartbeats,
                        // and the split-brain resolver downed them all before the cluster formed.
                        byAddress.put("pekko://" + DexNodes.SYSTEM + "@" + node.awaitUp(NODE_START), node);
                        DemoCluster.awaitComputeNodes(clientSystem, c + 1, NODE_START); // in the cluster, not only started
                    }
                }
                for (NodeProcesses.Node node : computeNodes) {
                    if (!byAddress.containsValue(node)) {
                        byAddress.put("pekko://" + DexNodes.SYSTEM + "@" + node.awaitUp(NODE_START), node);
                    }
                }
                DemoCluster.awaitComputeNodes(clientSystem, options.computeNodes(), NODE_START);
                DexClientApi client = new DexClientApi(clientSystem, clientSystem, settings.requestTimeout());
                long settleStart = System.nanoTime();
                DemoCluster.awaitRebalance(client, clientSystem, table, options.partitions(), n * DemoWorkload.KEY_SPACING,
                        options.computeNodes(), NODE_START);
                out.printf("partitions settled on %d compute node process(es) in %.2f s%n", options.computeNodes(),
                        (System.nanoTime() - settleStart) / 1e9);
                Map<Long, Long> written = new ConcurrentHashMap<>();
                if (options.warmup() > 0) {
                    out.printf("warming up for %d s (not measured)%n", options.warmup());
                    DemoWorkload.mix(client, n, options.putPercent(), options.scanPercent(), options.warmup(), options.inFlight(),
                            options.rate(), written);
                }
                report.measure(clientSystem, client, options.traceSample(), settings, n, options.engine(),
                        () -> DemoWorkload.mix(client, n, options.putPercent(), options.scanPercent(), options.seconds(),
                                options.inFlight(), options.rate(), written));
                if (options.killCoordinator()) {
                    killCoordinator(out, report, clientSystem, client, table, byAddress, options, written);
                }
                return 0;
            } finally {
                DemoCluster.leaveInOrder(systems);
            }
        } finally {
            DemoCluster.deleteFlatDirectory(shm);
        }
    }

    /**
     * Kills the process of the compute node that runs the shard coordinator with SIGKILL under the mix, and prints (and
     * puts into --json) how long until another node ran the coordinator and until every partition it held served again,
     * with the operations of each second from the kill on.
     */
    private static void killCoordinator(PrintWriter out, DemoReport report, ActorSystem<?> clientSystem, DexClientApi client,
            PartitionTable table, Map<String, NodeProcesses.Node> byAddress, Options options, Map<Long, Long> written) throws Exception {
        List<org.apache.pekko.actor.Address> up = DemoCluster.upComputeNodes(clientSystem);
        org.apache.pekko.actor.Address coordinator = DemoCluster.awaitCoordinator(clientSystem, up, Duration.ofSeconds(10));
        NodeProcesses.Node victim = byAddress.get(coordinator.toString());
        if (victim == null) {
            throw new IllegalStateException("the shard coordinator runs on " + coordinator + ", not a compute node of this bench");
        }
        List<Integer> held = ClusterMember.computeStatuses(clientSystem).stream().filter(s -> s.address().equals(coordinator.toString()))
                .findFirst().map(dev.dex.actors.node.ComputeNode.Status::partitionsHeld).orElse(List.of());
        if (held.isEmpty()) {
            throw new IllegalStateException("the shard coordinator's compute node, " + coordinator + ", holds no partition:"
                    + " its kill would time nothing but the coordinator");
        }
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicLongArray perSecond = new java.util.concurrent.atomic.AtomicLongArray(KILL_MIX_SECONDS);
        java.util.concurrent.FutureTask<DemoWorkload.Result> mix = new java.util.concurrent.FutureTask<>(() -> DemoWorkload.mix(client,
                options.keys(), options.putPercent(), options.scanPercent(), KILL_MIX_SECONDS, options.inFlight(), options.rate(), written,
                stop, perSecond, null, null, "mix through the kill (s)"));
        Thread mixer = new Thread(mix, "bench-mix-through-kill");
        mixer.setDaemon(true);
        long mixStart = System.nanoTime();
        mixer.start();
        long killed;
        double coordinatorAgain;
        double servedAgain;
        org.apache.pekko.actor.Address next;
        try {
            Thread.sleep(2_000);
            out.printf("killing the shard coordinator's compute node %s (pid %d) with SIGKILL under the mix; it holds %d"
                    + " partitions...%n", coordinator, victim.process().pid(), held.size());
            killed = System.nanoTime();
            victim.process().destroyForcibly();
            // Both waits run from the kill: the partitions are asked meanwhile, not after the coordinator is found.
            java.util.concurrent.CompletableFuture<Double> serving = DemoCluster.partitionsServe(client, table, held, killed,
                    NODE_START);
            List<org.apache.pekko.actor.Address> others = up.stream().filter(a -> !a.equals(coordinator)).toList();
            next = DemoCluster.awaitCoordinator(clientSystem, others, NODE_START);
            coordinatorAgain = (System.nanoTime() - killed) / 1e9;
            servedAgain = DemoCluster.awaitServed(serving, NODE_START);
            Thread.sleep(1_000);
        } finally {
            // Also when a wait failed: no mix goes on against a client that is about to stop.
            stop.set(true);
        }
        mix.get(60, java.util.concurrent.TimeUnit.SECONDS);
        int from = (int) ((killed - mixStart) / 1_000_000_000L);
        int to = Math.min(KILL_MIX_SECONDS, (int) Math.ceil((killed - mixStart) / 1e9 + servedAgain) + 1);
        List<Long> seconds = new ArrayList<>();
        for (int i = 0; i < to; i++) {
            seconds.add(perSecond.get(i));
        }
        out.printf("a new shard coordinator ran on %s %.2f s after the kill; its %d partitions served again %.2f s after the"
                + " kill; operations per second (the kill in second %d): %s%n", next, coordinatorAgain, held.size(), servedAgain, from,
                seconds.stream().map(c -> String.format("%,d", c)).toList());
        report.putCoordinatorKill(coordinatorAgain, servedAgain, held.size());
        report.write();
    }

    /** Compute node processes started together; more start one after the other, each once the one before is up. */
    private static final int TOGETHER = 2;

    /** The longest the mix through the coordinator's kill may run. */
    private static final int KILL_MIX_SECONDS = 120;

    /**
     * A node process's arguments besides its command and role's own: loopback, any port, the fabric, and the settings of
     * {@code base} that every node of one tree must share.
     */
    static List<String> nodeArguments(Config base, String transport, Path shm) {
        List<String> arguments = new ArrayList<>(List.of("--host", "127.0.0.1", "--port", "0", "--fabric", transport,
                "--shm-dir", shm.toString()));
        // The failure detection too: a node process that joins the demo's crowded JVM (DemoKill) must judge it, and be
        // judged, as that JVM's nodes are (DemoCluster.forCrowdedJvm).
        List<String> shared = new ArrayList<>(List.of("dex.tree.partitions", "dex.tree.partition-key-min",
                "dex.tree.partition-key-max", "dex.compute.redo-log", "dex.compute.worker-threads", DemoCluster.HEARTBEAT_PAUSE,
                DemoCluster.STABLE_AFTER));
        shared.addAll(new java.util.TreeSet<>(DemoCluster.PEKKO_TICKS.keySet()));
        for (String key : shared) {
            arguments.addAll(List.of("--set", key + "=" + base.getValue(key).render()));
        }
        return arguments;
    }

    /**
     * The node JVMs' flags: those {@code bin/dex} gives every JVM, this JVM's collector and heap sizes, and its
     * {@code -Dpekko.*} and {@code -Ddex.*} settings and its {@code -Dconfig.file}, {@code config.resource} or
     * {@code config.url} (from {@code DEX_JAVA_OPTS}), so that a collector or a setting tried
     * on the bench applies to its nodes too. The nodes run on this JVM's Java ({@code java.home}).
     */
    static List<String> jvmFlags() {
        List<String> flags = new ArrayList<>(List.of("-Xss4m", "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED"));
        boolean collector = false;
        for (String argument : java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            boolean gc = argument.startsWith("-XX:+Use") && argument.endsWith("GC");
            if (gc || argument.startsWith("-Xmx") || argument.startsWith("-Xms") || argument.startsWith("-Xmn")
                    || argument.startsWith("-XX:+ZGenerational")) {
                flags.add(argument);
                collector |= gc;
            }
        }
        if (!collector) {
            flags.add("-XX:+UseParallelGC");
        }
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("pekko.") || name.startsWith("dex.") || name.equals("config.file") || name.equals("config.resource")
                    || name.equals("config.url")) {
                flags.add("-D" + name + "=" + System.getProperty(name));
            }
        }
        return flags;
    }
}
