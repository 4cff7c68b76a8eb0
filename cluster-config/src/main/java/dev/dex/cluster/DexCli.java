package dev.dex.cluster;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.typed.Cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.client.DexException;
import dev.dex.actors.node.ComputeNode;
import dev.dex.bench.BenchCommand;
import dev.dex.bench.CountConverter;
import dev.dex.bench.TakeoverBenchCommand;
import dev.dex.bench.VerbBenchCommand;
import dev.dex.core.node.Keys;
import dev.dex.core.tree.TreeSettings;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * The {@code dex} command line: {@code demo}, {@code memory-node}, {@code compute-node}, {@code client},
 * {@code status}, {@code certs}, and {@code bench} and {@code reproduce} (bench's commands, handed their arguments
 * before picocli sees them). Exit codes: 0 done, 1 failed, 2 bad input.
 */
@Command(name = "dex", mixinStandardHelpOptions = true, usageHelpAutoWidth = true,
        description = "DEX on Pekko: a range index on disaggregated memory.",
        subcommands = {Demo.class, DexCli.MemoryNodeCommand.class, DexCli.ComputeNodeCommand.class,
                DexCli.ClientCommand.class, DexCli.StatusCommand.class, DexCli.CertsCommand.class})
public final class DexCli implements Callable<Integer> {

    public static void main(String[] args) {
        commonPoolAtLeastTwo();
        // Logging starts here, on one thread: started by several actor-system threads at once, SLF4J queues their
        // first calls and warns on stderr that it replays them.
        org.slf4j.LoggerFactory.getILoggerFactory();
        System.exit(run(args));
    }

    /**
     * On a machine with two cores the JDK's common pool has parallelism 1, and then every
     * {@code CompletableFuture} async step without an executor starts a thread of its own; the actor ask
     * path takes such steps for every message, which made a two-core demo 8x slower. Must run before the
     * common pool is first used.
     */
    static void commonPoolAtLeastTwo() {
        String key = "java.util.concurrent.ForkJoinPool.common.parallelism";
        if (System.getProperty(key) == null) {
            System.setProperty(key, Integer.toString(Math.max(2, Runtime.getRuntime().availableProcessors() - 1)));
        }
    }

    /** Runs a command line and returns its exit code. */
    public static int run(String... args) {
        if (args.length == 1 && args[0].equals(ClassArchiveTraining.COMMAND)) {
            // Not a user's command: bin/dex runs it to make the node JVMs' class-data archive (ClassArchiveTraining).
            return ClassArchiveTraining.run(new PrintWriter(System.out, true), new PrintWriter(System.err, true));
        }
        if (args.length > 0 && args[0].equals("reproduce")) {
            int partitions = com.typesafe.config.ConfigFactory.load().getInt("dex.tree.partitions");
            CommandLine cli = dev.dex.bench.ReproduceCommand.commandLine(partitions, DexCli::timeline, DexCli::scaleBed).setCommandName("dex reproduce");
            cli.setExecutionExceptionHandler(DexCli::handle);
            return cli.execute(Arrays.copyOfRange(args, 1, args.length));
        }
        if (args.length > 0 && args[0].equals("bench")) {
            List<String> rest = new ArrayList<>(Arrays.asList(args).subList(1, args.length));
            if (rest.remove("--cluster")) {
                // The cluster bench: an in-JVM cluster measured through the client actor (the demo's mix).
                Demo bench = new Demo();
                bench.benchOnly = true;
                CommandLine cli = new CommandLine(bench).setCommandName("dex bench --cluster");
                cli.setExecutionExceptionHandler(DexCli::handle);
                return cli.execute(rest.toArray(String[]::new));
            }
            if (rest.remove("--takeover")) {
                // A partition's takeover time against the length of the redo log it replays.
                return TakeoverBenchCommand.commandLine().execute(rest.toArray(String[]::new));
            }
            if (rest.remove("--verbs")) {
                // The fabric alone: verb latency and pipelined verbs per second.
                return VerbBenchCommand.commandLine().execute(rest.toArray(String[]::new));
            }
            // Its --partitions defaults to the cluster's setting, written once in reference.conf.
            int partitions = com.typesafe.config.ConfigFactory.load().getInt("dex.tree.partitions");
            return BenchCommand.commandLine(partitions).setCommandName("dex bench").execute(rest.toArray(String[]::new));
        }
        CommandLine cli = new CommandLine(new DexCli());
        cli.setExecutionExceptionHandler(DexCli::handle);
        return cli.execute(args);
    }

