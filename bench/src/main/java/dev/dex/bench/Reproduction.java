package dev.dex.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.function.ToDoubleFunction;

import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.Styler;

import picocli.CommandLine;

/**
 * {@code bin/dex reproduce}: scaled-down versions of the paper's experiments, run with the project's own benchmark,
 * each written as a CSV, a PNG plot (XChart) with axes, units and a legend, and a section of {@code index.md} that
 * shows the plot with one line of reading. See {@code docs/benchmarks.md} for full-size figures.
 *
 * <p>Each run is one {@link BenchCommand} in this JVM (a fresh tree, the JIT warmed by the runs before), so the
 * plots compare modes and settings of one machine; absolute figures on a shared 2-core machine are noisy.
 *
 * <p>Not thread-safe: one reproduction at a time.
 */
public final class Reproduction {
    /** How big each run is: keys bulk-loaded, measured operations, warm-up operations. */
    public record Scale(String name, long keys, long ops, long warmup) {
        /** About 3 minutes on a 2-core machine (188 s measured, the timeline included). */
        public static final Scale QUICK = new Scale("quick", 1_000_000, 500_000, 200_000);
        /** The paper's experiments at 2M keys and 1M operations per run: about 6 minutes (344 s measured). */
        public static final Scale FULL = new Scale("full", 2_000_000, 1_000_000, 500_000);
    }

    /** One run's parameters (bench options) and the point it gives: a series name and an x value. */
    private record Run(String series, String x, List<String> args) {
    }

    /** One experiment: its runs, how to read a run's result, and how to plot them. */
    private record Experiment(String name, String title, String xAxis, String yAxis, boolean lines, List<Run> runs,
                              ToDoubleFunction<BenchResult> y, Function<Map<String, Map<String, Double>>, String> reading) {
    }

    /**
     * The names of every experiment, in the order they run; {@code timeline} and {@code scale} are cluster runs
     * ({@link #timeline}, {@link ScaleBed}). All but {@code scale} run by default; {@code scale} only when named (it
     * runs clusters of up to 32 compute nodes: about 10 minutes at full scale).
     */
    public static final List<String> EXPERIMENTS = List.of("verbs", "ablation", "threads", "cache", "skew", "leaf-admission",
            "offload-threads", "timeline", "scale");

    /**
     * The repartitioning timeline, which needs a cluster: given the output directory and the scale, it writes
     * {@code timeline.csv} and {@code timeline.png} and returns its section of the index (markdown), or null. Set by
     * the command line (cluster-config); without it the timeline is left out.
     */
    public interface Timeline {
        String run(Path out, Scale scale) throws Exception;
    }

    private Timeline timeline;

    /**
     * The scale test bed at one size: runs {@code bench --cluster --join-leave --kill-coordinator} with
     * {@code computeNodes} compute nodes and {@code partitions} partitions at {@code scale}, and writes its --json to
     * {@code json}. Set by the command line (cluster-config); without it the scale page is left out.
     */
    public interface ScaleBed {
        void run(int computeNodes, int partitions, Scale scale, Path json) throws Exception;
    }

    private ScaleBed scaleBed;

    /** Runs the scale page's clusters with {@code scaleBed} (see {@link ScaleBed}). */
    public Reproduction withScaleBed(ScaleBed scaleBed) {
        this.scaleBed = scaleBed;
        return this;
    }

    /** Runs the repartitioning timeline with {@code timeline} (see {@link Timeline}). */
    public Reproduction withTimeline(Timeline timeline) {
        this.timeline = timeline;
        return this;
    }

    private final Scale scale;
    private final int partitions;
    private final PrintWriter progress;

    /**
     * @param partitions the bench's default partitions ({@code dex.tree.partitions})
     * @param progress   where each run's progress line goes
     */
    public Reproduction(Scale scale, int partitions, PrintWriter progress) {
        this.scale = scale;
        this.partitions = partitions;
        this.progress = progress;
    }

