package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import picocli.CommandLine;

/** Runs the whole command in-process on tiny configurations. */
class BenchCommandRunTest {
    private static final Set<String> TOP_LEVEL = Set.of("workload", "mode", "fabric", "dist", "theta", "keys", "ops", "threads",
            "computeNodes", "cacheRatio", "cacheBytes", "throughputOpsPerSec", "perOp", "cacheHitRatio", "latencyNs", "keyBytes", "replicas",
            "leafAdmission", "leafAdmissionAuto");

    @TempDir
    Path dir;

    record Run(int exitCode, String out, String err, BenchResult result) {
    }

    /** What the command line passes when --partitions is not given (dex.tree.partitions). */
    private static final int DEFAULT_PARTITIONS = 64;

    private static Run bench(String... args) {
        BenchCommand command = new BenchCommand(DEFAULT_PARTITIONS);
        CommandLine cmd = BenchCommand.commandLine(command);
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        cmd.setOut(new PrintWriter(out, true));
        cmd.setErr(new PrintWriter(err, true));
        int code = cmd.execute(args);
        lastCopy = command.lastCopy();
        lastDeletes = command.lastDeletes();
        return new Run(code, out.toString(), err.toString(), command.lastResult());
    }

    /** What the last delete-heavy {@link #bench} found in the tree, or null. */
    private static DeleteHeavyReport lastDeletes;

    /** What the copy under load of the last {@link #bench} measured, or null. */
    private static BenchRunner.CopyReport lastCopy;

    private static String[] tiny(String... extra) {
        List<String> args = new ArrayList<>(List.of("--keys", "20000", "--ops", "20000", "--warmup", "2000", "--threads", "2"));
        args.addAll(List.of(extra));
        return args.toArray(String[]::new);
    }

    private static JsonNode readJson(Path file) throws IOException {
        return new ObjectMapper().readTree(file.toFile());
    }

    private static void assertSaneJson(JsonNode json, String workload, String mode) {
        Set<String> fields = new TreeSet<>();
        json.fieldNames().forEachRemaining(fields::add);
        assertEquals(new TreeSet<>(TOP_LEVEL), fields);
        assertEquals(workload, json.get("workload").asText());
        assertEquals(mode, json.get("mode").asText());
        assertEquals("zipf", json.get("dist").asText());
        assertEquals(0.99, json.get("theta").asDouble());
        assertEquals(20_000, json.get("keys").asLong());
        assertEquals(20_000, json.get("ops").asLong());
        assertEquals(2, json.get("threads").asInt());
        assertEquals(1, json.get("computeNodes").asInt());
        assertEquals(1, json.get("replicas").asInt());
        assertEquals(0.08, json.get("cacheRatio").asDouble());
        assertTrue(json.get("cacheBytes").asLong() > 0);
        assertTrue(json.get("throughputOpsPerSec").asDouble() > 0);
        for (String verb : List.of("reads", "writes", "atomics", "twoSided", "bytes")) {
            assertTrue(json.get("perOp").get(verb).isNumber(), verb);
            assertTrue(json.get("perOp").get(verb).asDouble() >= 0, verb);
        }
        if (mode.equals("baseline") || mode.equals("skiplist")) {
            assertTrue(json.get("cacheHitRatio").isNull(), "no cache in mode " + mode);
        } else {
            double hit = json.get("cacheHitRatio").asDouble();
            assertTrue(hit >= 0 && hit <= 1, "hit ratio " + hit);
        }
        long p50 = json.get("latencyNs").get("p50").asLong();
        long p99 = json.get("latencyNs").get("p99").asLong();
        long p999 = json.get("latencyNs").get("p999").asLong();
        assertTrue(0 < p50 && p50 <= p99 && p99 <= p999, p50 + " " + p99 + " " + p999);
    }

