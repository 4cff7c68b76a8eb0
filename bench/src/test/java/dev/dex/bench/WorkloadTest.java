package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import picocli.CommandLine.TypeConversionException;

class WorkloadTest {
    private static final int DRAWS = 100_000;

    @ParameterizedTest
    @EnumSource(Workload.class)
    void drawnOperationsFollowTheStatedMix(Workload workload) {
        long[] counts = new long[Op.values().length];
        SplittableRandom random = new SplittableRandom(8);
        for (int i = 0; i < DRAWS; i++) {
            counts[workload.op(random.nextInt(100)).ordinal()]++;
        }
        for (Op op : Op.values()) {
            assertEquals(workload.percent(op) / 100.0, counts[op.ordinal()] / (double) DRAWS, 0.005,
                    workload.cliName() + " " + op);
        }
    }

    @Test
    void mixesAreThePapersTableOnePlusExtras() {
        assertMix(Workload.READ_ONLY, 100, 0, 0, 0);
        assertMix(Workload.READ_INTENSIVE, 95, 5, 0, 0);
        assertMix(Workload.WRITE_INTENSIVE, 50, 50, 0, 0);
        assertMix(Workload.INSERT_INTENSIVE, 50, 0, 50, 0);
        assertMix(Workload.SCAN_INTENSIVE, 0, 0, 5, 95);
        assertMix(Workload.READ_INTENSIVE_2, 95, 0, 5, 0);
        assertMix(Workload.INSERT_ONLY, 0, 0, 100, 0);
        assertMix(Workload.DELETE_HEAVY, 0, 0, 0, 0);
        assertEquals(100, Workload.DELETE_HEAVY.percent(Op.DELETE));
        assertEquals(100, Workload.SCAN_LENGTH);
    }

    private static void assertMix(Workload w, int lookup, int update, int insert, int scan) {
        assertEquals(lookup, w.percent(Op.LOOKUP), w.cliName());
        assertEquals(update, w.percent(Op.UPDATE), w.cliName());
        assertEquals(insert, w.percent(Op.INSERT), w.cliName());
        assertEquals(scan, w.percent(Op.SCAN), w.cliName());
        if (w != Workload.DELETE_HEAVY) {
            assertEquals(0, w.percent(Op.DELETE), w.cliName());
        }
    }

    @ParameterizedTest
    @EnumSource(Workload.class)
    void cliNamesAreKebabCaseAndRoundTrip(Workload workload) {
        assertTrue(workload.cliName().matches("[a-z0-9]+(-[a-z0-9]+)*"), workload.cliName());
        assertEquals(workload, Workload.fromCliName(workload.cliName()));
    }

    @Test
    void unknownNamesAreRejectedWithTheChoices() {
        TypeConversionException e = assertThrows(TypeConversionException.class, () -> Workload.fromCliName("read_only"));
        assertTrue(e.getMessage().contains("read-only"), e.getMessage());
    }
}