    /**
     * Runs the experiments named in {@code only} (all when empty) and writes {@code DIR/NAME.csv}, {@code DIR/NAME.png}
     * and {@code DIR/index.md}; returns the files written.
     *
     * @throws IllegalArgumentException for an unknown experiment name
     */
    public List<Path> run(Path out, Set<String> only) throws IOException {
        for (String name : only) {
            if (!EXPERIMENTS.contains(name)) {
                throw new IllegalArgumentException("no experiment '" + name + "'; there are " + String.join(", ", EXPERIMENTS));
            }
        }
        System.setProperty("java.awt.headless", "true");
        Files.createDirectories(out);
        List<Experiment> chosen = new ArrayList<>();
        for (Experiment e : experiments()) {
            if (only.isEmpty() && !e.name().equals("timeline") || only.contains(e.name())) {
                chosen.add(e);
            }
        }
        int total = chosen.stream().mapToInt(e -> e.runs().size()).sum();
        int done = 0;
        long started = System.nanoTime();
        List<Path> written = new ArrayList<>();
        String made = "bin/dex reproduce" + (scale == Scale.QUICK ? " --quick" : "") + (only.isEmpty() ? ""
                : " --only " + String.join(",", only.stream().sorted().toList()));
        StringBuilder index = new StringBuilder("# DEX on Pekko: the paper's experiments, " + scale.name() + " scale\n\n"
                + (chosen.isEmpty() ? String.format(Locale.ROOT, "Cluster runs only; one JVM, this machine. Made by `%s`.%n%n", made)
                : String.format(Locale.ROOT, "%,d keys bulk-loaded per engine run, %,d operations measured after %,d of warm-up;"
                + " one JVM, this machine. Made by `%s`.%n%n", scale.keys(), scale.ops(), scale.warmup(), made)));
        for (Experiment e : chosen) {
            Map<String, Map<String, Double>> points = new LinkedHashMap<>();
            StringBuilder csv = new StringBuilder("series,x,throughput_ops_per_s,reads_per_op,writes_per_op,atomics_per_op,"
                    + "two_sided_per_op,hit_ratio,value\n");
            for (Run run : e.runs()) {
                done++;
                long t0 = System.nanoTime();
                BenchResult result = bench(run.args());
                double y = e.y().applyAsDouble(result);
                points.computeIfAbsent(run.series(), s -> new LinkedHashMap<>()).put(run.x(), y);
                csv.append(String.format(Locale.ROOT, "%s,%s,%.1f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f%n", run.series(), run.x(),
                        result.throughputOpsPerSec(), result.perOp(result.verbs().reads()), result.perOp(result.verbs().writes()),
                        result.perOp(result.verbs().atomics()), result.perOp(result.verbs().twoSided()), result.cacheHitRatio(), y));
                progress.printf(Locale.ROOT, "[%d/%d] %s: %s %s=%s: %s %.3g (%.1f s; %.0f s so far)%n", done, total, e.name(),
                        run.series(), e.xAxis(), run.x(), e.yAxis(), y, (System.nanoTime() - t0) / 1e9,
                        (System.nanoTime() - started) / 1e9);
                progress.flush();
            }
            Path csvFile = out.resolve(e.name() + ".csv");
            Files.writeString(csvFile, csv);
            Path png = out.resolve(e.name() + ".png");
            plot(e, points, png);
            written.add(csvFile);
            written.add(png);
            index.append("## ").append(e.title()).append("\n\n![").append(e.title()).append("](").append(e.name()).append(".png)\n\n")
                    .append(e.reading().apply(points)).append(" Data: [").append(e.name()).append(".csv](").append(e.name())
                    .append(".csv).\n\n");
        }
        if (only.isEmpty() || only.contains("timeline")) {
            if (timeline != null) {
                progress.printf(Locale.ROOT, "timeline: a cluster in this JVM, a compute node joins and then leaves (%.0f s so far)%n",
                        (System.nanoTime() - started) / 1e9);
                progress.flush();
                try {
                    String section = timeline.run(out, scale);
                    if (section != null) {
                        index.append(section).append("\n\n");
                        written.add(out.resolve("timeline.csv"));
                        written.add(out.resolve("timeline.png"));
                    }
                } catch (IOException | RuntimeException e) {
                    throw e;
                } catch (Exception e) {
                    throw new IllegalStateException("the repartitioning timeline failed: " + e, e);
                }
            } else {
                index.append("Not run here: the repartitioning timeline, which needs a cluster (`bin/dex reproduce` runs it).\n\n");
            }
        }
        if (only.contains("scale")) {
            if (scaleBed != null) {
                try {
                    index.append(new ScalePage(scaleBed, progress).run(out, scale, written)).append("\n\n");
                } catch (IOException | RuntimeException e) {
                    throw e;
                } catch (Exception e) {
                    throw new IllegalStateException("the scale test bed failed: " + e, e);
                }
            } else {
                index.append("Not run here: the scale page, which needs a cluster (`bin/dex reproduce --only scale` runs it).\n\n");
            }
        }
        index.append("Not on these pages: key width, which `bin/dex bench --key-bytes` measures (docs/benchmarks.md).\n");
        Path indexFile = out.resolve("index.md");
        Files.writeString(indexFile, index);
        written.add(indexFile);
        return written;
    }