    /**
     * The repartitioning timeline of {@code dex reproduce}: the demo's cluster in this JVM (a quarter of the scale's keys,
     * 2 compute nodes), a third joining and then leaving while the mix goes on, recorded per 100 ms; its index section.
     */
    static String timeline(java.nio.file.Path out, dev.dex.bench.Reproduction.Scale scale) throws Exception {
        Demo demo = new Demo();
        int exit = new CommandLine(demo).execute("--keys", Long.toString(Math.max(100_000, scale.keys() / 4)), "--seconds", "2",
                "--warmup", "1", "--baseline", "off", "--timeline", out.resolve("timeline.csv").toString());
        if (exit != 0 || demo.timelineReading == null) {
            throw new IllegalStateException("the demo's cluster run failed (exit " + exit + ")");
        }
        return "## Repartitioning: throughput while a compute node joins and leaves\n\n![Repartitioning timeline](timeline.png)\n\n"
                + demo.timelineReading + " Data: [timeline.csv](timeline.csv).";
    }

    /**
     * One size of {@code dex reproduce --only scale}: the scale test bed, {@code bench --cluster --join-leave
     * --kill-coordinator} at docs/benchmarks.md's settings (200,000 keys, 100,000 with --quick; 8 MiB caches; 3 s of
     * mix after 1 s of warm-up), its --json into {@code json}.
     */
    static void scaleBed(int computeNodes, int partitions, dev.dex.bench.Reproduction.Scale scale, java.nio.file.Path json) {
        Demo bench = new Demo();
        bench.benchOnly = true;
        int exit = new CommandLine(bench).execute("--join-leave", "--kill-coordinator", "--compute-nodes", Integer.toString(computeNodes),
                "--partitions", Integer.toString(partitions), "--keys", scale == dev.dex.bench.Reproduction.Scale.FULL ? "200k" : "100k",
                "--seconds", "3", "--warmup", "1", "--cache-size", "8MiB", "--baseline", "off", "--json", json.toString());
        if (exit != 0) {
            throw new IllegalStateException("bench --cluster --join-leave --kill-coordinator at " + computeNodes
                    + " compute nodes failed (exit " + exit + ")");
        }
    }

    /** Bad input (a bad option or setting) exits 2 with the reason; anything else exits 1. */
    private static int handle(Exception e, CommandLine cmd, CommandLine.ParseResult parsed) {
        if (e instanceof IllegalArgumentException || e instanceof com.typesafe.config.ConfigException) {
            cmd.getErr().println(cmd.getCommandSpec().qualifiedName() + ": " + e.getMessage());
            return 2;
        }
        cmd.getErr().println(cmd.getCommandSpec().qualifiedName() + " failed: " + e);
        return 1;
    }

    @Override
    public Integer call() {
        new CommandLine(this).usage(System.out);
        System.out.println("\n  bench      the engine benchmark ('dex bench --help'); 'dex bench --cluster' measures an in-JVM"
                + " cluster through the client ('dex bench --cluster --help'); 'dex bench --verbs' measures the fabric's verbs"
                + " alone ('dex bench --verbs --help'); 'dex bench --takeover' measures a partition's takeover against its"
                + " redo log's length ('dex bench --takeover --help')");
        System.out.println("  reproduce  the paper's experiments, scaled down, as CSVs, PNG plots and an index.md"
                + " ('dex reproduce --help')");
        return 0;
    }

    /** {@code config} with {@code key} set to {@code value}, or unchanged when the option was not given. */
    private static Config optional(Config config, String key, Object value) {
        return value == null ? config : config.withValue(key, ConfigValueFactory.fromAnyRef(value));
    }

    /** Blocks until the actor system terminates (SIGTERM runs coordinated shutdown: a graceful leave). */
    private static int runUntilTerminated(ActorSystem<?> system, String what, PrintWriter out) throws Exception {
        out.println(what + " up at " + DexNodes.hostPort(system) + "; stop with Ctrl-C (a graceful leave)");
        out.flush();
        system.getWhenTerminated().toCompletableFuture().get();
        return 0;
    }

    @Command(name = "memory-node", mixinStandardHelpOptions = true, description = "Run a memory node until stopped.")
    static final class MemoryNodeCommand implements Callable<Integer> {
        @Mixin
        NodeOptions node;

