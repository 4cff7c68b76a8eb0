package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import picocli.CommandLine;

/** The takeover bench replays exactly the records the vanished owner logged, and refuses bad input. */
class TakeoverBenchCommandTest {
    private record Run(int exitCode, String out, String err) {
    }

    private static Run run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cli = TakeoverBenchCommand.commandLine();
        cli.setOut(new PrintWriter(out));
        cli.setErr(new PrintWriter(err));
        int code = cli.execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void everyLoggedUpdateIsReplayedByTheNextOwner() {
        Run run = run("--keys", "3000", "--records", "0,250,1200");
        assertEquals(0, run.exitCode(), run.err());
        List<long[]> rows = new ArrayList<>();
        for (String line : run.out().split("\n")) {
            String[] cells = line.trim().split("\\s+");
            if (cells.length == 5 && cells[0].replace(",", "").matches("\\d+")) {
                rows.add(new long[] {Long.parseLong(cells[0].replace(",", "")), Long.parseLong(cells[1].replace(",", "")),
                        Long.parseLong(cells[2].replace(",", ""))});
            }
        }
        assertEquals(3, rows.size(), run.out());
        for (long[] row : rows) {
            assertEquals(row[0], row[1], "records replayed: " + run.out());
        }
        assertEquals(0, rows.get(0)[2], "nothing to write back after an empty log");
        assertTrue(rows.get(2)[2] > 0, "replayed pages are written back: " + run.out());
    }

    @Test
    void badInputIsRefusedWithItsReason() {
        Run run = run("--fabric", "shm");
        assertEquals(2, run.exitCode());
        assertTrue(run.err().contains("--fabric must be local or tcp"), run.err());
        Run negative = run("--records", "5,-1");
        assertEquals(2, negative.exitCode(), negative.err());
    }
}
