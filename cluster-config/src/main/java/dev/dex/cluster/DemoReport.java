package dev.dex.cluster;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

import org.HdrHistogram.Histogram;

import dev.dex.actors.node.ComputeNode;

/**
 * What the demo prints about its runs on stdout, and writes where asked: the mix's throughput, latency and verbs per
 * operation (and, with --json, the same as JSON), a partition map, the operations per second during the scale-out,
 * and the --timeline CSV and plot.
 */
final class DemoReport {
    private final PrintWriter out;
    /** Compute nodes before the scale-out. */
    private final int computeNodes;
    /** --rate: operations started per second in an open loop; null or 0 for a closed loop. */
    private final Long rate;
    /** --json, or null. */
    private final java.nio.file.Path json;

    DemoReport(PrintWriter out, int computeNodes, Long rate, java.nio.file.Path json) {
        this.out = out;
        this.computeNodes = computeNodes;
        this.rate = rate;
        this.json = json;
    }

    /**
     * The mix's throughput (against the engine alone's, unless {@code engine} is NaN), latency percentiles and verbs
     * per operation over all compute nodes between the statuses {@code before} and {@code after} it; also as JSON
     * when --json was given.
     */
    void printMix(DemoWorkload.Result mix, List<ComputeNode.Status> before, List<ComputeNode.Status> after, DexSettings settings,
            long n, double engine) throws java.io.IOException {
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
        out.printf("%nmix %s through the client actor: %,d operations (%,d gets, %,d puts%s) in %.2f s, %s%n", workload, mix.ops(),
                mix.gets(), mix.puts(), mix.scans() > 0 ? String.format(", %,d scans of %d", mix.scans(), DemoWorkload.SCAN_LENGTH) : "",
                mix.nanos() / 1e9, rate != null && rate > 0
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
        // Heap bytes allocated per operation: the nodes' JVMs (each counted once) and this one, the client's.
        java.util.Map<String, Long> nodeJvms = new java.util.HashMap<>();
        for (ComputeNode.Status a : after) {
            for (ComputeNode.Status b : before) {
                if (b.address().equals(a.address()) && a.jvm() != null && a.jvm().equals(b.jvm()) && a.jvmAllocatedBytes() >= 0
                        && b.jvmAllocatedBytes() >= 0) {
                    nodeJvms.put(a.jvm(), a.jvmAllocatedBytes() - b.jvmAllocatedBytes());
                }
            }
        }
        boolean shared = nodeJvms.containsKey(dev.dex.actors.node.JvmAllocation.jvm());
        nodeJvms.remove(dev.dex.actors.node.JvmAllocation.jvm());
        long nodeBytes = nodeJvms.values().stream().mapToLong(Long::longValue).sum();
        if (mix.allocated() >= 0) {
            out.printf(shared && nodeJvms.isEmpty() ? "heap allocated per operation: %,.0f bytes (one JVM: the client and every node)%n"
                    : "heap allocated per operation: %,.0f bytes in the client's JVM, %,.0f in the compute nodes' (%d JVM(s))%n",
                    mix.allocated() / ops, nodeBytes / ops, nodeJvms.size());
        }
        if (json != null) {
            root = MAPPER.createObjectNode();
            root.put("workload", workload).put("mode", "cluster").put("keys", n).put("ops", mix.ops())
                    .put("computeNodes", computeNodes).put("throughputOpsPerSec", throughput)
                    .put("inFlight", settings.demoInFlight()).put("rateOpsPerSec", rate == null ? 0 : rate);
            if (!Double.isNaN(engine)) {
                root.put("engineOpsPerSec", engine).put("clusterToEngine", throughput / engine);
            }
            root.putObject("perOp").put("reads", delta[0] / ops).put("writes", delta[1] / ops).put("atomics", delta[2] / ops)
                    .put("twoSided", delta[3] / ops).put("bytes", delta[4] / ops);
            root.putObject("heapAllocatedPerOp").put("clientJvm", mix.allocated() / ops).put("computeNodeJvms", nodeBytes / ops)
                    .put("oneJvm", shared && nodeJvms.isEmpty());
            root.putObject("latencyNs").put("p50", h.getValueAtPercentile(50)).put("p99", h.getValueAtPercentile(99))
                    .put("p999", h.getValueAtPercentile(99.9));
            MAPPER.writerWithDefaultPrettyPrinter().writeValue(json.toFile(), root);
        }
    }

    /**
     * The splits of a {@code bench --cluster --splits} run into --json: whether they were on, how many the nodes made, and
     * each node's operations per second over its last load window (the spread the split target is about).
     */
    void putSplits(boolean on, long made, List<ComputeNode.Status> after) throws java.io.IOException {
        if (json == null || root == null) {
            return;
        }
        com.fasterxml.jackson.databind.node.ObjectNode node = root.putObject("splits").put("on", on).put("made", made);
        com.fasterxml.jackson.databind.node.ArrayNode loads = node.putArray("nodeOpsPerSec");
        after.forEach(status -> loads.add(ClusterMember.load(status)));
        MAPPER.writerWithDefaultPrettyPrinter().writeValue(json.toFile(), root);
    }

    /** A mix to measure. */
    interface Mix {
        DemoWorkload.Result run() throws InterruptedException;
    }

    /** A measured mix and the compute nodes' statuses after it. */
    record Measured(DemoWorkload.Result mix, List<ComputeNode.Status> after) {
    }

    /**
     * Runs {@code mix} between two readings of the compute nodes' statuses, tracing about one in {@code traceSample} of its
     * operations (0: none), then prints it ({@link #printMix}) and, if traced, its per-hop table ({@link #printHops}).
     */
    Measured measure(org.apache.pekko.actor.typed.ActorSystem<?> clientSystem, dev.dex.actors.client.DexClientApi client,
                     int traceSample, DexSettings settings, long n, double engine, Mix mix) throws Exception {
        List<ComputeNode.Status> before = ClusterMember.computeStatuses(clientSystem);
        dev.dex.actors.client.HopTable hops = traceSample > 0 ? new dev.dex.actors.client.HopTable() : null;
        if (hops != null) {
            client.trace(traceSample, hops);
        }
        DemoWorkload.Result result;
        try {
            result = mix.run();
        } finally {
            client.trace(0, null);
        }
        List<ComputeNode.Status> after = ClusterMember.computeStatuses(clientSystem);
        printMix(result, before, after, settings, n, engine);
        if (hops != null) {
            printHops(hops);
        }
        return new Measured(result, after);
    }

    /**
     * The open loop after the closed one: its rate (a {@code share} of the closed loop's throughput) and latency
     * percentiles, from each operation's scheduled start; also into --json as {@code openLoop}.
     */
    void printOpenLoop(DemoWorkload.Result open, long rate, double share) throws java.io.IOException {
        Histogram h = open.latency();
        double throughput = open.ops() / (open.nanos() / 1e9);
        out.printf("open loop    %,.0f ops/s (started at %,d a second, %.0f%% of the closed loop's):   p50 %.0f us   p99 %.0f us"
                + "   p99.9 %.0f us%n", throughput, rate, 100 * share, h.getValueAtPercentile(50) / 1e3, h.getValueAtPercentile(99) / 1e3,
                h.getValueAtPercentile(99.9) / 1e3);
        if (json != null && root != null) {
            var node = root.putObject("openLoop").put("rateOpsPerSec", rate).put("share", share).put("throughputOpsPerSec", throughput)
                    .put("ops", open.ops());
            node.putObject("latencyNs").put("p50", h.getValueAtPercentile(50)).put("p99", h.getValueAtPercentile(99))
                    .put("p999", h.getValueAtPercentile(99.9));
            MAPPER.writerWithDefaultPrettyPrinter().writeValue(json.toFile(), root);
        }
    }

    /** The per-hop table of the traced operations of the mix; also into --json as {@code hops} (nanoseconds). */
    void printHops(dev.dex.actors.client.HopTable hops) throws java.io.IOException {
        hops.print(out);
        if (json != null && root != null) {
            com.fasterxml.jackson.databind.node.ArrayNode rows = root.putArray("hops");
            for (dev.dex.actors.client.HopTable.Row r : hops.rows()) {
                rows.addObject().put("hop", r.hop()).put("passed", r.passed()).put("p50Ns", r.p50()).put("p90Ns", r.p90())
                        .put("p99Ns", r.p99()).put("meanNs", r.mean());
            }
            MAPPER.writerWithDefaultPrettyPrinter().writeValue(json.toFile(), root);
        }
    }

    private static final com.fasterxml.jackson.databind.ObjectMapper MAPPER = new com.fasterxml.jackson.databind.ObjectMapper();
    /** What --json holds so far (the mix, then the join and the leave), or null. */
    private com.fasterxml.jackson.databind.node.ObjectNode root;

    /**
     * Operations completed in each whole second of the mix during the scale-out and the leave, and for each change the
     * lowest second from its start until the map settled (and a second more) against the usual rate, the median second
     * before the join (the first, which ramps up, left out), with the longest operation sent meanwhile ({@code longest}:
     * nanoseconds, by the second an operation was sent); also into --json as {@code join} and {@code leave}. The join's
     * seconds end before the leave's start, and the leave's a second before the one {@code killAt} falls in (NaN: no kill),
     * so that one change's stall does not count as another's.
     */
    void printChanges(java.util.concurrent.atomic.AtomicLongArray perSecond, java.util.concurrent.atomic.AtomicLongArray longest,
            double joinAt, double settledAt, double leaveAt, double leftAt, double killAt, int seconds, Rounds joinRounds,
            Rounds leaveRounds) throws java.io.IOException {
        List<Long> counts = new ArrayList<>();
        for (int i = 0; i < Math.min(seconds, perSecond.length()); i++) {
            counts.add(perSecond.get(i));
        }
        out.printf("operations per second (join at %.1f s, settled at %.1f s; leave at %.1f s, settled at %.1f s): %s%n", joinAt,
                settledAt, leaveAt, leftAt, counts.stream().map(c -> String.format("%,d", c)).toList());
        List<Long> before = new ArrayList<>(counts.subList(0, Math.min(counts.size(), (int) joinAt)));
        if (before.size() > 1) {
            before.remove(0);
        }
        if (!before.isEmpty()) {
            before.sort(null);
            long usual = before.get(before.size() / 2);
            // The join's seconds end before the one the leave starts in; the leave's a second before the one the kill
            // falls in (operations sent then may wait for the killed node); each keeps its first second at least.
            printChange("join", counts, longest, usual, joinAt, settledAt, Math.max((int) joinAt + 1, (int) leaveAt), joinRounds);
            printChange("leave", counts, longest, usual, leaveAt, leftAt,
                    Double.isNaN(killAt) ? Integer.MAX_VALUE : Math.max((int) leaveAt + 1, (int) killAt - 1), leaveRounds);
        }
        if (root != null) {
            MAPPER.writerWithDefaultPrettyPrinter().writeValue(json.toFile(), root);
        }
    }

    /** With --json: the killed compute node's partitions and the seconds until they all served again. */
    void putKill(double servedAgainSeconds, int partitions) {
        if (root != null) {
            root.putObject("kill").put("servedAgainSeconds", servedAgainSeconds).put("partitions", partitions);
        }
    }

    /**
     * With --json: the shard coordinator's node was killed; the seconds until a new coordinator ran and until the killed
     * node's partitions all served again, and how many it held.
     */
    void putCoordinatorKill(double coordinatorSeconds, double servedAgainSeconds, int partitions) {
        if (root != null) {
            root.putObject("coordinatorKill").put("newCoordinatorSeconds", coordinatorSeconds)
                    .put("servedAgainSeconds", servedAgainSeconds).put("partitions", partitions);
        }
    }

    /** Writes --json as it stands (when given and measured). */
    void write() throws java.io.IOException {
        if (root != null) {
            MAPPER.writerWithDefaultPrettyPrinter().writeValue(json.toFile(), root);
        }
    }

    private void printChange(String name, List<Long> counts, java.util.concurrent.atomic.AtomicLongArray longest, long usual,
            double at, double settledAt, int before, Rounds rounds) {
        int from = (int) at;
        int to = Math.min(Math.min(counts.size(), (int) Math.ceil(settledAt) + 1), before);
        if (from >= to) {
            return;
        }
        long lowest = Long.MAX_VALUE;
        long longestNanos = 0;
        for (int i = from; i < to; i++) {
            lowest = Math.min(lowest, counts.get(i));
            longestNanos = Math.max(longestNanos, i < longest.length() ? longest.get(i) : 0);
        }
        double share = usual == 0 ? 0.0 : (double) lowest / usual;
        out.printf("%-5s lowest second until settled: %,d operations, %.0f%% of the usual %,d per second; longest operation %.3f s;"
                + " settled %.2f s after it began, in %d rebalance round(s) that moved %d partitions%n", name, lowest, 100 * share,
                usual, longestNanos / 1e9, settledAt - at, rounds.rounds(), rounds.moves());
        if (root != null) {
            root.putObject(name).put("lowestSecondOps", lowest).put("usualOpsPerSec", usual).put("lowestShare", share)
                    .put("longestOpSeconds", longestNanos / 1e9).put("settledSeconds", settledAt - at)
                    .put("rebalanceRounds", rounds.rounds()).put("partitionsMoved", rounds.moves());
        }
    }

    /**
     * Rebalance rounds that moved partitions, and the partitions they moved, as counted by the shard coordinator of the
     * nodes in this JVM ({@code dex_rebalance_rounds}, {@code dex_rebalance_moves}).
     */
    record Rounds(long rounds, long moves) {
        /** The counts summed over {@code systems}: the coordinator's node counts them, whichever it is. */
        static Rounds of(List<? extends org.apache.pekko.actor.typed.ActorSystem<?>> systems) {
            long rounds = 0;
            long moves = 0;
            for (var system : systems) {
                dev.dex.actors.DexMetrics metrics = dev.dex.actors.DexMetrics.get(system);
                rounds += metrics.rebalanceRounds();
                moves += metrics.rebalanceMoves();
            }
            return new Rounds(rounds, moves);
        }

        Rounds since(Rounds before) {
            return new Rounds(rounds - before.rounds, moves - before.moves);
        }
    }

    /** One line per compute node: its address and the partitions it holds. */
    void printMap(List<ComputeNode.Status> statuses) {
        for (ComputeNode.Status s : statuses) {
            out.printf("  %-30s %2d partitions %s%n", s.address(), s.partitionsHeld().size(), s.partitionsHeld());
        }
    }

    /**
     * Writes the scale-out's and the leave's throughput per 100 ms ({@code timelineFile}, CSV: seconds since the mix
     * started, operations per second in that 100 ms; only the 100 ms wholly before the mix was stopped at
     * {@code endAt}) and its plot, with the join, the settled map, the leave and the
     * map back as vertical markers; returns one line of reading of it. {@code perTick} holds the operations completed
     * in each 100 ms of the mix.
     */
    String writeTimeline(java.nio.file.Path timelineFile, java.util.concurrent.atomic.AtomicLongArray perTick, double joinAt,
            double settledAt, double leaveAt, double leftAt, double endAt) throws java.io.IOException {
        int ticks = Math.min(perTick.length(), (int) (endAt * 1e9 / DemoWorkload.TICK_NANOS));
        double perSecond = 1e9 / DemoWorkload.TICK_NANOS;
        StringBuilder csv = new StringBuilder("t_seconds,ops_per_second\n");
        double[] t = new double[ticks];
        double[] rate = new double[ticks];
        double usual = 0;
        int before = 0;
        double lowest = Double.MAX_VALUE;
        for (int i = 0; i < ticks; i++) {
            t[i] = (i + 0.5) * DemoWorkload.TICK_NANOS / 1e9;
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
        String reading = String.format(java.util.Locale.ROOT, "%d compute node(s), one more joins at %.1f s: the partitions"
                + " settle %.1f s later; it leaves at %.1f s and the map is back %.1f s later. The usual rate before the join"
                + " is %,.0f ops/s; the lowest 100 ms after it, %,.0f ops/s (%.0f%%).", computeNodes, joinAt, settledAt - joinAt,
                leaveAt, leftAt - leaveAt, usual, lowest == Double.MAX_VALUE ? 0 : lowest,
                usual == 0 ? 0 : 100 * (lowest == Double.MAX_VALUE ? 0 : lowest) / usual);
        out.println("timeline: " + timelineFile + " and " + png);
        return reading;
    }
}