        @Option(names = "--server-id", paramLabel = "ID", description = "This memory server's id; 0 formats the tree (default: dex.memory.server-id).")
        Integer serverId;

        @Option(names = "--region-size", paramLabel = "SIZE", description = "Region size, e.g. 1GiB (default: dex.memory.region-size).")
        String regionSize;

        @Option(names = "--format", description = "Start from a fresh region, discarding the data of one this memory server "
                + "left (shm); without it, a restarted memory node reattaches to its region.")
        boolean format;

        @Override
        public Integer call() throws Exception {
            Config extra = optional(optional(ConfigFactory.empty(), "dex.memory.server-id", serverId),
                    "dex.memory.region-size", regionSize);
            if (format) {
                extra = extra.withValue("dex.memory.format", com.typesafe.config.ConfigValueFactory.fromAnyRef(true));
            }
            Config config = node.nodeConfig(extra, "memory");
            DexSettings settings = DexSettings.from(config);
            return MemoryNodeProcess.run(config, settings, new PrintWriter(System.out, true));
        }
    }

    @Command(name = "compute-node", mixinStandardHelpOptions = true, description = "Run a compute node until stopped.")
    static final class ComputeNodeCommand implements Callable<Integer> {
        @Mixin
        NodeOptions node;

        @Option(names = "--memory-nodes", paramLabel = "N", description = "Memory nodes to wait for (default: dex.compute.memory-nodes).")
        Integer memoryNodes;

        @Option(names = "--cache-size", paramLabel = "SIZE", description = "DEX cache size, e.g. 256MiB (default: dex.compute.cache-size).")
        String cacheSize;

        @Option(names = "--mode", paramLabel = "MODE", description = "dex, offload-only, no-offload, sherman, partitioned (default: dex.compute.mode).")
        String mode;

        @Override
        public Integer call() throws Exception {
            Config extra = optional(optional(optional(ConfigFactory.empty(), "dex.compute.memory-nodes", memoryNodes),
                    "dex.compute.cache-size", cacheSize), "dex.compute.mode", mode);
            Config config = node.nodeConfig(extra, "compute");
            return runUntilTerminated(DexNodes.computeNode(config, DexSettings.from(config)), "compute node",
                    new PrintWriter(System.out, true));
        }
    }

    @Command(name = "client", mixinStandardHelpOptions = true,
            description = "Run one operation against a running cluster: get KEY | put KEY VALUE | delete KEY | scan START COUNT.")
    static final class ClientCommand implements Callable<Integer> {
        @Mixin
        NodeOptions node;

        @Parameters(index = "0", paramLabel = "OPERATION", description = "get, put, delete or scan")
        String operation;

        @Option(names = "--keys", paramLabel = "KIND",
                description = "How KEY and START are read: long (a 64-bit integer) or bytes (text as its UTF-8 bytes, or 0x and hex"
                        + " digits; at most the index's key width, ordered as unsigned bytes). Default: long, or bytes with"
                        + " --key-bytes.")
        String keys;

        @Option(names = "--key-bytes", paramLabel = "W",
                description = "The cluster's key width in bytes, as it was formatted (dex.tree.key-bytes): 8 to 64. Keys are then"
                        + " byte strings (--keys bytes). Default: dex.tree.key-bytes.")
        Integer keyBytes;

        @Parameters(index = "1..*", paramLabel = "ARG", description = "KEY, KEY VALUE, KEY, or START COUNT")
        List<String> arguments = new ArrayList<>();

