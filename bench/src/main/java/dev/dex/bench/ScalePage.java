package dev.dex.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.ToDoubleFunction;

import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.Styler;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The scale page of {@code bin/dex reproduce --only scale}: the scale test bed ({@code bench --cluster --join-leave
 * --kill-coordinator}, docs/benchmarks.md) at several cluster sizes, as {@code scale.csv}, three plots against the
 * number of compute nodes (seconds, rebalance rounds, lowest second) and a section of the index.
 *
 * <p>Not thread-safe: one page at a time.
 */
final class ScalePage {
    /** Partitions of every size: the 1,024, so that 32 compute nodes hold 32 each. */
    static final int PARTITIONS = 1024;

    /** One size's figures, as its run's --json holds them. */
    record Row(int computeNodes, double usualOpsPerSec, Change join, Change leave, double newCoordinatorSeconds,
               double servedAgainSeconds, int coordinatorPartitions) {
    }

    /** A join's or a leave's figures. */
    record Change(double settledSeconds, long rounds, long moved, double lowestShare, double longestOpSeconds) {
        static Change of(JsonNode node, String name, Path json) {
            JsonNode change = node.get(name);
            if (change == null) {
                throw new IllegalStateException(json + " has no " + name);
            }
            return new Change(change.get("settledSeconds").asDouble(), change.get("rebalanceRounds").asLong(),
                    change.get("partitionsMoved").asLong(), change.get("lowestShare").asDouble(),
                    change.get("longestOpSeconds").asDouble());
        }
    }

    private final Reproduction.ScaleBed bed;
    private final PrintWriter progress;

    ScalePage(Reproduction.ScaleBed bed, PrintWriter progress) {
        this.bed = bed;
        this.progress = progress;
    }

    /** The sizes a scale runs: 2 to 8 compute nodes quick, 2 to 32 at full scale. */
    static List<Integer> sizes(Reproduction.Scale scale) {
        return scale == Reproduction.Scale.FULL ? List.of(2, 8, 16, 32) : List.of(2, 4, 8);
    }

    /** Runs every size, writes the CSV and the plots into {@code out} (added to {@code written}); the index section. */
    String run(Path out, Reproduction.Scale scale, List<Path> written) throws Exception {
        List<Row> rows = new ArrayList<>();
        long started = System.nanoTime();
        List<Integer> sizes = sizes(scale);
        for (int i = 0; i < sizes.size(); i++) {
            int nodes = sizes.get(i);
            progress.printf(Locale.ROOT, "[scale %d/%d] %d compute nodes, %d partitions: form, mix, join, leave, kill the"
                    + " coordinator's node (%.0f s so far)%n", i + 1, sizes.size(), nodes, PARTITIONS, (System.nanoTime() - started) / 1e9);
            progress.flush();
            Path json = out.resolve("scale-" + nodes + ".json");
            bed.run(nodes, PARTITIONS, scale, json);
            rows.add(read(nodes, json));
            written.add(json);
        }
        Path csv = out.resolve("scale.csv");
        Files.writeString(csv, csv(rows));
        written.add(csv);
        written.add(plot(out.resolve("scale-seconds.png"), "Seconds against compute nodes", "seconds", rows, List.of(
                new Series("join: settled", r -> r.join().settledSeconds()), new Series("leave: settled", r -> r.leave().settledSeconds()),
                new Series("coordinator's node killed: a new coordinator runs", Row::newCoordinatorSeconds),
                new Series("coordinator's node killed: its partitions serve again", Row::servedAgainSeconds))));
        written.add(plot(out.resolve("scale-rounds.png"), "Rebalance rounds against compute nodes", "rounds", rows, List.of(
                new Series("join", r -> r.join().rounds()), new Series("leave", r -> r.leave().rounds()),
                new Series("target", r -> 2))));
        written.add(plot(out.resolve("scale-lowest.png"), "Lowest second against compute nodes", "% of the usual rate", rows,
                List.of(new Series("join", r -> 100 * r.join().lowestShare()), new Series("leave", r -> 100 * r.leave().lowestShare()),
                        new Series("target", r -> 50))));
        return section(rows);
    }

