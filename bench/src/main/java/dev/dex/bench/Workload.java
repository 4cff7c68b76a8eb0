package dev.dex.bench;

import java.util.Arrays;
import java.util.Iterator;
import java.util.stream.Collectors;

/**
 * The paper's workloads (Table 1) plus read-intensive-2, insert-only and delete-heavy, as percentages of lookups,
 * updates, inserts, scans and deletes. A scan reads {@link #SCAN_LENGTH} records. delete-heavy deletes loaded keys,
 * each once, in a random order ({@link DeleteOrder}), and then reports how many nodes the tree keeps.
 */
enum Workload {
    READ_ONLY("read-only", 100, 0, 0, 0, 0),
    READ_INTENSIVE("read-intensive", 95, 5, 0, 0, 0),
    WRITE_INTENSIVE("write-intensive", 50, 50, 0, 0, 0),
    INSERT_INTENSIVE("insert-intensive", 50, 0, 50, 0, 0),
    SCAN_INTENSIVE("scan-intensive", 0, 0, 5, 95, 0),
    READ_INTENSIVE_2("read-intensive-2", 95, 0, 5, 0, 0),
    INSERT_ONLY("insert-only", 0, 0, 100, 0, 0),
    DELETE_HEAVY("delete-heavy", 0, 0, 0, 0, 100);

    static final int SCAN_LENGTH = 100;

    private final String cliName;
    private final int[] percent;
    /** The op for each percentile 0..99, so drawing an op is one array load. */
    private final Op[] byPercentile = new Op[100];

    Workload(String cliName, int lookup, int update, int insert, int scan, int delete) {
        this.cliName = cliName;
        this.percent = new int[] {lookup, update, insert, scan, delete};
        int next = 0;
        for (Op op : Op.values()) {
            for (int i = 0; i < percent[op.ordinal()]; i++) {
                byPercentile[next++] = op;
            }
        }
        if (next != 100) {
            throw new IllegalStateException(cliName + " mixes " + next + "% of operations, not 100%");
        }
    }

    String cliName() {
        return cliName;
    }

    /** Percentage of {@code op} in this workload. */
    int percent(Op op) {
        return percent[op.ordinal()];
    }

    /** The op for a uniform draw {@code percentile} in [0, 100). */
    Op op(int percentile) {
        return byPercentile[percentile];
    }

    /** A short description of the mix, e.g. "95% lookup, 5% update". */
    String mix() {
        return Arrays.stream(Op.values())
                .filter(op -> percent(op) > 0)
                .map(op -> percent(op) + "% " + op.name().toLowerCase())
                .collect(Collectors.joining(", "));
    }

    static Workload fromCliName(String name) {
        return CliNames.find(values(), Workload::cliName, name, "workload");
    }

    /** The CLI names, for picocli's completion candidates in the help text. */
    static final class Names implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            return Arrays.stream(values()).map(Workload::cliName).iterator();
        }
    }
}