    /** Runs one benchmark in this JVM. */
    private BenchResult bench(List<String> args) {
        BenchCommand command = new BenchCommand(partitions);
        StringWriter errors = new StringWriter();
        CommandLine cli = BenchCommand.commandLine(command).setOut(new PrintWriter(java.io.Writer.nullWriter()))
                .setErr(new PrintWriter(errors));
        List<String> all = new ArrayList<>(List.of("--keys", Long.toString(scale.keys()), "--ops", Long.toString(scale.ops()),
                "--warmup", Long.toString(scale.warmup())));
        all.addAll(args);
        int exit = cli.execute(all.toArray(String[]::new));
        if (exit != 0 || command.lastResult() == null) {
            throw new IllegalStateException("bench " + String.join(" ", all) + " failed (exit " + exit + "): " + errors.toString().strip());
        }
        return command.lastResult();
    }

    private static double throughput(BenchResult r) {
        return r.throughputOpsPerSec();
    }

    private List<Experiment> experiments() {
        List<Experiment> all = new ArrayList<>();
        List<Run> verbs = new ArrayList<>();
        for (String workload : List.of("read-only", "write-intensive")) {
            for (String mode : List.of("dex", "sherman", "partitioned", "baseline")) {
                verbs.add(new Run(workload, mode, List.of("--mode", mode, "--workload", workload, "--compute-nodes", "4",
                        "--cache-ratio", "0.08", "--threads", "2")));
            }
        }
        all.add(new Experiment("verbs", "Remote reads per operation (Table 2)", "mode", "reads/op", false, verbs,
                r -> r.perOp(r.verbs().reads()), p -> String.format(Locale.ROOT,
                        "4 compute nodes, 8%% cache, zipf 0.99: DEX reads %.2f nodes per operation read-only, where Sherman"
                                + " (no partitioning, no path-aware cache) reads %.2f and the cacheless baseline %.2f.",
                        p.get("read-only").get("dex"), p.get("read-only").get("sherman"), p.get("read-only").get("baseline"))));

        List<Run> ablation = new ArrayList<>();
        for (String mode : List.of("baseline", "partitioned", "no-offload", "dex")) {
            ablation.add(new Run("write-intensive", mode, List.of("--mode", mode, "--workload", "write-intensive",
                    "--cache-ratio", "0.01", "--latency-ns", "2000", "--threads", "2")));
        }
        all.add(new Experiment("ablation", "Ablation: baseline, +partitioning, +cache, +offloading", "mode", "ops/s", false,
                ablation, Reproduction::throughput, p -> {
                    Map<String, Double> w = p.get("write-intensive");
                    return String.format(Locale.ROOT, "1%% cache, 2 µs per verb, write-intensive: each step's throughput"
                            + " over the baseline's: partitioning %.2fx, the cache %.2fx, offloading %.2fx.",
                            w.get("partitioned") / w.get("baseline"), w.get("no-offload") / w.get("baseline"),
                            w.get("dex") / w.get("baseline"));
                }));

        List<Run> threads = new ArrayList<>();
        for (String mode : List.of("dex", "sherman")) {
            for (String t : List.of("1", "2", "4")) {
                threads.add(new Run(mode, t, List.of("--mode", mode, "--workload", "read-intensive", "--threads", t,
                        "--cache-ratio", "0.08", "--latency-ns", "2000")));
            }
        }
        all.add(new Experiment("threads", "Throughput against threads (scalability)", "threads", "ops/s", true, threads,
                Reproduction::throughput, p -> String.format(Locale.ROOT, "Read-intensive, 8%% cache, 2 µs per verb: DEX"
                        + " goes from %.0f to %.0f ops/s from 1 to 4 threads (this machine has 2 cores), Sherman from %.0f"
                        + " to %.0f.", p.get("dex").get("1"), p.get("dex").get("4"), p.get("sherman").get("1"),
                        p.get("sherman").get("4"))));

        List<Run> cache = new ArrayList<>();
        for (String mode : List.of("dex", "sherman")) {
            for (String ratio : List.of("0.01", "0.02", "0.04", "0.08", "0.16")) {
                cache.add(new Run(mode, ratio, List.of("--mode", mode, "--workload", "read-intensive", "--cache-ratio", ratio,
                        "--latency-ns", "2000", "--threads", "2")));
            }
        }
        all.add(new Experiment("cache", "Throughput against cache size", "cache (fraction of the tree)", "ops/s", true, cache,
                Reproduction::throughput, p -> String.format(Locale.ROOT, "Read-intensive, 2 µs per verb: DEX is %.2fx"
                        + " Sherman at a 1%% cache and %.2fx at 16%%.", p.get("dex").get("0.01") / p.get("sherman").get("0.01"),
                        p.get("dex").get("0.16") / p.get("sherman").get("0.16"))));

        List<Run> skew = new ArrayList<>();
        for (String mode : List.of("dex", "sherman")) {
            for (String theta : List.of("0.5", "0.7", "0.9", "0.99")) {
                skew.add(new Run(mode, theta, List.of("--mode", mode, "--workload", "read-intensive", "--theta", theta,
                        "--cache-ratio", "0.08", "--latency-ns", "2000", "--threads", "2")));
            }
        }
        all.add(new Experiment("skew", "Throughput against skew", "zipf theta", "ops/s", true, skew, Reproduction::throughput,
                p -> String.format(Locale.ROOT, "Read-intensive, 8%% cache: more skew, more hits; DEX %.0f -> %.0f ops/s"
                        + " from theta 0.5 to 0.99, Sherman %.0f -> %.0f.", p.get("dex").get("0.5"), p.get("dex").get("0.99"),
                        p.get("sherman").get("0.5"), p.get("sherman").get("0.99"))));

        List<Run> admission = new ArrayList<>();
        for (String workload : List.of("read-only", "read-intensive", "write-intensive")) {
            for (String cacheRatio : List.of("0.01", "0.08")) {
                String series = workload + " " + Math.round(Double.parseDouble(cacheRatio) * 100) + "% cache";
                for (String pa : ADMISSIONS) {
                    admission.add(new Run(series, pa, List.of("--mode", "dex", "--workload", workload, "--leaf-admission", pa,
                            "--cache-ratio", cacheRatio, "--latency-ns", "2000", "--threads", "2")));
                }
            }
        }
        all.add(new Experiment("leaf-admission", "Throughput against leaf admission probability P_A, fixed and auto", "P_A",
                "ops/s", false, admission, Reproduction::throughput, Reproduction::admissionReading));

        List<Run> offload = new ArrayList<>();
        for (String mode : List.of("dex", "offload-only", "no-offload")) {
            for (String t : List.of("1", "2")) {
                offload.add(new Run(mode, t, List.of("--mode", mode, "--workload", "write-intensive", "--memory-threads", t,
                        "--cache-ratio", "0.01", "--latency-ns", "2000", "--threads", "2")));
            }
        }
        all.add(new Experiment("offload-threads", "Offloading against memory-side threads", "memory-side threads", "ops/s",
                false, offload, Reproduction::throughput, p -> String.format(Locale.ROOT, "1%% cache, 2 µs per verb,"
                        + " write-intensive, one memory-side thread: offload-only %.0f ops/s, no-offload %.0f, the cost model"
                        + " (dex) %.0f; memory-side threads share this machine's two cores with the compute threads.",
                        p.get("offload-only").get("1"), p.get("no-offload").get("1"), p.get("dex").get("1"))));
        return all;
    }

