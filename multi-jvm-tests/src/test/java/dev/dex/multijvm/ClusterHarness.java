package dev.dex.multijvm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.ComputeNode;
import dev.dex.cluster.DexNodes;
import dev.dex.cluster.DexSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.Partitioning;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.shm.ShmFabric;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * A real DEX cluster for one test: memory and compute nodes as separate JVMs ({@link NodeProcess}) sharing
 * regions through the shm fabric in a directory of their own under {@code /dev/shm}, and the test JVM as
 * the client node. Register it with {@code @RegisterExtension}; after each test, passed or failed, it
 * stops the client, ends every node JVM (SIGTERM, then SIGKILL after a grace period) and deletes the shm
 * directory. A JVM shutdown hook kills the nodes if the test JVM itself is stopped.
 *
 * <p>Node logs go to {@code target/it-logs/<test class>/<node>.log}. The settings given to the
 * constructor ({@code key=value}) go to every node as {@code --set} and into the client's configuration.
 *
 * <p>Keys: the bulk load puts keys {@code i * KEY_SPACING} for i in [1, n] with value {@link #loadedValue};
 * the gaps leave room for inserts.
 */
final class ClusterHarness implements BeforeEachCallback, AfterEachCallback {
    static final int PARTITIONS = 16;
    static final long KEY_SPACING = 16;
    static final Duration NODE_START = Duration.ofSeconds(60);
    /** Cleanup's grace after SIGTERM: nothing is asserted after it (graceful stops are tested with {@link NodeProcess#stopGracefully}). */

    private static final Pattern TCP_EXPORT = Pattern.compile("memory node (\\d+) exported \\d+ bytes over tcp at (\\S+)");

    private final List<String> settings;
    private final String transport;
    /** Mutual TLS: every node, this JVM's fabric and its client use the key store of a CA made per test. */
    private final boolean tls;
    /** With {@link #tls}: the cluster's key store ({@code dex certs}' files beside it), and a stranger's of another CA. */
    private Path keyStore;
    private Path strangerKeyStore;
    private String testName;
    private Path logDirectory;
    private Path shmDirectory;
    private Fabric fabric;
    /** tcp: each node's own shm directory, which must never come to exist. */
    private final Map<String, Path> absentShmDirectories = new LinkedHashMap<>();
    /** Read by the shutdown hook's thread too. */
    private final List<NodeProcess> nodes = new CopyOnWriteArrayList<>();
    private final List<RemoteMemory> connections = new ArrayList<>();
    private final List<AutoCloseable> resources = new ArrayList<>();
    private NodeProcess seed;
    private ActorSystem<DexClient.Command> clientSystem;
    private DexClientApi client;
    private PartitionTable table;
    private Thread killOnExit;
    private long started;

    /** A cluster on the shm fabric; {@code settings}: {@code key=value} settings for every node and the client. */
    ClusterHarness(String... settings) {
        this("shm", settings);
    }

    private ClusterHarness(String transport, String... settings) {
        this(transport, false, settings);
    }

    private ClusterHarness(String transport, boolean tls, String... settings) {
        this(transport, tls, false, settings);
    }

    private ClusterHarness(String transport, boolean tls, boolean keepRegions, String... settings) {
        this(transport, tls, keepRegions, 0, settings);
    }

    private ClusterHarness(String transport, boolean tls, boolean keepRegions, int hosts, String... settings) {
        this.transport = transport;
        this.tls = tls;
        this.keepRegions = keepRegions;
        this.hostCount = hosts;
        this.settings = List.of(settings);
    }

    /** With {@link #tcpOnHosts}: how many emulated hosts; each node started takes the next one. */
    private final int hostCount;
    private NetworkNamespaces hosts;
    private int nextHost;

    /**
     * A cluster on the tcp fabric whose nodes each run on an emulated host of their own ({@link NetworkNamespaces}),
     * so that a test can cut one off from the others ({@link #cut}); the test JVM, the client, is on the bridge.
     * Where namespaces cannot be made (not root), the test is skipped with the reason.
     */
    static ClusterHarness tcpOnHosts(int hosts, String... settings) {
        return new ClusterHarness("tcp", false, false, hosts, settings);
    }

    /** Cuts {@code node}'s emulated host off from every other one and from the client ({@link #tcpOnHosts} only). */
    void cut(NodeProcess node) {
        hosts.cut(hostOf(node));
        log(node + " cut off");
    }

    /** Plugs {@code node}'s emulated host back in. */
    void heal(NodeProcess node) {
        hosts.heal(hostOf(node));
        log(node + " plugged back in");
    }

    private NetworkNamespaces.Host hostOf(NodeProcess node) {
        for (int i = 0; i < hosts.size(); i++) {
            if (hosts.host(i).address().equals(node.host())) {
                return hosts.host(i);
            }
        }
        throw new IllegalArgumentException(node + " is on no emulated host of this test");
    }

    /** tcp memory nodes keep their regions in files of a directory of the test's own ({@code dex.fabric.tcp.region-directory}). */
    private final boolean keepRegions;
    private Path regionDirectory;

    /**
     * A cluster on the tcp fabric whose memory nodes keep their regions in memory-mapped files of a directory made
     * for the test (under {@code /dev/shm}, deleted at cleanup): a memory node started again reattaches to its data.
     */
    static ClusterHarness tcpKeepingRegions(String... settings) {
        return new ClusterHarness("tcp", false, true, settings);
    }

    /**
     * As {@link #tcpKeepingRegions}, with a region directory per memory node (named after it): replicas of one server on
     * this one host each keep a region file of their own, and a node {@link #restart}ed reattaches to its own.
     */
    static ClusterHarness tcpKeepingRegionsPerNode(String... settings) {
        ClusterHarness harness = new ClusterHarness("tcp", false, true, settings);
        harness.regionDirectoryPerNode = true;
        return harness;
    }

    /** {@link #tcpKeepingRegionsPerNode}. */
    private boolean regionDirectoryPerNode;

    /**
     * A cluster on the tcp fabric with mutual TLS everywhere: a CA and key stores are made per test with
     * {@code dex certs}, every node starts with {@code --tls}, and this JVM's fabric and client use them too.
     */
    static ClusterHarness tls(String... settings) {
        return new ClusterHarness("tcp", true, settings);
    }

    /** The key store of a node whose certificate another CA signed ({@link #tls} only). */
    Path strangerKeyStore() {
        return strangerKeyStore;
    }

    /**
     * A cluster on the tcp fabric: memory nodes serve their regions over loopback TCP and share no memory with
     * anyone. To prove it, each node JVM gets an shm directory of its own that does not exist, and cleanup fails
     * the test if any of them was created.
     */
    static ClusterHarness tcp(String... settings) {
        return new ClusterHarness("tcp", settings);
    }

    /** The certificates of every {@link #tls} test in this JVM, made once: {@code dex certs} runs a keytool per file. */
    private static Path certificates;

    /**
     * Two CAs, each with a node's key store ({@code cluster/node.p12} and {@code other/stranger.p12}), made by
     * {@code dex certs} the first time a test of this JVM asks, under {@code target/it-certs} (deleted first).
     */
    private static synchronized Path certificates() throws IOException {
        if (certificates == null) {
            Path certs = Path.of(System.getProperty("basedir", "."), "target", "it-certs");
            deleteRecursively(certs);
            for (String[] ca : new String[][] {{"cluster", "node"}, {"other", "stranger"}}) {
                int exit = dev.dex.cluster.DexCli.run("certs", "--out", certs.resolve(ca[0]).toString(), "--nodes", ca[1]);
                if (exit != 0) {
                    throw new IllegalStateException("dex certs exited with " + exit);
                }
            }
            certificates = certs;
        }
        return certificates;
    }

    @Override
    public void beforeEach(ExtensionContext context) throws IOException {
        testName = context.getRequiredTestClass().getSimpleName();
        logDirectory = Path.of(System.getProperty("basedir", "."), "target", "it-logs", testName);
        deleteRecursively(logDirectory);
        Files.createDirectories(logDirectory);
        shmDirectory = Path.of("/dev/shm", "dex-it-" + testName + "-" + UUID.randomUUID());
        regionDirectory = keepRegions ? Path.of(shmDirectory + "-regions") : null;
        if (hostCount > 0) {
            try {
                hosts = NetworkNamespaces.create(hostCount);
            } catch (NetworkNamespaces.Unavailable unavailable) {
                org.junit.jupiter.api.Assumptions.abort("emulated hosts are not available here: " + unavailable.getMessage());
            }
        }
        if (tls) {
            Path certs = certificates();
            keyStore = certs.resolve("cluster/node.p12");
            strangerKeyStore = certs.resolve("other/stranger.p12");
            fabric = new TcpFabric(dev.dex.rdma.tcp.TcpSettings.DEFAULTS, 0, null, dev.dex.rdma.tcp.TcpTls.fromStores(keyStore,
                    keyStore.resolveSibling("truststore.p12"), Files.readAllLines(keyStore.resolveSibling("password")).get(0).toCharArray()));
        } else {
            fabric = transport.equals("tcp") ? new TcpFabric() : new ShmFabric(shmDirectory);
        }
        killOnExit = new Thread(() -> {
            nodes.forEach(node -> {
                if (node.isAlive()) {
                    try {
                        node.kill();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            });
            if (hosts != null) {
                hosts.close();
            }
        }, "dex-it-kill-nodes");
        Runtime.getRuntime().addShutdownHook(killOnExit);
        started = System.nanoTime();
        log("logs in " + logDirectory.toAbsolutePath().normalize() + (transport.equals("tcp") ? ", tcp fabric"
                : ", shm fabric in " + shmDirectory));
    }

    @Override
    public void afterEach(ExtensionContext context) throws Exception {
        log("cleaning up" + context.getExecutionException().map(e -> " after a failure: " + e).orElse(""));
        try {
            close();
        } finally {
            log("done in " + seconds() + " s");
        }
    }

    // ---- nodes ----

    /**
     * Starts memory server {@code serverId} (region 64 MiB) and waits until it is up. The first memory
     * node started is every other node's seed; server 0 formats the tree.
     */
    NodeProcess startMemoryNode(int serverId, String... extra) throws InterruptedException {
        NodeProcess node = startMemoryNodeAsync(serverId, extra);
        node.awaitPort(NODE_START);
        if (seed == null) {
            seed = node;
        }
        log(node + " up");
        return node;
    }

    /** Starts memory server {@code serverId} (region 64 MiB) without waiting for it; a seed must be running. */
    NodeProcess startMemoryNodeAsync(int serverId, String... extra) {
        return startMemoryNodeAsync("memory-" + serverId, serverId, extra);
    }

    /** As {@link #startMemoryNodeAsync(int, String...)}, named {@code name} (replicas of one server need names of their own). */
    NodeProcess startMemoryNodeAsync(String name, int serverId, String... extra) {
        List<String> arguments = new ArrayList<>(List.of("memory-node", "--server-id", Integer.toString(serverId),
                "--region-size", "64MiB"));
        arguments.addAll(Arrays.asList(extra));
        return start(name, arguments);
    }

    /** As {@link #startMemoryNode(int, String...)}, named {@code name}. */
    NodeProcess startMemoryNode(String name, int serverId, String... extra) throws InterruptedException {
        NodeProcess node = startMemoryNodeAsync(name, serverId, extra);
        node.awaitPort(NODE_START);
        if (seed == null) {
            seed = node;
        }
        log(node + " up");
        return node;
    }

    /**
     * A connection of this JVM to the regions {@code nodes} serve, each for the memory server it exported (a replica
     * group's primary: a backup serves no client), once server 0 is formatted; the harness takes its partition table ({@link #awaitFormatted}).
     */
    RemoteMemory awaitFormattedOn(NodeProcess... nodes) throws InterruptedException {
        return awaitFormatted(() -> {
            Map<Integer, String> endpoints = new HashMap<>();
            for (NodeProcess node : nodes) {
                Matcher export = TCP_EXPORT.matcher(node.logText());
                if (!export.find()) {
                    throw new IllegalArgumentException(node + " has not exported its region yet");
                }
                endpoints.put(Integer.parseInt(export.group(1)), export.group(2));
            }
            return fabric.connect(endpoints);
        }, Arrays.toString(nodes) + "'s regions");
    }

    // ---- replica groups (dex.memory.replicas > 1) ----

    /** The memory node that says it is primary of view {@code view}. */
    static NodeProcess awaitPrimary(List<NodeProcess> nodes, long view) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        while (System.nanoTime() < deadline) {
            for (NodeProcess node : nodes) {
                if (node.logText().contains("this replica is primary of view " + view)) {
                    return node;
                }
            }
            Thread.sleep(50);
        }
        throw new AssertionError("no memory node became primary of view " + view);
    }

    /** The newest view of at least {@code atLeast} that {@code primary} installed without backups, once there is one. */
    static long awaitViewWithoutBackups(NodeProcess primary, long atLeast, Duration max) throws InterruptedException {
        java.util.regex.Pattern installed = java.util.regex.Pattern.compile("view (\\d+) installed, backups \\[\\]");
        long deadline = System.nanoTime() + max.toNanos();
        while (true) {
            long newest = -1;
            java.util.regex.Matcher found = installed.matcher(primary.logText());
            while (found.find()) {
                newest = Math.max(newest, Long.parseLong(found.group(1)));
            }
            if (newest >= atLeast) {
                return newest;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(primary + " installed no view >= " + atLeast + " without backups; its log:\n"
                        + primary.logTail());
            }
            Thread.sleep(100);
        }
    }

    /** Starts compute nodes (cache 8 MiB) named {@code names} at once and waits until each is up. */
    List<NodeProcess> startComputeNodes(List<String> names, String... extra) throws InterruptedException {
        List<NodeProcess> started = new ArrayList<>();
        for (String name : names) {
            List<String> arguments = new ArrayList<>(List.of("compute-node", "--cache-size", "8MiB"));
            arguments.addAll(Arrays.asList(extra));
            started.add(start(name, arguments));
        }
        for (NodeProcess node : started) {
            node.awaitPort(NODE_START);
        }
        log(started + " up");
        return started;
    }

    /**
     * Starts a compute node as the cluster's first node and seed, before any memory node (it waits for them),
     * and waits until it is up.
     */
    NodeProcess startSeedComputeNode(String name) throws InterruptedException {
        if (seed != null) {
            throw new IllegalStateException("the cluster already has a seed: " + seed);
        }
        NodeProcess node = start(name, List.of("compute-node", "--cache-size", "8MiB"));
        node.awaitPort(NODE_START);
        seed = node;
        log(node + " up, the seed");
        return node;
    }

    NodeProcess startComputeNode(String name, String... extra) throws InterruptedException {
        return startComputeNodes(List.of(name), extra).get(0);
    }

    /** In the extra arguments of a {@link #tls} cluster's node: start it without TLS. */
    static final String PLAIN = "(plain)";

    /** Starts a compute node without waiting for it to come up (it may never: a node the cluster refuses). */
    NodeProcess startComputeNodeAsync(String name, String... extra) {
        List<String> arguments = new ArrayList<>(List.of("compute-node", "--cache-size", "8MiB"));
        arguments.addAll(Arrays.asList(extra));
        return start(name, arguments);
    }

    private NodeProcess start(String name, List<String> command) {
        List<String> arguments = new ArrayList<>(command);
        Path nodeShm = shmDirectory;
        if (transport.equals("tcp")) {
            nodeShm = Path.of(shmDirectory + "-" + name + "-must-not-exist");
            absentShmDirectories.put(name, nodeShm);
        }
        String host = "127.0.0.1";
        List<String> prefix = List.of();
        if (hosts != null) {
            if (nextHost == hosts.size()) {
                throw new IllegalStateException("all " + hosts.size() + " emulated hosts of this test are taken");
            }
            NetworkNamespaces.Host emulated = hosts.host(nextHost++);
            host = emulated.address();
            prefix = emulated.prefix();
        }
        arguments.addAll(List.of("--host", host, "--port", "0", "--fabric", transport, "--shm-dir", nodeShm.toString()));
        if (tls && !command.contains("--tls") && !command.contains(PLAIN)) {
            arguments.addAll(List.of("--tls", keyStore.toString()));
        }
        arguments.remove(PLAIN);
        if (seed != null) {
            // The first node, or, once a test killed it, a node still running (a replacement must find the cluster).
            NodeProcess contact = seed.isAlive() ? seed : nodes.stream().filter(NodeProcess::isAlive).findFirst().orElse(seed);
            arguments.addAll(List.of("--seed", contact.seed()));
        }
        if (regionDirectory != null && command.get(0).equals("memory-node")) {
            Path directory = regionDirectoryPerNode ? regionDirectory.resolve(name) : regionDirectory;
            arguments.addAll(List.of("--set", "dex.fabric.tcp.region-directory=\"" + directory + "\""));
        }
        if (settings.stream().noneMatch(setting -> setting.startsWith("dex.management"))) {
            // No test here asks a node's HTTP endpoint (OperatorEndpointTest does); a node binds it before it reports up,
            // 0.5-1.6 s of each start on two busy cores.
            arguments.addAll(List.of("--set", "dex.management.enabled=off"));
        }
        for (String setting : settings) {
            arguments.addAll(List.of("--set", setting));
        }
        NodeProcess node = NodeProcess.start(name, logDirectory, arguments, prefix, host);
        nodes.add(node);
        return node;
    }

    /**
     * Starts {@code node} again, as {@code name}, with the arguments it was started with (its seed among them, or none
     * for the cluster's first node), and waits until it is up.
     */
    NodeProcess restart(NodeProcess node, String name) throws InterruptedException {
        NodeProcess again = NodeProcess.start(name, logDirectory, node.arguments(), node.prefix(), node.host());
        nodes.add(again);
        again.awaitPort(NODE_START);
        log(again + " up, started again with the arguments of " + node);
        return again;
    }

    /** The node listening on the port of {@code address} ("pekko://dex@127.0.0.1:port"). */
    NodeProcess nodeAt(String address) {
        for (NodeProcess node : nodes) {
            if (address.endsWith(":" + node.port())) {
                return node;
            }
        }
        throw new IllegalArgumentException("no node of this test at " + address);
    }

    // ---- memory: load over the fabric, before compute nodes start ----

    /**
     * A connection of this JVM to memory servers {@code serverIds}, once each has exported its region and
     * server 0 has formatted the tree (and stored its initial partition table). Over tcp, a memory node's
     * endpoint is read from its log line "memory node N exported ... over tcp at host:port".
     */
    RemoteMemory awaitFormatted(int... serverIds) throws InterruptedException {
        return awaitFormatted(() -> transport.equals("tcp") ? fabric.connect(tcpEndpoints(serverIds)) : fabric.connect(serverIds),
                "memory servers " + Arrays.toString(serverIds));
    }

    /**
     * A connection {@code connect} opens (it throws {@link IllegalArgumentException} while a region is not served yet),
     * once server 0 has formatted the tree; the harness takes the partition table it stored.
     */
    private RemoteMemory awaitFormatted(java.util.function.Supplier<RemoteMemory> connect, String what) throws InterruptedException {
        long deadline = System.nanoTime() + NODE_START.toNanos();
        while (true) {
            try {
                RemoteMemory memory = connect.get();
                try {
                    PartitionTable stored = PartitionTable.load(memory);
                    if (table == null) {
                        table = stored; // the formatted table, until a bulk load replaces it
                    }
                    connections.add(memory);
                    return memory;
                } catch (IllegalStateException notYet) {
                    memory.close();
                }
            } catch (IllegalArgumentException notExported) {
                // a memory node has not exported its region yet
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(what + " not formatted within " + NODE_START.toSeconds() + " s");
            }
            Thread.sleep(20);
        }
    }

    /** Each server's tcp endpoint as its memory node logged it; a server not logged yet is left out. */
    private Map<Integer, String> tcpEndpoints(int... serverIds) {
        Map<Integer, String> logged = new HashMap<>();
        for (NodeProcess node : nodes) {
            Matcher export = TCP_EXPORT.matcher(node.logText());
            if (export.find()) {
                logged.put(Integer.parseInt(export.group(1)), export.group(2));
            }
        }
        Map<Integer, String> endpoints = new HashMap<>();
        for (int id : serverIds) {
            if (!logged.containsKey(id)) {
                throw new IllegalArgumentException("memory node " + id + " has not logged its tcp endpoint yet");
            }
            endpoints.put(id, logged.get(id));
        }
        return endpoints;
    }

    /**
     * Bulk-loads keys {@code i * KEY_SPACING} for i in [1, n], nodes filled to 80%, and stores
     * {@link #PARTITIONS} partitions at leaf fences, the table compute nodes read when they open the tree.
     */
    BulkLoader.Result bulkLoad(RemoteMemory memory, long n) {
        return bulkLoad(memory, n, 0.8);
    }

    /** {@link #bulkLoad(RemoteMemory, long)} with nodes filled to {@code fill} (1.0: the first insert into a node splits it). */
    BulkLoader.Result bulkLoad(RemoteMemory memory, long n, double fill) {
        BulkLoader.Result result = BulkLoader.load(memory, fill, loadedEntries(n), loaded -> { });
        table = Partitioning.fromLeafFences(memory, PARTITIONS);
        PartitionTable.store(memory, table);
        log("bulk-loaded " + result.entries() + " keys: height " + result.height() + ", " + result.leaves() + " leaves, "
                + result.innerNodes() + " inner nodes; partitions " + table);
        return result;
    }

    static long key(long i) {
        return i * KEY_SPACING;
    }

    static long loadedValue(long key) {
        return key + 1;
    }

    private static SortedEntries loadedEntries(long n) {
        return new SortedEntries() {
            private long i;

            @Override
            public boolean next() {
                return ++i <= n;
            }

            @Override
            public long key() {
                return ClusterHarness.key(i);
            }

            @Override
            public long value() {
                return loadedValue(key());
            }
        };
    }

    PartitionTable table() {
        return table;
    }

    // ---- the client: this JVM joins as a client node ----

    /** Starts the client node in this JVM, joined to the seed, and returns its Java facade. */
    DexClientApi startClient() {
        Config overrides = ConfigFactory.empty();
        for (String setting : settings) {
            overrides = ConfigFactory.parseString(setting).withFallback(overrides);
        }
        if (tls) {
            overrides = overrides.withValue("dex.security.tls", ConfigValueFactory.fromAnyRef(true))
                    .withValue("dex.security.key-store", ConfigValueFactory.fromAnyRef(keyStore.toString()))
                    .withValue("dex.security.trust-store", ConfigValueFactory.fromAnyRef(keyStore.resolveSibling("truststore.p12").toString()))
                    .withValue("dex.security.password-file", ConfigValueFactory.fromAnyRef(keyStore.resolveSibling("password").toString()));
        }
        // Terminated at cleanup after the nodes are gone: without coordinated shutdown it does not try to leave.
        // Nor does it wait the default second for dead nodes to acknowledge its last messages.
        overrides = overrides.withValue("pekko.coordinated-shutdown.run-by-actor-system-terminate", ConfigValueFactory.fromAnyRef("off"))
                .withValue("pekko.remote.artery.advanced.shutdown-flush-timeout", ConfigValueFactory.fromAnyRef("100ms"))
                .withValue("dex.fabric.transport", ConfigValueFactory.fromAnyRef(transport))
                .withValue("dex.fabric.shm-directory", ConfigValueFactory.fromAnyRef(shmDirectory.toString()));
        Config config = DexNodes.nodeConfig(DexNodes.config(overrides), "client", hosts == null ? "127.0.0.1" : hosts.rootAddress(), 0,
                List.of(seed.seed()));
        DexSettings dex = DexSettings.from(config);
        clientSystem = DexNodes.client(config, dex);
        client = new DexClientApi(clientSystem, clientSystem, dex.requestTimeout());
        return client;
    }

    /** Waits until the cluster, as the client sees it, is exactly {@code count} members, all Up. */
    void awaitMembersUp(int count) throws InterruptedException {
        long deadline = System.nanoTime() + NODE_START.toNanos();
        String seen = "";
        while (System.nanoTime() < deadline) {
            List<String> members = new ArrayList<>();
            int up = 0;
            for (Member member : Cluster.get(clientSystem).state().getMembers()) {
                members.add(member.address().getPort().orElse(0) + ":" + member.status());
                if (member.status() == MemberStatus.up()) {
                    up++;
                }
            }
            if (up == count && members.size() == count) {
                log(count + " members up");
                return;
            }
            seen = members.toString();
            Thread.sleep(100);
        }
        throw new AssertionError(count + " members not up within " + NODE_START.toSeconds() + " s; last seen " + seen);
    }

    /**
     * Polls a put through the test's client into every partition of the table (keys between the mix's, so its histories
     * stay exact), all partitions at once, each again 20 ms after a failure, until each has succeeded; returns when the
     * last one did (System.nanoTime()). At once, so that the figure is the slowest partition's, not a sum of round trips.
     */
    long awaitServing(Duration max) throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        int partitions = table.count();
        java.util.concurrent.CompletableFuture<?>[] pending = new java.util.concurrent.CompletableFuture<?>[partitions];
        long[] servedAt = new long[partitions];
        String[] lastFailure = new String[partitions];
        int served = 0;
        while (served < partitions) {
            for (int p = 0; p < partitions; p++) {
                if (servedAt[p] == 0 && pending[p] == null) {
                    long key = table.lowerExclusive(p) + 1;
                    if (key % ClusterHarness.KEY_SPACING == 0) {
                        key++;
                    }
                    int partition = p;
                    pending[p] = client.put(key, key).toCompletableFuture().orTimeout(2, TimeUnit.SECONDS)
                            .handle((ok, failure) -> {
                                if (failure == null) {
                                    servedAt[partition] = System.nanoTime();
                                } else {
                                    lastFailure[partition] = failure.toString();
                                }
                                return null;
                            });
                }
            }
            Thread.sleep(20);
            served = 0;
            for (int p = 0; p < partitions; p++) {
                if (pending[p] != null && pending[p].isDone()) {
                    pending[p] = null; // its handler ran: served, or tried again on the next round
                }
                if (servedAt[p] != 0) {
                    served++;
                }
            }
            if (served < partitions && System.nanoTime() > deadline) {
                for (int p = 0; p < partitions; p++) {
                    if (servedAt[p] == 0) {
                        throw new AssertionError("partition " + p + " did not serve again within " + max.toSeconds() + " s: "
                                + lastFailure[p]);
                    }
                }
            }
        }
        return java.util.Arrays.stream(servedAt).max().orElseThrow();
    }

    /** Waits until no compute node reports a memory server out (their health ticks run every second). */
    void awaitAllBack(Duration max) throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        while (statuses().stream().anyMatch(status -> !status.memoryServersOut().isEmpty())) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("a compute node still reports a memory server out: " + statuses());
            }
            Thread.sleep(200);
        }
    }

    /** Waits until the client no longer sees {@code node} as a member (it was downed and removed, or left). */
    void awaitNotMember(NodeProcess node, Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        while (isMember(node)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(node + " is still a member after " + max.toSeconds() + " s");
            }
            Thread.sleep(100);
        }
    }

    /** Whether the client still sees {@code node} as a member of the cluster, in any status. */
    boolean isMember(NodeProcess node) {
        for (Member member : Cluster.get(clientSystem).state().getMembers()) {
            if (member.address().getPort().orElse(0) == node.port()) {
                return true;
            }
        }
        return false;
    }

    /** Waits until {@code count} compute nodes answer their status (they register once their engine is open). */
    List<ComputeNode.Status> awaitComputeNodes(int count) throws Exception {
        long deadline = System.nanoTime() + NODE_START.toNanos();
        while (System.nanoTime() < deadline) {
            List<ComputeNode.Status> statuses = statuses();
            if (statuses.size() == count) {
                log(count + " compute nodes serving");
                return statuses;
            }
            Thread.sleep(200);
        }
        throw new AssertionError(count + " compute nodes did not answer within " + NODE_START.toSeconds() + " s");
    }

    /**
     * The status of every compute node the Receptionist lists and that answers within 3 s, by address. A
     * crashed node stays listed until it is removed from the cluster; it is left out.
     */
    List<ComputeNode.Status> statuses() throws Exception {
        Receptionist.Listing listing = AskPattern.<Receptionist.Command, Receptionist.Listing>ask(clientSystem.receptionist(),
                r -> Receptionist.find(ComputeNode.KEY, r), Duration.ofSeconds(5), clientSystem.scheduler())
                .toCompletableFuture().get(10, TimeUnit.SECONDS);
        List<CompletableFuture<ComputeNode.Status>> asks = new ArrayList<>();
        for (ActorRef<ComputeNode.Command> node : listing.getServiceInstances(ComputeNode.KEY)) {
            asks.add(AskPattern.<ComputeNode.Command, ComputeNode.Status>ask(node, ComputeNode.GetStatus::new,
                    Duration.ofSeconds(3), clientSystem.scheduler()).toCompletableFuture());
        }
        List<ComputeNode.Status> statuses = new ArrayList<>();
        for (CompletableFuture<ComputeNode.Status> ask : asks) {
            try {
                statuses.add(ask.get(10, TimeUnit.SECONDS));
            } catch (ExecutionException unreachable) {
                // a node that does not answer is not serving
            }
        }
        statuses.sort(Comparator.comparing(ComputeNode.Status::address));
        return statuses;
    }

    /** Partitions held, by compute node name, in node order. */
    Map<String, List<Integer>> partitionMap(List<ComputeNode.Status> statuses) {
        Map<String, List<Integer>> map = new LinkedHashMap<>();
        for (ComputeNode.Status status : statuses) {
            map.put(nodeAt(status.address()).name(), status.partitionsHeld());
        }
        return map;
    }

    /**
     * Touches every partition with a get (sharding starts a moved partition's entity on its first
     * message) and polls statuses until {@code settled} holds for two polls in a row with the same map.
     */
    Map<String, List<Integer>> awaitPartitions(String what, Predicate<Map<String, List<Integer>>> settled, Duration max)
            throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        Map<String, List<Integer>> previous = null;
        Map<String, List<Integer>> map = Map.of();
        while (System.nanoTime() < deadline) {
            List<CompletableFuture<?>> touches = new ArrayList<>();
            for (int p = 0; p < table.count(); p++) {
                touches.add(client.get(table.lowerExclusive(p) + 1).toCompletableFuture());
            }
            CompletableFuture.allOf(touches.toArray(CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
            map = partitionMap(statuses());
            if (settled.test(map) && map.equals(previous)) {
                log(what + ": " + map);
                return map;
            }
            previous = settled.test(map) ? map : null;
            Thread.sleep(250);
        }
        throw new AssertionError(what + " did not happen within " + max.toSeconds() + " s; last partition map " + map);
    }

    /**
     * {@code nodes} compute nodes, every partition held by exactly one, and each holding at least its share
     * less one (sharding may first give every partition to the node that registered first, then rebalance).
     */
    static Predicate<Map<String, List<Integer>>> balancedOver(int nodes) {
        return map -> map.size() == nodes && eachPartitionHeldOnce(map)
                && map.values().stream().allMatch(held -> held.size() >= PARTITIONS / nodes - 1);
    }

    /**
     * {@code nodes} compute nodes, every partition held by exactly one, and no node holding more than one partition
     * more than another: sharding's least-shard strategy moves nothing more, so no handoff is under way.
     */
    static Predicate<Map<String, List<Integer>>> settledOver(int nodes) {
        return map -> map.size() == nodes && eachPartitionHeldOnce(map)
                && map.values().stream().mapToInt(List::size).max().orElse(0)
                        - map.values().stream().mapToInt(List::size).min().orElse(0) <= 1;
    }

    /** Every partition held by exactly one of the nodes in {@code map}. */
    static boolean eachPartitionHeldOnce(Map<String, List<Integer>> map) {
        boolean[] held = new boolean[PARTITIONS];
        int count = 0;
        for (List<Integer> partitions : map.values()) {
            for (int p : partitions) {
                if (held[p]) {
                    return false;
                }
                held[p] = true;
                count++;
            }
        }
        return count == PARTITIONS;
    }

    /** Closes {@code resource} first thing at cleanup, before the client stops (a workload still sending, say). */
    <T extends AutoCloseable> T closeAfter(T resource) {
        resources.add(resource);
        return resource;
    }

    // ---- reporting ----

    /** Prints a line of the test's progress with the seconds since it started. */
    void log(String message) {
        System.out.printf("[%s +%s s] %s%n", testName, seconds(), message);
    }

    private String seconds() {
        return String.format("%.1f", (System.nanoTime() - started) / 1e9);
    }

    // ---- cleanup ----

    /**
     * Stops everything the test started, whatever state it is in. A timeout may have interrupted the test's
     * thread; cleanup clears the flag so that its own waits work, and sets it again at the end.
     */
    private void close() throws Exception {
        boolean interrupted = Thread.interrupted();
        Exception failure = null;
        try {
            for (AutoCloseable resource : resources) {
                try {
                    resource.close();
                } catch (Exception e) {
                    failure = e;
                }
            }
            // The nodes first, at once: the test's assertions are done, and a client that left the cluster gracefully
            // while the nodes ran would only add seconds.
            stopNodes();
            if (clientSystem != null) {
                clientSystem.terminate();
                try {
                    // Over TLS at most 5 s (see below: the rest would only be waited for, never asserted).
                    clientSystem.getWhenTerminated().toCompletableFuture().get(tls ? 5 : 30, TimeUnit.SECONDS);
                } catch (java.util.concurrent.TimeoutException slow) {
                    if (!tls) {
                        failure = slow;
                    } else {
                        // Artery's tls-tcp sometimes takes longer to stop a system than its phase timeouts (the
                        // actor-system-terminate phase times out after 10 s); the test's assertions are done, and the
                        // JVM ends the system. Seen in about 1 of 4 runs of FormationTlsIT; never with plain tcp.
                        log("the client's actor system did not terminate within 5 s (a slow Artery TLS shutdown); left running");
                    }
                } catch (Exception e) {
                    failure = e;
                }
            }
        } finally {
            try {
                stopNodes();
            } finally {
                for (RemoteMemory connection : connections) {
                    connection.close();
                }
                if (fabric != null) {
                    fabric.close();
                }
                deleteRecursively(shmDirectory);
                if (regionDirectory != null) {
                    deleteRecursively(regionDirectory);
                }
                if (hosts != null) {
                    hosts.close();
                }
                for (Map.Entry<String, Path> absent : absentShmDirectories.entrySet()) {
                    if (Files.exists(absent.getValue()) && failure == null) {
                        failure = new IllegalStateException("node " + absent.getKey() + " of a tcp cluster created its shm directory "
                                + absent.getValue());
                    }
                    deleteRecursively(absent.getValue());
                }
                if (killOnExit != null) {
                    Runtime.getRuntime().removeShutdownHook(killOnExit);
                }
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** SIGKILL to every node still running: nothing is asserted after cleanup, so no node needs a graceful end. */
    private void stopNodes() throws InterruptedException {
        for (NodeProcess node : nodes) {
            if (node.isAlive()) {
                node.kill();
            }
        }
    }

    private static void deleteRecursively(Path directory) throws IOException {
        if (!Files.exists(directory)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(directory)) {
            for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        } catch (UncheckedIOException e) {
            throw e.getCause();
        }
    }
}
