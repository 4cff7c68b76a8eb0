package dev.dex.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code dex reproduce}: the paper's experiments, scaled down, as CSVs, PNG plots and an index page ({@link Reproduction}). */
@Command(name = "reproduce", sortOptions = false, usageHelpAutoWidth = true,
        description = "Runs scaled-down versions of the paper's experiments with the benchmark and writes, per experiment,"
                + " a CSV and a PNG plot, and an index.md that shows them with one line of reading each.",
        exitCodeListHeading = "%nExit codes:%n",
        exitCodeList = {"0:done", "1:a run failed", "2:bad input"})
public final class ReproduceCommand implements Callable<Integer> {
    @Spec
    private CommandLine.Model.CommandSpec spec;

    @Option(names = "--quick", description = "1M keys and 500k operations per run: about 3 minutes on 2 cores"
            + " (default: 2M keys and 1M operations per run, about 6 minutes).")
    private boolean quick;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "reproduce",
            description = "Where the CSVs, plots and index.md go (default: ${DEFAULT-VALUE}).")
    private Path out;

    @Option(names = "--only", paramLabel = "NAME", split = ",",
            description = "Only these experiments: verbs, ablation, threads, cache, skew, leaf-admission, offload-threads,"
                    + " timeline (a cluster in this JVM: throughput per 100 ms while a compute node joins and leaves); and, only"
                    + " when named, scale (clusters of 2 to 32 compute nodes in this JVM, 8 with --quick: a join, a leave and the"
                    + " shard coordinator's failover at each size; about 10 minutes, 5 with --quick).")
    private List<String> only = List.of();

    @Option(names = {"-h", "--help"}, usageHelp = true, description = "Show this help and exit.")
    private boolean help;

    private final int defaultPartitions;
    private final Reproduction.Timeline timeline;
    private final Reproduction.ScaleBed scaleBed;

    private ReproduceCommand(int defaultPartitions, Reproduction.Timeline timeline, Reproduction.ScaleBed scaleBed) {
        this.defaultPartitions = defaultPartitions;
        this.timeline = timeline;
        this.scaleBed = scaleBed;
    }

    /**
     * @param defaultPartitions the bench's --partitions default ({@code dex.tree.partitions})
     * @param timeline          runs the repartitioning timeline (a cluster), or null to leave it out
     * @param scaleBed          runs the scale page's clusters, or null to leave it out
     */
    public static CommandLine commandLine(int defaultPartitions, Reproduction.Timeline timeline, Reproduction.ScaleBed scaleBed) {
        return new CommandLine(new ReproduceCommand(defaultPartitions, timeline, scaleBed));
    }

    @Override
    public Integer call() throws IOException {
        PrintWriter err = spec.commandLine().getErr();
        // An unknown experiment name is Reproduction.run's IllegalArgumentException: exit 2 with the names (DexCli).
        Set<String> names = new LinkedHashSet<>(only);
        Reproduction.Scale scale = quick ? Reproduction.Scale.QUICK : Reproduction.Scale.FULL;
        List<Path> written = new Reproduction(scale, defaultPartitions, err).withTimeline(timeline).withScaleBed(scaleBed).run(out, names);
        PrintWriter stdout = spec.commandLine().getOut();
        stdout.printf("wrote %d files to %s; open %s%n", written.size(), out, out.resolve("index.md"));
        stdout.flush();
        return 0;
    }
}
