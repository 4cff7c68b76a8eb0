package dev.dex.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.FaultPlan;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * {@code dex bench}: bulk-loads a tree, runs one of the paper's workloads against an engine mode on the
 * local fabric, and reports throughput, latency percentiles, verbs per operation and operation outcomes
 * (stdout), optionally as JSON. Progress goes to stderr. {@code bin/dex bench} runs it; build it with
 * {@link #commandLine(int)} to get its bad-input handling, passing the cluster's {@code dex.tree.partitions} as the
 * default of {@code --partitions}.
 *
 * <p>With {@code --inject-faults} the engines' verbs fail as a memory server that does not answer would, failed
 * operations are counted and the run goes on, and {@link EndChecks} then checks that nothing was left locked or lost.
 *
 * <p>Exit codes: 0 done, 1 the run failed (or, with injected faults, a check failed), 2 bad input (every option is
 * checked before anything runs).
 */
@Command(name = "bench", sortOptions = false, usageHelpAutoWidth = true,
        description = "Bulk-loads a B+-tree on the local fabric, runs a YCSB-style workload against an engine, and"
                + " prints throughput, latency, verbs per operation and operation outcomes (progress goes to stderr).",
        exitCodeListHeading = "%nExit codes:%n",
        exitCodeList = {"0:done", "1:the run failed, or a check after injected faults failed", "2:bad input"})
public final class BenchCommand implements Callable<Integer> {
    static final long MAX_OPS = 1L << 40;
    static final int MAX_THREADS = 1024;
    static final int MAX_COMPUTE_NODES = 256;
    static final int MAX_MEMORY_NODES = 64;
    static final int MAX_MEMORY_THREADS = 64;
    static final long MAX_LATENCY_NS = 10_000_000;
    static final double DEFAULT_THETA = 0.99;
    static final double DEFAULT_CACHE_RATIO = 0.08;

    @Spec
    private CommandSpec spec;

    @Option(names = "--workload", paramLabel = "NAME", defaultValue = "read-intensive",
            converter = WorkloadConverter.class, completionCandidates = Workload.Names.class,
            description = "Operation mix: ${COMPLETION-CANDIDATES} (default: ${DEFAULT-VALUE}). delete-heavy deletes"
                    + " --warmup + --ops of the loaded keys, each once, in a random order, then prints the nodes the tree"
                    + " keeps against a bulk load of the keys left, e.g. --keys 2m --ops 1800k --warmup 0.")
    private Workload workload;

    @Option(names = "--mode", paramLabel = "MODE", defaultValue = "dex", converter = ModeConverter.class,
            completionCandidates = Mode.Names.class,
            description = "Engine: ${COMPLETION-CANDIDATES} (default: ${DEFAULT-VALUE}).")
    private Mode mode;

    @Option(names = "--keys", paramLabel = "N", defaultValue = "1000000", converter = CountConverter.class,
            description = "Entries bulk-loaded before the run (default: ${DEFAULT-VALUE}). Counts accept _ and k/m/g.")
    private long keys;

    @Option(names = "--ops", paramLabel = "N", defaultValue = "1000000", converter = CountConverter.class,
            description = "Measured operations, all threads together (default: ${DEFAULT-VALUE}).")
    private long ops;

    @Option(names = "--warmup", paramLabel = "N", defaultValue = "200000", converter = CountConverter.class,
            description = "Operations run before measuring; stats are reset after them (default: ${DEFAULT-VALUE}).")
    private long warmup;

    @Option(names = "--threads", paramLabel = "N", defaultValue = "2",
            description = "Worker threads (default: ${DEFAULT-VALUE}).")
    private int threads;

    @Option(names = "--dist", paramLabel = "DIST", defaultValue = "zipf", converter = DistributionConverter.class,
            completionCandidates = Distribution.Names.class,
            description = "Key distribution: ${COMPLETION-CANDIDATES} (default: ${DEFAULT-VALUE}).")
    private Distribution distribution;

    @Option(names = "--theta", paramLabel = "THETA",
            description = "Zipf skew in [0, 1) (default: " + DEFAULT_THETA + "); only with --dist zipf.")
    private Double theta;

    @Option(names = "--cache-ratio", paramLabel = "FRACTION",
            description = "Cache per compute node as a fraction of the bulk-loaded tree's bytes, in (0, 1]"
                    + " (default: " + DEFAULT_CACHE_RATIO + "). Not with --cache-mb.")
    private Double cacheRatio;

    @Option(names = "--leaf-admission", paramLabel = "P_A",
            description = "DEX modes: the probability that a leaf read on a miss is admitted into the cache, in [0, 1],"
                    + " or auto: tuned while the run goes (default: the engine's, dex.compute.leaf-admission of reference.conf).")
    private String leafAdmission;

    @Option(names = "--cache-mb", paramLabel = "MIB", converter = CountConverter.class,
            description = "Cache per compute node in MiB. Not with --cache-ratio.")
    private Long cacheMb;

    @Option(names = "--compute-nodes", paramLabel = "C", defaultValue = "1",
            description = "Engine instances in this JVM, each with its own connection; in partitioned modes each"
                    + " holds the partitions p with p mod C = its index (default: ${DEFAULT-VALUE}).")
    private int computeNodes;

    @Option(names = "--memory-nodes", paramLabel = "M", defaultValue = "1",
            description = "Memory nodes (regions) of the fabric (default: ${DEFAULT-VALUE}).")
    private int memoryNodes;

    @Option(names = "--memory-threads", paramLabel = "T", defaultValue = "1",
            description = "Memory-side threads per memory node that run offloaded operations, for modes dex and"
                    + " offload-only (default: ${DEFAULT-VALUE}).")
    private int memoryThreads;

    @Option(names = "--partitions", paramLabel = "P",
            description = "Logical partitions of the key space, for the partitioned modes (default: dex.tree.partitions, 64).")
    private Integer partitions;

    /** The partitions when --partitions is not given: the cluster's setting, which the caller reads (0: none). */
    private final int defaultPartitions;

    BenchCommand(int defaultPartitions) {
        this.defaultPartitions = defaultPartitions;
    }

    @Option(names = "--fabric", paramLabel = "TRANSPORT", defaultValue = "local",
            description = "local (regions in this JVM) or tcp (the memory nodes in this JVM serve their regions over loopback TCP;"
                    + " every verb is a network round trip, offloads are messages on the same connections, and"
                    + " --memory-threads are the memory side's event loops) (default: ${DEFAULT-VALUE}).")
    private String fabric;

    @Option(names = "--replicas", paramLabel = "R", defaultValue = "1",
            description = "Memory nodes per memory server (docs/replication.md). With --fabric tcp each primary streams every"
                    + " change to R-1 backups in this JVM, each with event loops of its own, and answers once they applied it;"
                    + " with --fabric local (and a mode that never offloads) the compute side writes every replica itself"
                    + " (default: ${DEFAULT-VALUE}).")
    private int replicas;

    @Option(names = "--copy-under-load",
            description = "With --replicas: the backups join a third of the way into the measured run and are copied"
                    + " while the workload runs (re-replication); prints the copy's rate and the throughput during the copy"
                    + " against before it, with one replica (docs/replication.md).")
    private boolean copyUnderLoad;

    @Option(names = "--copy-rate", paramLabel = "MIB", converter = CountConverter.class,
            description = "With --replicas: MiB per second a primary copies its region to a backup (dex.memory.copy-rate;"
                    + " default: the fabric's, 256).")
    private Long copyRateMib;

    @Option(names = "--latency-ns", paramLabel = "NS", defaultValue = "0",
            description = "Latency spun before every verb, e.g. 2000 for RDMA's ~2 us (default: ${DEFAULT-VALUE}).")
    private long latencyNs;

    @Option(names = "--seed", paramLabel = "SEED", defaultValue = "1",
            description = "Seed of the threads' random sources (default: ${DEFAULT-VALUE}).")
    private long seed;

    @Option(names = "--redo-log", paramLabel = "on|off", defaultValue = "off",
            description = "DEX engine modes: log every write in its partition's redo log before it returns (one more"
                    + " remote write per write; each operation commits on its own, as a synchronous client's would)."
                    + " The cluster's default is on; here off, to measure the engine as the paper does"
                    + " (default: ${DEFAULT-VALUE}).")
    private String redoLog;

    @Option(names = "--commit-batch", paramLabel = "N", defaultValue = "1",
            description = "DEX engine modes: operations of one partition per commit, as a loaded cluster batches them:"
                    + " each thread gathers operations per partition and runs N of them between a batch's start and its"
                    + " commit (the redo log takes the batch's records in one write). A measured latency is then the"
                    + " whole batch's. 1: every operation commits on its own (default: ${DEFAULT-VALUE}).")
    private int commitBatch;

    @Option(names = "--key-bytes", paramLabel = "W", defaultValue = "8",
            description = "Width of the index's keys in bytes: 8, 16, 24, ..., 64 (fewer fit a 1 KiB node as they widen:"
                    + " the paper's key-size experiment). Key n is n followed by filler bytes, so order and partitions stay"
                    + " those of 8-byte keys. Not for skiplist (default: ${DEFAULT-VALUE}).")
    private int keyBytes;

    @Option(names = "--inject-faults", paramLabel = "RATE[:KINDS]",
            description = "Fail each of the engines' verbs with probability RATE, as a memory server that does not answer"
                    + " within the verb timeout would (half of the failing writes and CASes take effect first); KINDS limits"
                    + " it to some of read, write, cas, faa (default: all), e.g. 0.001:write,cas. Failed operations are"
                    + " counted and the run goes on; at the end it checks that no frame or remote lock is left held, that"
                    + " the tree is valid and that every acknowledged write reads back, and exits 1 if not."
                    + " Not with skiplist or --commit-batch above 1.")
    private String injectFaults;

    @Option(names = "--json", paramLabel = "FILE",
            description = "Also write the result to FILE as one JSON object.")
    private Path json;

    @Option(names = {"-h", "--help"}, usageHelp = true, description = "Show this help and exit.")
    private boolean help;

    private BenchResult lastResult;
    private DeleteHeavyReport lastDeletes;
    private BenchRunner.CopyReport lastCopy;

    /**
     * A command line for this command with its bad-input handling (message, hint, exit code 2).
     *
     * @param defaultPartitions the partitions when --partitions is not given ({@code dex.tree.partitions})
     */
    public static CommandLine commandLine(int defaultPartitions) {
        return commandLine(new BenchCommand(defaultPartitions));
    }

    static CommandLine commandLine(BenchCommand command) {
        return new CommandLine(command).setParameterExceptionHandler(BenchCommand::handleBadInput);
    }

    private static int handleBadInput(ParameterException e, String[] args) {
        CommandLine cmd = e.getCommandLine();
        PrintWriter err = cmd.getErr();
        String name = cmd.getCommandSpec().qualifiedName();
        err.println(name + ": " + e.getMessage());
        UnmatchedArgumentException.printSuggestions(e, err);
        err.println("Run '" + name + " --help' for the options.");
        err.flush();
        return cmd.getCommandSpec().exitCodeOnInvalidInput();
    }

    @Override
    public Integer call() {
        BenchSettings config = validate();
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Progress progress = Progress.detect(err);
        KeySpace keySpace = new KeySpace(config.keys());
        BenchResult result;
        List<String> failedChecks = List.of();
        DeleteHeavyReport deletes = null;
        EngineCluster engines = EngineFactory.create(config, keySpace, progress);
        try {
            BenchRunner runner = new BenchRunner(config, keySpace, engines, progress);
            RunStats stats;
            try {
                stats = runner.run();
            } catch (IllegalStateException e) {
                if (config.faults() == null) {
                    throw e;
                }
                err.println(spec.qualifiedName() + ": " + e.getMessage());
                if (e.getCause() != null) {
                    for (Throwable stuck : e.getCause().getSuppressed()) {
                        stuck.printStackTrace(err);
                    }
                }
                err.flush();
                return 1;
            }
            result = BenchResult.of(config, engines.treeBytes(), stats);
            lastResult = result;
            Summary.print(result, out);
            if (config.workload() == Workload.DELETE_HEAVY) {
                deletes = DeleteHeavyReport.measure(engines, config);
                lastDeletes = deletes;
                out.println(deletes.line());
            }
            BenchRunner.CopyReport copy = runner.copyReport();
            lastCopy = copy;
            if (copy != null) {
                out.printf("copy under load: %,d MiB to the backups in %.2f s (%.0f MB/s)%s; throughput %,.0f ops/s during the copy,"
                                + " %,.0f ops/s before it with one replica: %.0f%%%n", copy.bytes() >> 20, copy.copyNanos() / 1e9,
                        copy.megabytesPerSecond(), copy.completed() ? "" : ", NOT complete when the run ended",
                        copy.during(), copy.before(), 100 * copy.during() / copy.before());
                if (!Double.isNaN(copy.after())) {
                    out.printf("copy under load: %,.0f ops/s after it with every replica complete: the copy kept %.0f%% of that%n",
                            copy.after(), 100 * copy.during() / copy.after());
                }
            } else if (config.copyUnderLoad()) {
                out.println("copy under load: the run ended before a third of it was done; no copy was made");
            }
            if (config.faults() != null) {
                Summary.printFaults(config.faults(), engines.injectors(), stats.failures(), engines.recovery(), out);
                failedChecks = new EndChecks(config, keySpace, engines, runner.model(), result.cacheBytes(), out, err).runBounded();
            }
        } finally {
            engines.close();
        }
        if (config.json() != null) {
            try {
                ResultJson.write(result, deletes, config.json());
            } catch (IOException e) {
                err.println(spec.qualifiedName() + ": cannot write " + config.json() + ": " + e.getMessage());
                err.flush();
                return 1;
            }
        }
        if (!failedChecks.isEmpty()) {
            err.println(spec.qualifiedName() + ": checks failed: " + String.join("; ", failedChecks));
            err.flush();
            return 1;
        }
        return 0;
    }

    /**
     * Runs the engine benchmark with {@code args} (as on its command line) without printing, and returns its
     * throughput in operations per second: the same-run baseline of {@code dex bench --cluster}.
     *
     * @throws IllegalArgumentException with the benchmark's message when it refuses the arguments or fails
     */
    public static double engineThroughput(String... args) {
        BenchCommand command = new BenchCommand(0);
        java.io.StringWriter errors = new java.io.StringWriter();
        CommandLine cli = commandLine(command).setOut(new PrintWriter(java.io.Writer.nullWriter())).setErr(new PrintWriter(errors));
        int exit = cli.execute(args);
        if (exit != 0 || command.lastResult == null) {
            throw new IllegalArgumentException("the engine benchmark failed (exit " + exit + "): " + errors.toString().strip());
        }
        return command.lastResult.throughputOpsPerSec();
    }

    /** What the last {@link #call()} of a delete-heavy run found in the tree, or null. */
    DeleteHeavyReport lastDeletes() {
        return lastDeletes;
    }

    /** What the copy under load of the last {@link #call()} measured, or null. */
    BenchRunner.CopyReport lastCopy() {
        return lastCopy;
    }

    /** The result of the last successful {@link #call()}: each point of {@link Reproduction}'s plots, and what tests check. */
    BenchResult lastResult() {
        return lastResult;
    }

    private BenchSettings validate() {
        check(keys >= 1 && keys <= KeySpace.MAX_KEYS, "--keys must be in [1, " + KeySpace.MAX_KEYS + "]: " + keys);
        check(ops >= 1 && ops <= MAX_OPS, "--ops must be in [1, " + MAX_OPS + "]: " + ops);
        check(warmup >= 0 && warmup <= MAX_OPS, "--warmup must be in [0, " + MAX_OPS + "]: " + warmup);
        check(threads >= 1 && threads <= MAX_THREADS, "--threads must be in [1, " + MAX_THREADS + "]: " + threads);
        double skew = 0;
        if (distribution == Distribution.ZIPF) {
            skew = theta == null ? DEFAULT_THETA : theta;
            check(skew >= 0 && skew < 1, "--theta must be in [0, 1): " + theta);
        } else {
            check(theta == null, "--theta applies only to --dist zipf");
        }
        check(cacheRatio == null || cacheMb == null, "--cache-ratio and --cache-mb are mutually exclusive");
        double admission = DexEngineSettings.DEFAULT_LEAF_ADMISSION;
        if (leafAdmission != null) {
            try {
                admission = DexEngineSettings.parseLeafAdmission(leafAdmission);
            } catch (IllegalArgumentException e) {
                admission = Double.NaN;
            }
            check(admission == DexEngineSettings.AUTO_LEAF_ADMISSION || admission >= 0 && admission <= 1,
                    "--leaf-admission must be auto or in [0, 1]: " + leafAdmission);
        }
        double ratio = Double.NaN;
        long cacheBytes = -1;
        if (cacheMb != null) {
            check(cacheMb >= 1 && cacheMb <= 1L << 20, "--cache-mb must be in [1, " + (1L << 20) + "]: " + cacheMb);
            cacheBytes = cacheMb << 20;
        } else {
            ratio = cacheRatio == null ? DEFAULT_CACHE_RATIO : cacheRatio;
            check(ratio > 0 && ratio <= 1, "--cache-ratio must be in (0, 1]: " + cacheRatio);
        }
        check(computeNodes >= 1 && computeNodes <= MAX_COMPUTE_NODES,
                "--compute-nodes must be in [1, " + MAX_COMPUTE_NODES + "]: " + computeNodes);
        check(memoryNodes >= 1 && memoryNodes <= MAX_MEMORY_NODES,
                "--memory-nodes must be in [1, " + MAX_MEMORY_NODES + "]: " + memoryNodes);
        check(memoryThreads >= 1 && memoryThreads <= MAX_MEMORY_THREADS,
                "--memory-threads must be in [1, " + MAX_MEMORY_THREADS + "]: " + memoryThreads);
        if (partitions == null) {
            check(defaultPartitions > 0, "--partitions must be given");
            partitions = defaultPartitions;
        }
        check(partitions >= 1 && partitions <= PartitionTable.MAX_PARTITIONS,
                "--partitions must be in [1, " + PartitionTable.MAX_PARTITIONS + "]: " + partitions);
        check(!mode.partitioned() || partitions >= computeNodes, "--partitions (" + partitions
                + ") must be at least --compute-nodes (" + computeNodes + ") so every compute node holds a partition");
        check(fabric.equals("local") || fabric.equals("tcp"), "--fabric must be local or tcp: " + fabric);
        check(replicas >= 1 && replicas <= 3, "--replicas must be 1, 2 or 3: " + replicas);
        check(replicas == 1 || fabric.equals("tcp") || !mode.offloads(), "--replicas above 1 on --fabric local needs a mode that never"
                + " offloads (no-offload, sherman, partitioned): the compute side writes every replica itself, and an offload"
                + " would change the primary alone; " + mode.cliName() + " offloads");
        check(!copyUnderLoad || fabric.equals("tcp"), "--copy-under-load needs --fabric tcp");
        check(!copyUnderLoad || replicas > 1, "--copy-under-load needs --replicas 2 or 3: it copies the backups while the load runs");
        check(copyRateMib == null || replicas > 1, "--copy-rate needs --replicas 2 or 3");
        check(copyRateMib == null || copyRateMib >= 1 && copyRateMib <= 1L << 20, "--copy-rate must be in [1, " + (1L << 20)
                + "] MiB per second: " + copyRateMib);
        check(latencyNs >= 0 && latencyNs <= MAX_LATENCY_NS,
                "--latency-ns must be in [0, " + MAX_LATENCY_NS + "]: " + latencyNs);
        if (json != null) {
            Path parent = json.toAbsolutePath().getParent();
            check(parent != null && Files.isDirectory(parent), "--json " + json + ": directory " + parent + " does not exist");
            check(!Files.isDirectory(json), "--json " + json + " is a directory");
        }
        if (workload == Workload.DELETE_HEAVY) {
            check(mode.usesFabric(), "--workload delete-heavy needs a mode on the fabric: it counts the nodes the tree keeps"
                    + " in remote memory; " + mode.cliName() + " has none");
            check(warmup + ops <= keys, "--workload delete-heavy deletes each loaded key once: --warmup (" + warmup
                    + ") + --ops (" + ops + ") must be at most --keys (" + keys + ")");
            check(keys <= Integer.MAX_VALUE, "--workload delete-heavy shuffles at most " + Integer.MAX_VALUE + " keys: " + keys);
            check(injectFaults == null, "--inject-faults checks a model of updates and inserts, not deletes: not with"
                    + " --workload delete-heavy");
        }
        check(redoLog.equals("on") || redoLog.equals("off"), "--redo-log must be on or off: " + redoLog);
        check(redoLog.equals("off") || mode.partitioned(), "--redo-log on needs a DEX engine mode, not " + mode.cliName());
        check(commitBatch >= 1 && commitBatch <= 1024, "--commit-batch must be in [1, 1024]: " + commitBatch);
        check(commitBatch == 1 || mode.partitioned(), "--commit-batch above 1 needs a DEX engine mode, not " + mode.cliName());
        try {
            KeyFormat.of(keyBytes);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), "--key-bytes: " + e.getMessage());
        }
        check(keyBytes == 8 || mode.usesFabric(), "--key-bytes above 8 needs a mode on the fabric; skiplist keys are longs");
        FaultPlan faults = null;
        if (injectFaults != null) {
            try {
                faults = FaultPlan.parse(injectFaults);
            } catch (IllegalArgumentException e) {
                check(false, "--inject-faults: " + e.getMessage());
            }
            check(mode.usesFabric(), "--inject-faults needs a mode on the fabric; skiplist makes no verbs");
            check(commitBatch == 1, "--inject-faults runs every operation on its own: not with --commit-batch above 1");
        }
        return new BenchSettings(workload, mode, distribution, skew, keys, ops, warmup, threads, ratio, cacheBytes,
                computeNodes, memoryNodes, memoryThreads, partitions, latencyNs, fabric, seed, json, redoLog.equals("on"), commitBatch,
                admission, keyBytes, faults, replicas,
                copyUnderLoad, copyRateMib == null ? dev.dex.rdma.tcp.ReplicaSettings.DEFAULTS.copyRate() : copyRateMib << 20);
    }

    private void check(boolean ok, String message) {
        if (!ok) {
            throw new ParameterException(spec.commandLine(), message);
        }
    }

    static final class WorkloadConverter implements ITypeConverter<Workload> {
        @Override
        public Workload convert(String value) {
            return Workload.fromCliName(value);
        }
    }

    static final class ModeConverter implements ITypeConverter<Mode> {
        @Override
        public Mode convert(String value) {
            return Mode.fromCliName(value);
        }
    }

    static final class DistributionConverter implements ITypeConverter<Distribution> {
        @Override
        public Distribution convert(String value) {
            return Distribution.fromCliName(value);
        }
    }
}