        @Override
        public Integer call() throws Exception {
            if (node.seeds.isEmpty()) {
                throw new IllegalArgumentException("client needs --seed HOST:PORT of a running cluster");
            }
            if (keys == null) {
                keys = keyBytes == null ? "long" : "bytes";
            }
            if (!keys.equals("long") && !keys.equals("bytes")) {
                throw new IllegalArgumentException("--keys must be long or bytes, not '" + keys + "'");
            }
            Config extra = ConfigFactory.empty();
            if (keyBytes != null) {
                try {
                    dev.dex.core.node.KeyFormat.of(keyBytes);
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("--key-bytes: " + e.getMessage());
                }
                extra = extra.withValue("dex.tree.key-bytes", ConfigValueFactory.fromAnyRef(keyBytes));
            }
            Config config = DexNodes.withoutEndpoint(node.nodeConfig(extra, "client"));
            dev.dex.core.node.KeyFormat format = TreeSettings.fromConfig(config.getConfig("dex.tree")).keyFormat();
            int width = format.bytes();
            if (keys.equals("long") && format.words() != 1) {
                throw new IllegalArgumentException("long keys are 8 bytes; this cluster's keys are " + width + " bytes: use --keys bytes");
            }
            long[] numbers = parse(width);
            // Keys wider than 8 bytes go to the API as bytes; they are checked here, before the cluster is joined.
            byte[] key = null;
            if (keys.equals("bytes") && format.words() > 1) {
                key = Keys.parse(arguments.get(0));
                if (!(operation.equals("scan") && Keys.isEmpty(key))) {
                    format.toWords(key, new long[format.words()]);
                }
            }
            DexSettings settings = DexSettings.from(config);
            ActorSystem<DexClient.Command> system = DexNodes.client(config, settings);
            try {
                ClusterMember.awaitSelfUp(system, JOIN_TIMEOUT);
                DexClientApi client = new DexClientApi(system, system, settings.requestTimeout());
                long timeout = settings.requestTimeout().toMillis() + 5_000;
                boolean wide = key != null;
                switch (operation) {
                    case "get" -> {
                        OptionalLong value = (wide ? client.get(key) : client.get(numbers[0])).toCompletableFuture()
                                .get(timeout, TimeUnit.MILLISECONDS);
                        System.out.println(value.isPresent() ? Long.toString(value.getAsLong()) : "(not found)");
                    }
                    case "put" -> System.out.println((wide ? client.put(key, numbers[1]) : client.put(numbers[0], numbers[1]))
                            .toCompletableFuture().get(timeout, TimeUnit.MILLISECONDS) ? "replaced" : "inserted");
                    case "delete" -> System.out.println((wide ? client.delete(key) : client.delete(numbers[0])).toCompletableFuture()
                            .get(timeout, TimeUnit.MILLISECONDS) ? "deleted" : "(not found)");
                    default -> {
                        for (DexClientApi.Entry entry : (wide ? client.scan(key, (int) numbers[1]) : client.scan(numbers[0], (int) numbers[1]))
                                .toCompletableFuture().get(timeout, TimeUnit.MILLISECONDS)) {
                            System.out.println((keys.equals("bytes") ? entry.keyText() : Long.toString(entry.key())) + "\t" + entry.value());
                        }
                    }
                }
                return 0;
            } catch (java.util.concurrent.ExecutionException e) {
                if (e.getCause() instanceof DexException bad) {
                    System.err.println("dex client: " + bad.getMessage());
                    return 2;
                }
                throw e;
            } finally {
                ClusterMember.leave(system);
            }
        }

        private long[] parse(int width) {
            int expected = switch (operation) {
                case "get", "delete" -> 1;
                case "put", "scan" -> 2;
                default -> throw new IllegalArgumentException("unknown operation '" + operation + "'; expected get, put, delete or scan");
            };
            if (arguments.size() != expected) {
                throw new IllegalArgumentException(operation + " takes " + expected + " argument(s), got " + arguments.size());
            }
            long[] numbers = new long[expected];
            for (int i = 0; i < expected; i++) {
                if (operation.equals("scan") && i == 1) {
                    numbers[i] = scanCount(arguments.get(i));
                    continue;
                }
                if (i == 0 && keys.equals("bytes")) {
                    // A key wider than 8 bytes is checked and sent as bytes (call()); here only an 8-byte one.
                    numbers[i] = width == 8 ? keyOf(arguments.get(i), operation.equals("scan")) : 0;
                    continue;
                }
                try {
                    numbers[i] = Long.parseLong(arguments.get(i));
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("'" + arguments.get(i) + "' is not a 64-bit integer");
                }
            }
            return numbers;
        }

        /** The engine key of a bytes KEY (text or 0x-hex); a scan may start at the empty key, the first of all. */
        private static long keyOf(String text, boolean scanStart) {
            byte[] key = Keys.parse(text);
            if (scanStart && Keys.isEmpty(key)) {
                return Long.MIN_VALUE;
            }
            return Keys.engineKey(key);
        }