    @Test
    void baselineWriteIntensiveReportsVerbsPerOperation() throws IOException {
        Path json = dir.resolve("baseline.json");
        Run run = bench(tiny("--mode", "baseline", "--workload", "write-intensive", "--json", json.toString()));
        assertEquals(0, run.exitCode(), run.err());
        JsonNode result = readJson(json);
        assertSaneJson(result, "write-intensive", "baseline");
        JsonNode perOp = result.get("perOp");
        // A lookup reads 3 verbs per level; an update adds a CAS, a version re-read and two writes.
        assertTrue(perOp.get("reads").asDouble() >= 3, perOp.toString());
        assertTrue(perOp.get("atomics").asDouble() > 0.3, perOp.toString());
        assertTrue(perOp.get("writes").asDouble() > 0.6, perOp.toString());
        assertEquals(0, perOp.get("twoSided").asDouble());
        assertTrue(perOp.get("bytes").asDouble() > 1024, perOp.toString());
        assertEquals(20_000, run.result().outcome(Outcome.FOUND), "lookups and updates of loaded keys all find them");
        assertEquals(20_000, Arrays.stream(run.result().outcomes()).sum());
        assertTrue(run.out().contains("throughput") && run.out().contains("verbs/op"), run.out());
    }

    @Test
    void skipListMakesNoVerbs() throws IOException {
        Path json = dir.resolve("skiplist.json");
        Run run = bench(tiny("--mode", "skiplist", "--workload", "write-intensive", "--json", json.toString()));
        assertEquals(0, run.exitCode(), run.err());
        JsonNode result = readJson(json);
        assertSaneJson(result, "write-intensive", "skiplist");
        for (String verb : List.of("reads", "writes", "atomics", "twoSided", "bytes")) {
            assertEquals(0, result.get("perOp").get(verb).asDouble(), verb);
        }
        assertEquals(20_000, run.result().outcome(Outcome.FOUND));
        assertEquals(20_000, Arrays.stream(run.result().outcomes()).sum());
    }

    @Test
    void dexCachesAndTakesNoRemoteLockOnOwnedLeaves() throws IOException {
        Path json = dir.resolve("dex.json");
        Run run = bench(tiny("--mode", "dex", "--workload", "write-intensive", "--json", json.toString()));
        assertEquals(0, run.exitCode(), run.err());
        JsonNode result = readJson(json);
        assertSaneJson(result, "write-intensive", "dex");
        JsonNode perOp = result.get("perOp");
        assertEquals(0, perOp.get("atomics").asDouble(), "updates of owned leaves take no remote lock: " + perOp);
        assertTrue(perOp.get("reads").asDouble() < 3, "cached inner nodes: fewer reads than one validated node read: " + perOp);
        assertTrue(result.get("cacheHitRatio").asDouble() > 0.5, result.toString());
        assertEquals(20_000, run.result().outcome(Outcome.FOUND));
        assertEquals(0.1, result.get("leafAdmission").asDouble(), 1e-9, "the default P_A, fixed");
        assertFalse(result.get("leafAdmissionAuto").asBoolean());
        assertTrue(run.out().contains("leaf admission P_A 0.1000"), run.out());
    }

    @Test
    void autoLeafAdmissionReportsWhereTuningTookP_A() throws IOException {
        Path json = dir.resolve("auto.json");
        Run run = bench(tiny("--mode", "dex", "--workload", "read-intensive", "--leaf-admission", "auto", "--json",
                json.toString()));
        assertEquals(0, run.exitCode(), run.err());
        JsonNode result = readJson(json);
        assertTrue(result.get("leafAdmissionAuto").asBoolean(), result.toString());
        double pa = result.get("leafAdmission").asDouble();
        // 22,000 operations are one period of 16,384 (and a report of 256 per session to start): one step, from 0.1 to 0.05.
        assertEquals(0.05, pa, 1e-9, "tuned from where it started, 0.1, by the first step: " + pa);
        assertTrue(run.out().contains(String.format(java.util.Locale.ROOT, "leaf admission auto, P_A %.4f at the end", pa)),
                run.out());
    }

    @Test
    void noCacheReportsNoLeafAdmission() throws IOException {
        Path json = dir.resolve("skiplist.json");
        Run run = bench(tiny("--mode", "skiplist", "--workload", "read-only", "--json", json.toString()));
        assertEquals(0, run.exitCode(), run.err());
        assertTrue(readJson(json).get("leafAdmission").isNull());
        assertFalse(run.out().contains("leaf admission"), run.out());
    }

