package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import picocli.CommandLine;

/** {@code dex bench --verbs} on tiny runs: every verb measured, figures that could only come from running verbs. */
class VerbBenchCommandTest {

    record Run(int exitCode, String out, String err, List<VerbBenchCommand.Row> rows) {
    }

    private static Run verbs(String... args) {
        VerbBenchCommand command = new VerbBenchCommand();
        CommandLine cli = new CommandLine(command);
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        cli.setOut(new PrintWriter(out, true));
        cli.setErr(new PrintWriter(err, true));
        int exit = cli.execute(args);
        return new Run(exit, out.toString(), err.toString(), command.rows());
    }

    /** Over tcp with a batched row of 4 reads; on local with none ({@code --batch 0}). */
    @ParameterizedTest(name = "--fabric {0} --batch {1}")
    @CsvSource({"local, 0", "tcp, 4"})
    void eachVerbIsMeasuredAloneAndUnderLoad(String fabric, int batch) {
        Run run = verbs("--fabric", fabric, "--threads", "3", "--seconds", "1", "--bytes", "512", "--batch", String.valueOf(batch));

        assertEquals(0, run.exitCode(), run.err());
        assertEquals(batch == 0 ? List.of("read", "write", "cas") : List.of("read", "write", "cas", "read*4"),
                run.rows().stream().map(VerbBenchCommand.Row::verb).toList());
        for (VerbBenchCommand.Row row : run.rows()) {
            assertTrue(row.p50Nanos() > 0 && row.p99Nanos() >= row.p50Nanos(), row.toString());
            assertTrue(row.verbsPerSecond() > 0 && row.loadedP99Nanos() >= row.loadedP50Nanos(), row.toString());
        }
        assertTrue(run.out().contains("fabric " + fabric), run.out());
        assertTrue(run.out().contains("3 thr verbs/s"), run.out());
        assertEquals(batch > 0, run.out().contains("read*4: reads in batches of 4"), run.out());
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "--fabric shm      | --fabric must be local or tcp: shm",
            "--threads 0       | --threads must be in [1, 256]: 0",
            "--bytes 12        | --bytes must be a multiple of 8",
            "--seconds 0       | --seconds must be in [1, 600]: 0",
            "--connections 0   | --connections must be in [1, 64]: 0",
            "--spin-ns -1      | --spin-ns must be >= 0: -1",
            "--io-threads 0    | --io-threads must be in [1, 256]: 0",
            "--batch 1025      | --batch must be in [0, 1024]: 1025"})
    void badInputExitsWithTwoAndSaysWhy(String args, String message) {
        Run run = verbs(args.trim().split("\\s+"));

        assertEquals(2, run.exitCode(), run.out());
        assertTrue(run.err().contains(message), run.err());
    }
}