        /** A scan's COUNT: a count ({@code 100}, {@code 10k}) within what one scan call may return. */
        private static long scanCount(String text) {
            long count;
            try {
                count = CountConverter.parse(text);
            } catch (CommandLine.TypeConversionException e) {
                throw new IllegalArgumentException("scan COUNT " + e.getMessage());
            }
            if (count < 1 || count > DexClient.MAX_SCAN_CALL) {
                throw new IllegalArgumentException("scan COUNT must be in [1, " + DexClient.MAX_SCAN_CALL + "]: " + text);
            }
            return count;
        }
    }

    @Command(name = "certs", mixinStandardHelpOptions = true,
            description = "Make a certificate authority for a cluster's mutual TLS and a key store per node, with the JDK's"
                    + " keytool; then start each node with --tls DIR/NAME.p12 (docs/security.md).")
    static final class CertsCommand implements Callable<Integer> {
        @Option(names = "--out", paramLabel = "DIR", required = true,
                description = "Directory for the files (created owner-only; refused if it holds a CA already).")
        java.nio.file.Path out;

        @Option(names = "--nodes", paramLabel = "NAME", split = ",", defaultValue = "memory,compute,client",
                description = "Names of the nodes to make key stores for, comma-separated (default: ${DEFAULT-VALUE}).")
        List<String> nodes = new ArrayList<>();

        @picocli.CommandLine.Spec
        CommandLine.Model.CommandSpec spec;

        @Override
        public Integer call() throws Exception {
            PrintWriter out = spec.commandLine().getOut();
            Certs.create(this.out, nodes, out);
            out.println("done: start each node with --tls " + this.out.resolve("NAME.p12") + "; copy to a node only its own"
                    + " NAME.p12 with truststore.p12 and password");
            out.flush();
            return 0;
        }
    }

    @Command(name = "status", mixinStandardHelpOptions = true,
            description = "Members and roles, which compute node holds which partitions, and the verb counters.")
    static final class StatusCommand implements Callable<Integer> {
        @Mixin
        NodeOptions node;

        @Override
        public Integer call() throws Exception {
            if (node.seeds.isEmpty()) {
                throw new IllegalArgumentException("status needs --seed HOST:PORT of a running cluster");
            }
            Config config = DexNodes.withoutEndpoint(node.nodeConfig(ConfigFactory.empty(), "client"));
            ActorSystem<DexClient.Command> system = DexNodes.client(config, DexSettings.from(config));
            try {
                ClusterMember.awaitSelfUp(system, JOIN_TIMEOUT);
                // The Receptionist's listing reaches a new member shortly after it is Up.
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while ((ClusterMember.computeStatuses(system).isEmpty() || ClusterMember.memoryDescriptions(system).isEmpty())
                        && System.nanoTime() < deadline) {
                    Thread.sleep(200);
                }
                printStatus(system, new PrintWriter(System.out, true));
                return 0;
            } finally {
                ClusterMember.leave(system);
            }
        }
    }

    /** A memory node's part in its replica group, for status; empty for the only copy of a server (no group). */
    static String replicaLine(dev.dex.actors.node.MemoryNode.Replica replica) {
        if (dev.dex.actors.node.MemoryNode.Replica.SOLE_ROLE.equals(replica.role())) {
            // A replica restarted on its kept region, standing by until the coordinator gives it a part.
            return replica.keptRole() == null ? "" : String.format("; standing by, its kept region held every change of view %d"
                    + " as its %s", replica.keptView(), replica.keptRole().toLowerCase(java.util.Locale.ROOT));
        }
        String role = replica.role().toLowerCase(java.util.Locale.ROOT);
        String copy = replica.copyLeft() > 0 ? String.format(", copying: %,d bytes left", replica.copyLeft())
                : "BACKUP".equals(replica.role()) && !replica.complete() ? ", not complete (cannot take over)" : "";
        return String.format("; %s of view %d at change %,d%s", role, replica.view(), replica.applied(), copy);
    }

    /** How long {@code client} and {@code status} try to join before they give up with a clear error. */
    static final Duration JOIN_TIMEOUT = Duration.ofSeconds(20);