    @Test
    void widerKeysMakeATallerTreeAndEveryOperationStillFindsItsKey() throws IOException {
        Path narrow = dir.resolve("narrow.json");
        Path wide = dir.resolve("wide.json");
        Run eight = bench(tiny("--mode", "baseline", "--workload", "write-intensive", "--json", narrow.toString()));
        Run sixtyFour = bench(tiny("--mode", "baseline", "--workload", "write-intensive", "--key-bytes", "64", "--json", wide.toString()));
        assertEquals(0, eight.exitCode(), eight.err());
        assertEquals(0, sixtyFour.exitCode(), sixtyFour.err());
        assertEquals(8, readJson(narrow).get("keyBytes").asInt());
        assertEquals(64, readJson(wide).get("keyBytes").asInt());
        assertTrue(sixtyFour.out().contains("20,000 (zipf, theta 0.99), 64 bytes each"), sixtyFour.out());
        assertEquals(20_000, sixtyFour.result().outcome(Outcome.FOUND), "every bulk-loaded key of 64 bytes is found");
        // 20,000 keys: 3 levels of 59-entry nodes, 5 of 11-entry ones; the baseline reads every level of every path.
        double narrowReads = readJson(narrow).get("perOp").get("reads").asDouble();
        double wideReads = readJson(wide).get("perOp").get("reads").asDouble();
        assertTrue(wideReads > narrowReads + 3, "a taller tree: " + narrowReads + " vs " + wideReads + " reads per operation");
    }

    @Test
    void shermanReadsEveryLeafAndPartitionedReadsEveryLevel() throws IOException {
        Path sherman = dir.resolve("sherman.json");
        Path partitioned = dir.resolve("partitioned.json");
        Run a = bench(tiny("--mode", "sherman", "--workload", "read-only", "--json", sherman.toString()));
        Run b = bench(tiny("--mode", "partitioned", "--workload", "read-only", "--json", partitioned.toString()));
        assertEquals(0, a.exitCode(), a.err());
        assertEquals(0, b.exitCode(), b.err());
        JsonNode s = readJson(sherman);
        JsonNode p = readJson(partitioned);
        assertSaneJson(s, "read-only", "sherman");
        assertSaneJson(p, "read-only", "partitioned");
        assertTrue(s.get("perOp").get("reads").asDouble() >= 1.0, "sherman never caches a leaf: " + s);
        assertTrue(p.get("perOp").get("reads").asDouble() > s.get("perOp").get("reads").asDouble(),
                "no cache reads more than an inner-node cache");
        assertEquals(0, p.get("cacheHitRatio").asDouble(), "partitioned has no cache");
        assertEquals(0, s.get("perOp").get("atomics").asDouble());
    }

    @Test
    void offloadOnlySendsTwoSidedMessagesAndNoOffloadNone() throws IOException {
        Path offload = dir.resolve("offload.json");
        Path none = dir.resolve("none.json");
        String[] common = {"--workload", "write-intensive", "--keys", "20000", "--ops", "20000", "--warmup", "2000",
                "--threads", "2", "--cache-ratio", "0.01", "--partitions", "4", "--memory-threads", "2"};
        Run a = bench(concat(common, "--mode", "offload-only", "--json", offload.toString()));
        Run b = bench(concat(common, "--mode", "no-offload", "--json", none.toString()));
        assertEquals(0, a.exitCode(), a.err());
        assertEquals(0, b.exitCode(), b.err());
        JsonNode withOffload = readJson(offload).get("perOp");
        JsonNode without = readJson(none).get("perOp");
        assertTrue(withOffload.get("twoSided").asDouble() > 0.1, "misses below cached shared nodes are offloaded: " + withOffload);
        assertEquals(0, without.get("twoSided").asDouble(), without.toString());
        assertTrue(withOffload.get("reads").asDouble() < without.get("reads").asDouble(),
                "offloading replaces remote reads: " + withOffload + " vs " + without);
        assertEquals(20_000, a.result().outcome(Outcome.FOUND));
        assertEquals(20_000, b.result().outcome(Outcome.FOUND));
    }

