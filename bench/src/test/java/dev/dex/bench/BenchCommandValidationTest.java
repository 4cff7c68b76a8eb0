package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import picocli.CommandLine;

class BenchCommandValidationTest {

    record Run(int exitCode, String out, String err) {
    }

    /** What bin/dex passes as --partitions' default: dex.tree.partitions. */
    private static final int DEFAULT_PARTITIONS = 64;

    static Run run(String... args) {
        return run(DEFAULT_PARTITIONS, args);
    }

    static Run run(int defaultPartitions, String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cmd = BenchCommand.commandLine(defaultPartitions);
        cmd.setOut(new PrintWriter(out, true));
        cmd.setErr(new PrintWriter(err, true));
        int code = cmd.execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    /** --partitions takes its default from the caller (bin/dex: dex.tree.partitions); without one it must be given. */
    @org.junit.jupiter.api.Test
    void partitionsWithoutADefaultMustBeGiven() {
        Run run = run(0, "--keys", "1000");
        org.junit.jupiter.api.Assertions.assertEquals(2, run.exitCode());
        org.junit.jupiter.api.Assertions.assertTrue(run.err().contains("--partitions must be given"), run.err());
    }

    static Stream<Arguments> badInput() {
        return Stream.of(
                Arguments.of(new String[] {"--keys", "0"}, "--keys must be in [1"),
                Arguments.of(new String[] {"--keys", "lots"}, "'lots' is not a count"),
                Arguments.of(new String[] {"--ops", "0"}, "--ops must be in [1"),
                Arguments.of(new String[] {"--warmup", "-1"}, "--warmup must be in [0"),
                Arguments.of(new String[] {"--threads", "0"}, "--threads must be in [1"),
                Arguments.of(new String[] {"--threads", "two"}, "--threads"),
                Arguments.of(new String[] {"--workload", "read-mostly"}, "unknown workload 'read-mostly'; expected one of read-only"),
                Arguments.of(new String[] {"--mode", "btree"}, "unknown mode 'btree'"),
                Arguments.of(new String[] {"--dist", "normal"}, "unknown distribution 'normal'"),
                Arguments.of(new String[] {"--theta", "1.0"}, "--theta must be in [0, 1)"),
                Arguments.of(new String[] {"--theta", "-0.5"}, "--theta must be in [0, 1)"),
                Arguments.of(new String[] {"--dist", "uniform", "--theta", "0.5"}, "--theta applies only to --dist zipf"),
                Arguments.of(new String[] {"--cache-ratio", "0"}, "--cache-ratio must be in (0, 1]"),
                Arguments.of(new String[] {"--cache-ratio", "1.5"}, "--cache-ratio must be in (0, 1]"),
                Arguments.of(new String[] {"--cache-mb", "0"}, "--cache-mb must be in [1"),
                Arguments.of(new String[] {"--cache-ratio", "0.1", "--cache-mb", "64"}, "mutually exclusive"),
                Arguments.of(new String[] {"--compute-nodes", "0"}, "--compute-nodes must be in [1"),
                Arguments.of(new String[] {"--memory-nodes", "100"}, "--memory-nodes must be in [1"),
                Arguments.of(new String[] {"--partitions", "0"}, "--partitions must be in [1"),
                Arguments.of(new String[] {"--leaf-admission", "1.5"}, "--leaf-admission must be auto or in [0, 1]: 1.5"),
                Arguments.of(new String[] {"--leaf-admission", "sometimes"}, "--leaf-admission must be auto or in [0, 1]: sometimes"),
                Arguments.of(new String[] {"--memory-threads", "0"}, "--memory-threads must be in [1"),
                Arguments.of(new String[] {"--partitions", "5000"}, "--partitions must be in [1"),
                Arguments.of(new String[] {"--mode", "dex", "--partitions", "2", "--compute-nodes", "4"},
                        "--partitions (2) must be at least --compute-nodes (4)"),
                Arguments.of(new String[] {"--fabric", "shm"}, "--fabric must be local or tcp: shm"),
                Arguments.of(new String[] {"--replicas", "4", "--fabric", "tcp"}, "--replicas must be 1, 2 or 3: 4"),
                Arguments.of(new String[] {"--replicas", "2"}, "--replicas above 1 on --fabric local needs a mode that never offloads"
                        + " (no-offload, sherman, partitioned): the compute side writes every replica itself, and an offload would"
                        + " change the primary alone; dex offloads"),
                Arguments.of(new String[] {"--replicas", "2", "--mode", "no-offload", "--copy-under-load"},
                        "--copy-under-load needs --fabric tcp"),
                Arguments.of(new String[] {"--copy-under-load", "--fabric", "tcp"}, "--copy-under-load needs --replicas 2 or 3"),
                Arguments.of(new String[] {"--copy-rate", "64", "--fabric", "tcp"}, "--copy-rate needs --replicas 2 or 3"),
                Arguments.of(new String[] {"--copy-rate", "0", "--fabric", "tcp", "--replicas", "2"}, "--copy-rate must be in [1, "),
                Arguments.of(new String[] {"--latency-ns", "-1"}, "--latency-ns must be in [0"),
                Arguments.of(new String[] {"--redo-log", "maybe"}, "--redo-log must be on or off: maybe"),
                Arguments.of(new String[] {"--mode", "baseline", "--redo-log", "on"}, "--redo-log on needs a DEX engine mode"),
                Arguments.of(new String[] {"--commit-batch", "0"}, "--commit-batch must be in [1, 1024]: 0"),
                Arguments.of(new String[] {"--key-bytes", "12"}, "--key-bytes: key width 12 bytes: must be 8, 16, 24, 32, 40, 48, 56 or 64"),
                Arguments.of(new String[] {"--key-bytes", "72"}, "--key-bytes: key width 72 bytes: must be 8, 16, 24, 32, 40, 48, 56 or 64"),
                Arguments.of(new String[] {"--mode", "skiplist", "--key-bytes", "16"}, "--key-bytes above 8 needs a mode on the fabric"),
                Arguments.of(new String[] {"--commit-batch", "1025"}, "--commit-batch must be in [1, 1024]: 1025"),
                Arguments.of(new String[] {"--mode", "skiplist", "--commit-batch", "8"}, "--commit-batch above 1 needs a DEX engine mode"),
                Arguments.of(new String[] {"--json", "/nonexistent-dir/result.json"}, "directory /nonexistent-dir does not exist"),
                Arguments.of(new String[] {"--inject-faults", "1.5"}, "--inject-faults: fault rate 1.5 in '1.5' is outside [0, 1]"),
                Arguments.of(new String[] {"--inject-faults", "often"}, "--inject-faults: fault rate 'often' in 'often' is not a number"),
                Arguments.of(new String[] {"--inject-faults", "0.01:write,swap"},
                        "--inject-faults: unknown verb kind 'swap' in '0.01:write,swap': expected read, write, cas or faa"),
                Arguments.of(new String[] {"--inject-faults", "0.01:"}, "--inject-faults: no verb kinds after ':'"),
                Arguments.of(new String[] {"--inject-faults", ""}, "--inject-faults: empty fault plan"),
                Arguments.of(new String[] {"--mode", "skiplist", "--inject-faults", "0.01"}, "--inject-faults needs a mode on the fabric"),
                Arguments.of(new String[] {"--inject-faults", "0.01", "--commit-batch", "4"},
                        "--inject-faults runs every operation on its own: not with --commit-batch above 1"),
                Arguments.of(new String[] {"--workload", "delete-heavy", "--keys", "1000", "--ops", "1000", "--warmup", "1"},
                        "--workload delete-heavy deletes each loaded key once: --warmup (1) + --ops (1000) must be at most --keys (1000)"),
                Arguments.of(new String[] {"--workload", "delete-heavy", "--mode", "skiplist", "--keys", "1000", "--ops", "10",
                        "--warmup", "0"}, "--workload delete-heavy needs a mode on the fabric"),
                Arguments.of(new String[] {"--workload", "delete-heavy", "--keys", "1000", "--ops", "10", "--warmup", "0",
                        "--inject-faults", "0.01"}, "not with --workload delete-heavy"),
                Arguments.of(new String[] {"--no-such-option"}, "Unknown option: '--no-such-option'"));
    }

    @ParameterizedTest
    @MethodSource("badInput")
    void badInputExitsWithCodeTwoAndSaysWhy(String[] args, String message) {
        Run run = run(args);
        assertEquals(2, run.exitCode(), run.err());
        assertTrue(run.err().contains(message), "stderr lacks '" + message + "':\n" + run.err());
        assertTrue(run.err().contains("--help"), run.err());
        assertEquals("", run.out());
    }

    @Test
    void helpListsEveryOptionAndExitsZero() {
        Run run = run("--help");
        assertEquals(0, run.exitCode());
        for (String option : new String[] {"--workload", "--keys", "--ops", "--warmup", "--threads", "--cache-ratio",
                "--cache-mb", "--mode", "--compute-nodes", "--memory-nodes", "--partitions", "--fabric", "--latency-ns",
                "--seed", "--json", "--dist", "--theta", "--redo-log", "--leaf-admission", "--inject-faults", "--replicas",
                "--copy-under-load", "--copy-rate"}) {
            assertTrue(run.out().contains(option), option);
        }
        for (Workload w : Workload.values()) {
            assertTrue(run.out().contains(w.cliName()), w.cliName());
        }
    }

    @Test
    void countsAcceptSeparatorsAndSuffixes() {
        CountConverter converter = new CountConverter();
        assertEquals(1_000_000L, converter.convert("1_000_000"));
        assertEquals(200_000L, converter.convert("200k"));
        assertEquals(3_000_000L, converter.convert("3M"));
        assertEquals(1_000_000_000L, converter.convert("1g"));
    }
}