    /** P_A of the leaf-admission experiment: fixed values, then {@code auto}. */
    private static final List<String> ADMISSIONS = List.of("0.01", "0.05", "0.1", "0.3", "1", "auto");

    /** Per workload and cache: auto's throughput over the best fixed P_A's, which it should be within 5% of. */
    static String admissionReading(Map<String, Map<String, Double>> points) {
        StringBuilder reading = new StringBuilder("Auto against the best fixed P_A of the same workload and cache (one run"
                + " each; this machine's runs vary by up to 25%, docs/benchmarks.md has rounds):");
        String separator = " ";
        for (Map.Entry<String, Map<String, Double>> series : points.entrySet()) {
            String best = null;
            for (String pa : ADMISSIONS.subList(0, ADMISSIONS.size() - 1)) {
                Double y = series.getValue().get(pa);
                if (y != null && (best == null || y > series.getValue().get(best))) {
                    best = pa;
                }
            }
            Double auto = series.getValue().get("auto");
            if (best != null && auto != null) {
                reading.append(separator).append(String.format(Locale.ROOT, "%s %.2fx (best fixed %s)", series.getKey(),
                        auto / series.getValue().get(best), best));
                separator = "; ";
            }
        }
        return reading.append('.').toString();
    }

    /** A bar chart (categories on x) or a line chart (numbers on x) of {@code points}, as a PNG. */
    private static void plot(Experiment e, Map<String, Map<String, Double>> points, Path png) throws IOException {
        if (e.lines()) {
            XYChart chart = new XYChartBuilder().width(800).height(500).title(e.title()).xAxisTitle(e.xAxis())
                    .yAxisTitle(e.yAxis()).build();
            chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
            for (Map.Entry<String, Map<String, Double>> series : points.entrySet()) {
                double[] x = series.getValue().keySet().stream().mapToDouble(Double::parseDouble).toArray();
                double[] y = series.getValue().values().stream().mapToDouble(Double::doubleValue).toArray();
                chart.addSeries(series.getKey(), x, y);
            }
            BitmapEncoder.saveBitmap(chart, png.toString(), BitmapEncoder.BitmapFormat.PNG);
        } else {
            CategoryChart chart = new CategoryChartBuilder().width(800).height(500).title(e.title()).xAxisTitle(e.xAxis())
                    .yAxisTitle(e.yAxis()).build();
            chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
            for (Map.Entry<String, Map<String, Double>> series : points.entrySet()) {
                chart.addSeries(series.getKey(), new ArrayList<>(series.getValue().keySet()),
                        new ArrayList<>(series.getValue().values()));
            }
            BitmapEncoder.saveBitmap(chart, png.toString(), BitmapEncoder.BitmapFormat.PNG);
        }
        if (!Files.isRegularFile(png)) {
            throw new UncheckedIOException(new IOException("XChart wrote no " + png));
        }
    }
}