    /** One size's figures from its run's --json. */
    static Row read(int nodes, Path json) throws IOException {
        JsonNode node = new ObjectMapper().readTree(json.toFile());
        JsonNode kill = node.get("coordinatorKill");
        if (kill == null) {
            throw new IllegalStateException(json + " has no coordinatorKill");
        }
        Change join = Change.of(node, "join", json);
        return new Row(nodes, node.get("join").get("usualOpsPerSec").asDouble(), join, Change.of(node, "leave", json),
                kill.get("newCoordinatorSeconds").asDouble(), kill.get("servedAgainSeconds").asDouble(), kill.get("partitions").asInt());
    }

    static String csv(List<Row> rows) {
        StringBuilder csv = new StringBuilder("compute_nodes,partitions,usual_ops_per_s,join_settled_s,join_rounds,join_moved,"
                + "join_lowest_share,join_longest_op_s,leave_settled_s,leave_rounds,leave_moved,leave_lowest_share,"
                + "leave_longest_op_s,new_coordinator_s,coordinator_node_partitions_served_again_s,coordinator_node_partitions\n");
        for (Row r : rows) {
            csv.append(String.format(Locale.ROOT, "%d,%d,%.0f,%.2f,%d,%d,%.3f,%.3f,%.2f,%d,%d,%.3f,%.3f,%.2f,%.2f,%d%n",
                    r.computeNodes(), PARTITIONS, r.usualOpsPerSec(), r.join().settledSeconds(), r.join().rounds(), r.join().moved(),
                    r.join().lowestShare(), r.join().longestOpSeconds(), r.leave().settledSeconds(), r.leave().rounds(),
                    r.leave().moved(), r.leave().lowestShare(), r.leave().longestOpSeconds(), r.newCoordinatorSeconds(),
                    r.servedAgainSeconds(), r.coordinatorPartitions()));
        }
        return csv.toString();
    }

    /** The index section: the three plots and one line per size. */
    static String section(List<Row> rows) {
        StringBuilder s = new StringBuilder("## Scale: a join, a leave and the coordinator's failover at "
                + rows.stream().map(r -> Integer.toString(r.computeNodes())).reduce((a, b) -> a + ", " + b).orElse("")
                + " compute nodes\n\n![Seconds](scale-seconds.png)\n\n![Rounds](scale-rounds.png)\n\n![Lowest second](scale-lowest.png)\n\n"
                + "`bench --cluster --join-leave --kill-coordinator`, " + PARTITIONS + " partitions, every node an actor system of"
                + " this JVM, so each node gets a sliver of this machine's cores (docs/benchmarks.md). Targets: settled in at most"
                + " 2 rounds, no second below 50%, serving again at most 5 s after the coordinator's node is killed.\n\n");
        for (Row r : rows) {
            s.append(String.format(Locale.ROOT, "- %d compute nodes (usual %,.0f ops/s): join settled in %.1f s, %d rounds, %d"
                    + " moved, lowest second %.0f%%; leave %.1f s, %d rounds, %d moved, lowest %.0f%%; the coordinator's node"
                    + " killed: a new coordinator after %.1f s, its %d partitions served again after %.1f s.%n", r.computeNodes(),
                    r.usualOpsPerSec(), r.join().settledSeconds(), r.join().rounds(), r.join().moved(), 100 * r.join().lowestShare(),
                    r.leave().settledSeconds(), r.leave().rounds(), r.leave().moved(), 100 * r.leave().lowestShare(),
                    r.newCoordinatorSeconds(), r.coordinatorPartitions(), r.servedAgainSeconds()));
        }
        return s.append("\nData: [scale.csv](scale.csv).").toString();
    }

    private record Series(String name, ToDoubleFunction<Row> y) {
    }

    private static Path plot(Path png, String title, String yAxis, List<Row> rows, List<Series> series) throws IOException {
        XYChart chart = new XYChartBuilder().width(800).height(500).title(title).xAxisTitle("compute nodes").yAxisTitle(yAxis).build();
        chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
        chart.getStyler().setYAxisMin(0.0);
        double[] x = rows.stream().mapToDouble(Row::computeNodes).toArray();
        for (Series one : series) {
            chart.addSeries(one.name(), x, rows.stream().mapToDouble(one.y()).toArray());
        }
        BitmapEncoder.saveBitmap(chart, png.toString(), BitmapEncoder.BitmapFormat.PNG);
        if (!Files.isRegularFile(png)) {
            throw new IOException("XChart wrote no " + png);
        }
        return png;
    }
}