    @Test
    void theRedoLogCostsOneRemoteWritePerWriteCommittedAlone() throws IOException {
        // Write-intensive is half updates of present keys; each commits its own record (no batching here). One thread:
        // with two, the interleaving changes what the cache holds, and reads per operation differ by up to 0.03 between
        // two runs of the same build; with one, two runs make the same verbs, so the reads compared below differ only
        // by what the log adds.
        JsonNode[] perOp = writeIntensiveWithAndWithoutTheLog("alone", null, 1);
        double extra = perOp[0].get("writes").asDouble() - perOp[1].get("writes").asDouble();
        assertTrue(extra > 0.45 && extra < 0.6, "one log write per update: " + perOp[0] + " vs " + perOp[1]);
        assertEquals(perOp[1].get("reads").asDouble(), perOp[0].get("reads").asDouble(), 0.02, "the log is never read while serving");
    }

    @Test
    void withACommitBatchTheRedoLogCostsOneRemoteWritePerBatch() throws IOException {
        // 16 operations of one partition per commit: one log write each (1/16 = 0.0625 per op), where a write
        // committed alone costs 0.5 per op. A thread's last batch per partition may be short.
        JsonNode[] perOp = writeIntensiveWithAndWithoutTheLog("batch", "16 operations per commit", 2, "--commit-batch", "16");
        double extra = perOp[0].get("writes").asDouble() - perOp[1].get("writes").asDouble();
        assertTrue(extra > 0.04 && extra < 0.15, "one log write per batch of 16: " + perOp[0] + " vs " + perOp[1]);
    }

    /**
     * Over tcp the primary's memory node streams each change to its backup; on local the compute side writes both replicas
     * itself (with a mode that never offloads). Either way the compute side's verbs per operation are the same: counters
     * count logical verbs.
     */
    @ParameterizedTest(name = "--fabric {0} --mode {1}")
    @CsvSource({"tcp, dex", "local, no-offload"})
    void replicasMakeTheSameVerbsPerOperationAndServeEveryKey(String fabric, String mode) throws IOException {
        JsonNode[] perOp = new JsonNode[2];
        for (int replicas = 1; replicas <= 2; replicas++) {
            Path json = dir.resolve(fabric + "-replicas-" + replicas + ".json");
            Run run = bench(tiny("--mode", mode, "--fabric", fabric, "--workload", "write-intensive", "--redo-log", "on",
                    "--replicas", Integer.toString(replicas), "--json", json.toString()));
            assertEquals(0, run.exitCode(), run.err());
            assertEquals(replicas == 2, run.out().contains("2 replicas per memory server"), run.out());
            JsonNode result = readJson(json);
            assertEquals(replicas, result.get("replicas").asInt());
            assertEquals(20_000, result.get("ops").asLong(), "every measured operation ran");
            perOp[replicas - 1] = result.get("perOp");
        }
        assertEquals(perOp[0].get("reads").asDouble(), perOp[1].get("reads").asDouble(), 0.05, perOp[0] + " vs " + perOp[1]);
        assertEquals(perOp[0].get("writes").asDouble(), perOp[1].get("writes").asDouble(), 0.05, perOp[0] + " vs " + perOp[1]);
    }

    @Test
    void replicasOnLocalRefuseAModeThatOffloads() {
        Run offloading = bench(tiny("--mode", "dex", "--fabric", "local", "--replicas", "2"));
        assertEquals(2, offloading.exitCode());
        assertTrue(offloading.err().contains("--replicas above 1 on --fabric local needs a mode that never offloads"), offloading.err());
    }

