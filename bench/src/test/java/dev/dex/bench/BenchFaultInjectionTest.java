package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import picocli.CommandLine;

/**
 * Runs the bench in-process with {@code --inject-faults} on small trees and reads what its end-of-run checks print.
 * A stuck engine makes the bench itself fail (after {@link BenchRunner#STALL_NANOS} or {@link EndChecks#LIMIT_NANOS});
 * the timeouts here are the last resort above those.
 */
class BenchFaultInjectionTest {
    private static final Pattern INJECTED = Pattern.compile("faults +([0-9,]+) injected");

    record Run(int exitCode, String out, String err, BenchResult result) {
        long injected() {
            Matcher m = INJECTED.matcher(out);
            assertTrue(m.find(), out);
            return Long.parseLong(m.group(1).replace(",", ""));
        }

        void assertChecksPassed() {
            String all = out + err;
            assertEquals(0, exitCode, all);
            for (String line : List.of("check        frames locked 0", "check        wrong answers 0",
                    "check        remote locks held 0", "check        validator ok", "check        lost 0 of ")) {
                assertTrue(out.contains(line), "missing '" + line + "' in:\n" + all);
            }
        }
    }

    private static Run bench(String... extra) {
        List<String> args = new ArrayList<>(List.of("--keys", "20k", "--ops", "20k", "--warmup", "2000", "--threads", "2",
                "--partitions", "8"));
        args.addAll(List.of(extra));
        BenchCommand command = new BenchCommand(64);
        CommandLine cmd = BenchCommand.commandLine(command);
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        cmd.setOut(new PrintWriter(out, true));
        cmd.setErr(new PrintWriter(err, true));
        int code = cmd.execute(args.toArray(String[]::new));
        return new Run(code, out.toString(), err.toString(), command.lastResult());
    }

    @Test
    @Timeout(300)
    void dexWithTheRedoLogLosesNothingWhenWritesAndSwapsFail() {
        Run run = bench("--mode", "dex", "--workload", "write-intensive", "--redo-log", "on", "--inject-faults", "0.01:write,cas");
        run.assertChecksPassed();
        assertTrue(run.injected() > 0, run.out());
        assertTrue(run.result().outcome(Outcome.FAILED) > 0, "some operations met a fault:\n" + run.out());
        assertTrue(run.out().contains("throughput"), run.out());
    }

    @Test
    @Timeout(300)
    void dexLosesNothingWhenReadsFail() {
        Run run = bench("--mode", "dex", "--workload", "write-intensive", "--inject-faults", "0.01:read");
        run.assertChecksPassed();
        assertTrue(run.injected() > 0, run.out());
        assertTrue(run.result().outcome(Outcome.FAILED) > 0, "some operations met a fault:\n" + run.out());
    }

    @Test
    @Timeout(300)
    void logAppendsThatFailAreWrittenAgainAndLoseNothing() {
        // Without a cache each update writes remote memory at once, and its record to the log: either may fail. A failed
        // append is written again (its records keep their slots), so no partition has to be given up for it.
        Run run = bench("--mode", "partitioned", "--workload", "write-intensive", "--redo-log", "on", "--inject-faults",
                "0.01:write,cas");
        run.assertChecksPassed();
        assertTrue(run.result().outcome(Outcome.FAILED) > 0, "some operations met a fault:\n" + run.out());
        Matcher recovered = Pattern.compile("([0-9,]+) partitions given up and acquired again").matcher(run.out());
        assertTrue(recovered.find(), run.out());
        assertEquals("0", recovered.group(1), "no log failed for good at this rate:\n" + run.out());
    }

    @Test
    @Timeout(300)
    void withoutFaultsTheChecksPassAndNothingFails() {
        Run run = bench("--mode", "dex", "--workload", "insert-intensive", "--redo-log", "on", "--inject-faults", "0");
        run.assertChecksPassed();
        assertEquals(0, run.injected());
        assertEquals(0, run.result().outcome(Outcome.FAILED));
        assertTrue(run.out().contains("failed 0"), run.out());
    }
}