    /**
     * Prints members, the memory servers (id, node, region, fabric endpoint), and each compute node's partitions, verb
     * counters and the memory servers it finds out of the cluster (it is not ready then).
     */
    static List<ComputeNode.Status> printStatus(ActorSystem<?> system, PrintWriter out) throws Exception {
        out.println("members:");
        for (Member member : Cluster.get(system).state().getMembers()) {
            out.printf("  %-32s %-8s %s%n", member.address(), member.status(), String.join(",", member.getRoles().stream()
                    .filter(r -> !r.startsWith("dc-")).toList()));
        }
        out.println("memory servers:");
        List<dev.dex.actors.node.MemoryNode.Description> memories = new java.util.ArrayList<>(ClusterMember.memoryDescriptions(system));
        memories.sort(java.util.Comparator.comparingInt(dev.dex.actors.node.MemoryNode.Description::serverId)
                .thenComparing(d -> !d.servesClients()));
        for (dev.dex.actors.node.MemoryNode.Description memory : memories) {
            out.printf("  %-6d %-32s region %,d bytes%s%s%n", memory.serverId(), memory.node().path().address(), memory.regionBytes(),
                    memory.endpoint().isEmpty() ? "" : ", fabric at " + memory.endpoint(), replicaLine(memory.replica()));
        }
        ClusterMember.ComputeAnswers answers = ClusterMember.computeAnswers(system, ClusterMember.SILENT_AFTER);
        List<ComputeNode.Status> statuses = answers.statuses();
        out.println("compute nodes:");
        for (String silent : answers.silent()) {
            out.printf("  %-32s NOT ANSWERING within %d s: down, paused or cut off; its partitions move once the cluster removes it%n",
                    silent, ClusterMember.SILENT_AFTER.toSeconds());
        }
        for (ComputeNode.Status s : statuses) {
            out.printf("  %-32s partitions (%d) %s%s%n", s.address(), s.partitionsHeld().size(), s.partitionsHeld(), tableLine(s));
            String load = loadLine(s);
            if (!load.isEmpty()) {
                out.printf("  %-32s %s%n", "", load);
            }
            if (!s.memoryServersOut().isEmpty()) {
                out.printf("  %-32s NOT READY: memory server(s) %s out of the cluster; their keys are not served until they are back%n",
                        "", s.memoryServersOut());
            }
            for (String lost : s.memoryServersLost()) {
                out.printf("  %-32s NOT READY: %s%n", "", lost);
            }
            out.printf("  %-32s verbs: reads %,d writes %,d atomics %,d two-sided %,d bytes %,d; cache hits %.1f%%; offloads %,d%n",
                    "", s.reads(), s.writes(), s.atomics(), s.twoSided(), s.bytes(), 100 * s.cacheHitRatio(), s.offloads());
        }
        String balance = ClusterMember.balanceLine(statuses);
        if (!balance.isEmpty()) {
            out.println(balance);
        }
        out.flush();
        return statuses;
    }

    /**
     * The partition table's version the node serves and the splits and merges it made (docs/partition-splits.md), or
     * nothing while its table is the one the tree was formatted with (version 2) and it changed nothing.
     */
    static String tableLine(ComputeNode.Status status) {
        if (status.tableVersion() <= 2 && status.splits() == 0 && status.merges() == 0) {
            return "";
        }
        return String.format("; table version %d, %d split%s%s here", status.tableVersion(), status.splits(),
                status.splits() == 1 ? "" : "s", status.merges() == 0 ? ""
                        : String.format(" and %d merge%s", status.merges(), status.merges() == 1 ? "" : "s"));
    }

    /** The busiest partitions {@link #loadLine} names. */
    static final int BUSIEST_SHOWN = 3;

    /**
     * A compute node's load as it measured it over its last complete window ({@code dex.compute.load-window}): the
     * operations per second of all its partitions and of its busiest ones; empty before its first window closed.
     */
    static String loadLine(ComputeNode.Status status) {
        double total = ClusterMember.load(status);
        if (Double.isNaN(total)) {
            return "";
        }
        List<Integer> held = status.partitionsHeld();
        List<Integer> order = new java.util.ArrayList<>(java.util.stream.IntStream.range(0, held.size()).boxed().toList());
        order.sort(java.util.Comparator.comparingDouble((Integer i) -> status.partitionRates().get(i)).reversed()
                .thenComparing(held::get));
        StringBuilder busiest = new StringBuilder();
        for (int i = 0; i < Math.min(BUSIEST_SHOWN, order.size()); i++) {
            int at = order.get(i);
            busiest.append(i == 0 ? "; busiest: " : ", ").append(String.format("%d at %,.0f", held.get(at),
                    status.partitionRates().get(at)));
        }
        return String.format("load: %,.0f operations per second over its last %.1f s%s", total, status.loadWindowSeconds(),
                busiest);
    }

}