    /**
     * --copy-under-load: the run starts with one replica, the backup joins a third of the way in and is copied while the
     * workload runs; every measured operation still runs, and the copy reports every byte of the region at a rate and the
     * throughput before and during it.
     */
    @Test
    void aBackupIsCopiedWhileTheWorkloadRuns() {
        Run run = bench("--keys", "20000", "--ops", "150000", "--warmup", "2000", "--threads", "2", "--mode", "dex", "--fabric",
                "tcp", "--workload", "write-intensive", "--replicas", "2", "--copy-under-load");
        assertEquals(0, run.exitCode(), run.err());
        assertEquals(150_000, java.util.Arrays.stream(run.result().outcomes()).sum(), "every measured operation ran");
        BenchRunner.CopyReport copy = lastCopy;
        assertTrue(copy != null && copy.completed(), "the copy ran and completed: " + run.out());
        // How fast, and how much of the throughput stays, is the benchmark's figure (docs/replication.md), not a check.
        assertTrue(copy.bytes() >= 16L << 20 && copy.megabytesPerSecond() > 0 && copy.before() > 0 && copy.during() >= 0
                && copy.after() >= 0, copy.toString());
        assertTrue(run.out().contains("copy under load: " + (copy.bytes() >> 20) + " MiB to the backups"), run.out());
        assertTrue(run.out().contains("ops/s after it with every replica complete"), run.out());
    }

    /**
     * Runs write-intensive with the redo log on, then off, each summary mentioning {@code summaryMentions} if not
     * null; answers both runs' per-operation verbs.
     */
    private JsonNode[] writeIntensiveWithAndWithoutTheLog(String name, String summaryMentions, int threads, String... extra)
            throws IOException {
        JsonNode[] perOp = new JsonNode[2];
        String[] logs = {"on", "off"};
        for (int i = 0; i < 2; i++) {
            Path json = dir.resolve(name + "-" + logs[i] + ".json");
            Run run = bench(concat(new String[] {"--keys", "20000", "--ops", "20000", "--warmup", "2000",
                    "--threads", Integer.toString(threads), "--mode", "dex", "--workload", "write-intensive",
                    "--redo-log", logs[i], "--json", json.toString()}, extra));
            assertEquals(0, run.exitCode(), run.err());
            assertEquals(i == 0, run.out().contains("redo log on"), run.out());
            assertTrue(summaryMentions == null || run.out().contains(summaryMentions), run.out());
            assertEquals(20_000, readJson(json).get("ops").asLong(), "every measured operation ran");
            perOp[i] = readJson(json).get("perOp");
        }
        return perOp;
    }

    private static String[] concat(String[] head, String... tail) {
        String[] all = Arrays.copyOf(head, head.length + tail.length);
        System.arraycopy(tail, 0, all, head.length, tail.length);
        return all;
    }

    @ParameterizedTest
    @EnumSource(Workload.class)
    void everyWorkloadRunsOnTheDexEngineWithTwoComputeAndTwoMemoryNodes(Workload workload) {
        Run run = bench("--mode", "dex", "--workload", workload.cliName(), "--keys", keysFor(workload), "--ops", "5000",
                "--warmup", "500", "--threads", "3", "--compute-nodes", "2", "--memory-nodes", "2",
                "--partitions", "8", "--cache-ratio", "0.05");
        assertEquals(0, run.exitCode(), run.err());
        BenchResult r = run.result();
        assertEquals(5000, Arrays.stream(r.outcomes()).sum());
        assertEquals(0, r.outcome(Outcome.NOT_FOUND), "every lookup, update and scan targets a loaded key");
        assertEquals(workload.percent(Op.INSERT) / 100.0,
                (r.outcome(Outcome.INSERTED) + r.outcome(Outcome.ALREADY_PRESENT)) / 5000.0, 0.03, "share of inserts");
    }

