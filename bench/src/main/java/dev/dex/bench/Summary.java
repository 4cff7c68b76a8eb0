package dev.dex.bench;

import java.io.PrintWriter;
import java.util.List;
import java.util.Locale;
import java.util.SortedMap;
import java.util.stream.Collectors;

import dev.dex.rdma.FaultInjectingRemoteMemory;
import dev.dex.rdma.FaultPlan;
import dev.dex.rdma.VerbSnapshot;

/** Prints a {@link BenchResult} for people: one labelled line per aspect. */
final class Summary {
    private Summary() {
    }

    static void print(BenchResult r, PrintWriter out) {
        BenchSettings c = r.config();
        String dist = c.workload() == Workload.DELETE_HEAVY ? "each deleted once, in a random order"
                : c.distribution() == Distribution.ZIPF ? String.format(Locale.ROOT, "zipf, theta %.2f", c.theta()) : "uniform";
        line(out, "workload", "%s (%s)", c.workload().cliName(), c.workload().mix());
        line(out, "mode", "%s, %d compute node%s, %s%s", c.mode().cliName(), c.computeNodes(), plural(c.computeNodes()),
                c.mode().usesFabric() ? c.memoryNodes() + " memory node" + plural(c.memoryNodes()) : "no memory nodes",
                c.mode().partitioned() ? ", " + c.partitions() + " partitions" + (c.redoLog() ? ", redo log on" : "")
                        + (c.commitBatch() > 1 ? ", " + c.commitBatch() + " operations per commit" : "") : "");
        line(out, "keys", "%,d (%s)%s", c.keys(), dist, c.keyBytes() == 8 ? "" : ", " + c.keyBytes() + " bytes each");
        line(out, "ops", "%,d measured after %,d warm-up, %d thread%s, seed %d", c.ops(), c.warmup(), c.threads(),
                plural(c.threads()), c.seed());
        if (c.mode().usesFabric()) {
            line(out, "fabric", "%s, %,d ns injected latency per verb%s%s", c.fabric(), c.latencyNs(),
                    c.fabric().equals("tcp") ? " on top of loopback TCP" : "",
                    c.replicas() > 1 ? ", " + c.replicas() + " replicas per memory server" : "");
        } else {
            line(out, "fabric", "none (the map lives in this JVM)");
        }
        line(out, "tree", "%s bulk-loaded%s", bytes(r.treeBytes()), c.mode().usesFabric() ? "" : " (estimated; skiplist has no tree)");
        if (c.mode().partitioned()) {
            line(out, "cache", "%s per compute node (%.3f of the tree)", bytes(r.cacheBytes()), r.cacheRatio());
        } else {
            line(out, "cache", "none in mode %s", c.mode().cliName());
        }
        line(out, "throughput", "%,.0f ops/s (%.3f s)", r.throughputOpsPerSec(), r.wallNanos() / 1e9);
        line(out, "latency", "p50 %s  p99 %s  p99.9 %s  max %s  mean %s", micros(r.p50Nanos()), micros(r.p99Nanos()),
                micros(r.p999Nanos()), micros(r.maxNanos()), micros(Math.round(r.meanNanos())));
        VerbSnapshot v = r.verbs();
        line(out, "verbs/op", "reads %.3f  writes %.3f  atomics %.3f  two-sided %.4f  all %.3f  bytes %.1f",
                r.perOp(v.reads()), r.perOp(v.writes()), r.perOp(v.atomics()), r.perOp(v.twoSided()),
                r.perOp(v.verbs()), r.perOp(v.bytes()));
        line(out, "cache hits", "%s", Double.isNaN(r.cacheHitRatio()) ? "n/a"
                : String.format(Locale.ROOT, "%.2f%%", 100 * r.cacheHitRatio()));
        if (!Double.isNaN(r.leafAdmission())) {
            line(out, "leaf admission", "%s", c.tunesLeafAdmission()
                    ? String.format(Locale.ROOT, "auto, P_A %.4f at the end", r.leafAdmission())
                    : String.format(Locale.ROOT, "P_A %.4f", r.leafAdmission()));
        }
        StringBuilder outcomes = new StringBuilder();
        for (Outcome o : Outcome.values()) {
            if (o == Outcome.FAILED && c.faults() == null) {
                continue;
            }
            outcomes.append(outcomes.length() == 0 ? "" : "  ").append(o.label()).append(' ')
                    .append(String.format(Locale.ROOT, "%,d", r.outcome(o)));
        }
        line(out, "outcomes", "%s", outcomes);
        out.flush();
    }

    /**
     * The faults of a run with {@code --inject-faults}: what the injectors of every engine's connection did, the
     * operations that failed (warm-up included) by what they threw, and the partitions taken up again.
     */
    static void printFaults(FaultPlan plan, List<FaultInjectingRemoteMemory> injectors, SortedMap<String, Long> failures,
                            PartitionRecovery recovery, PrintWriter out) {
        StringBuilder kinds = new StringBuilder();
        long injected = 0;
        long applied = 0;
        for (FaultPlan.Kind kind : plan.kinds()) {
            long n = injectors.stream().mapToLong(i -> i.injected(kind)).sum();
            injected += n;
            kinds.append(kinds.length() == 0 ? "" : ", ").append(kind.cliName()).append(' ')
                    .append(String.format(Locale.ROOT, "%,d", n));
        }
        for (FaultInjectingRemoteMemory injector : injectors) {
            applied += injector.appliedBeforeFailing();
        }
        line(out, "faults", "%,d injected at rate %s (%s), %,d of them applied before failing", injected, plan, kinds, applied);
        long failed = failures.values().stream().mapToLong(Long::longValue).sum();
        String by = failures.entrySet().stream().map(e -> String.format(Locale.ROOT, "%s %,d", e.getKey(), e.getValue()))
                .collect(Collectors.joining(", "));
        line(out, "failures", "%,d operations%s%s", failed, by.isEmpty() ? "" : " (" + by + ")", recovery == null ? ""
                : String.format(Locale.ROOT, "; %,d partitions given up and acquired again, %,d acquires failed",
                        recovery.recovered(), recovery.failedAcquires()));
        out.flush();
    }

    private static void line(PrintWriter out, String label, String format, Object... args) {
        out.printf(Locale.ROOT, "%-12s %s%n", label, String.format(Locale.ROOT, format, args));
    }

    private static String plural(long n) {
        return n == 1 ? "" : "s";
    }

    private static String micros(long nanos) {
        return String.format(Locale.ROOT, "%.1f us", nanos / 1e3);
    }

    private static String bytes(long n) {
        if (n >= 10L << 20) {
            return String.format(Locale.ROOT, "%,d MiB", n >> 20);
        }
        return String.format(Locale.ROOT, "%,.1f KiB", n / 1024.0);
    }
}