    @ParameterizedTest
    @EnumSource(Workload.class)
    void everyWorkloadRunsOnTwoComputeAndTwoMemoryNodes(Workload workload) {
        Run run = bench("--mode", "baseline", "--workload", workload.cliName(), "--keys", keysFor(workload), "--ops", "5000",
                "--warmup", "500", "--threads", "3", "--compute-nodes", "2", "--memory-nodes", "2", "--dist", "uniform");
        assertEquals(0, run.exitCode(), run.err());
        BenchResult r = run.result();
        assertEquals(5000, Arrays.stream(r.outcomes()).sum());
        long inserts = r.outcome(Outcome.INSERTED) + r.outcome(Outcome.ALREADY_PRESENT);
        assertEquals(workload.percent(Op.INSERT) / 100.0, inserts / 5000.0, 0.03, "share of inserts");
        assertTrue(r.outcome(Outcome.INSERTED) >= 0.95 * inserts, "inserts are new keys with high probability");
        assertEquals(0, r.outcome(Outcome.NOT_FOUND), "every lookup, update and scan targets a loaded key");
        assertTrue(r.verbs().reads() > 0);
        assertTrue(run.out().contains(workload == Workload.DELETE_HEAVY ? "each deleted once, in a random order" : "uniform"), run.out());
    }

    /** 5,000 keys, or for delete-heavy, which deletes each key once, room for the 500 of the warm-up too. */
    private static String keysFor(Workload workload) {
        return workload == Workload.DELETE_HEAVY ? "5500" : "5000";
    }

    @Test
    void injectedLatencyIsALowerBoundOnOperationLatency() {
        Run run = bench("--mode", "baseline", "--workload", "read-only", "--keys", "2000", "--ops", "2000",
                "--warmup", "0", "--threads", "1", "--latency-ns", "5000");
        assertEquals(0, run.exitCode(), run.err());
        // A lookup in a two-level tree takes at least 6 verbs of 5 us each.
        assertTrue(run.result().p50Nanos() >= 30_000, "p50 " + run.result().p50Nanos());
    }

    /**
     * delete-heavy deletes each key of its warm-up and its run once (every delete finds its key), and then counts the
     * tree: the deletes merged leaves as they went and a pass over every partition merges more, the keys left are the
     * rest, and the bulk load it compares with is a smaller tree of exactly those keys.
     */
    @ParameterizedTest
    @CsvSource({"8, dex", "24, no-offload"})
    void deleteHeavyDeletesEachKeyOnceAndCountsTheTreeItLeaves(int keyBytes, String mode) throws IOException {
        Path json = dir.resolve("deletes-" + keyBytes + ".json");
        Run run = bench("--workload", "delete-heavy", "--keys", "20000", "--warmup", "1000", "--ops", "17000",
                "--threads", "2", "--mode", mode, "--key-bytes", Integer.toString(keyBytes), "--partitions", "4",
                "--json", json.toString());
        assertEquals(0, run.exitCode(), run.err());
        BenchResult result = run.result();
        assertEquals(17_000, result.outcome(Outcome.FOUND), "every measured delete found its key: none deleted twice");
        assertEquals(0, result.outcome(Outcome.NOT_FOUND));
        DeleteHeavyReport report = lastDeletes;
        assertEquals(2_000, report.entries(), "the warm-up's and the run's deletes are gone, the rest is there");
        long loadedNodes = result.treeBytes() / dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
        assertTrue(report.nodes() * 2 < loadedNodes, "the deletes merged leaves as they went: " + report + " of " + loadedNodes);
        assertTrue(report.settledNodes() <= report.nodes() && report.settledLeaves() < report.leaves(),
                "a pass over every partition merges what is left: " + report);
        assertEquals(DeleteHeavyReport.bulkLoadedNodes(2_000, keyBytes), report.bulkNodes());
        // Without merges the tree keeps every loaded node, ten times a bulk load of the keys left.
        assertTrue(report.settledRatio() < 4, "merged close to a bulk load of the keys left: " + report);
        assertTrue(run.out().contains(String.format(java.util.Locale.ROOT, "%.2fx", report.ratio())), run.out());
        assertTrue(run.out().contains(String.format(java.util.Locale.ROOT, "%.2fx", report.settledRatio())), run.out());
        JsonNode deletes = readJson(json).get("deleteHeavy");
        assertEquals(report.nodes(), deletes.get("nodes").asLong());
        assertEquals(report.bulkNodes(), deletes.get("bulkLoadedNodes").asLong());
        assertEquals(report.ratio(), deletes.get("ratio").asDouble(), 1e-9);
        assertEquals(report.settledNodes(), deletes.get("settledNodes").asLong());
    }
}
