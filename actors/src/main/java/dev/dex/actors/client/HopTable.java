package dev.dex.actors.client;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.HdrHistogram.Histogram;

import dev.dex.actors.partition.HopTrace;

/**
 * The per-hop latency of the operations a {@link DexClientApi} traced ({@link DexClientApi#trace}): for each hop, the
 * time from the stamp before it to its own, over every traced operation that passed it, and the whole round from the
 * submission to the completion of the future.
 *
 * <p>A hop an operation did not pass (its stamp is 0: a message between actors of one system is not serialized, say)
 * is left out, and the next hop counts from the last stamp it passed, so the hops of one operation always add up to its
 * round. An operation sent again keeps its first submission and drain stamps, and the rest are those of its last
 * attempt: the wait for the retry shows in "client actor sends the batch".
 *
 * <p>Concurrency: {@link #record} is called from the API's executor threads, {@link #print} from any thread; both
 * synchronize on the table (a traced operation is a sample, so the lock is taken rarely).
 */
public final class HopTable {
    private static final long HIGHEST = TimeUnit.SECONDS.toNanos(60);
    private final Histogram[] hops = new Histogram[HopTrace.STAMPS];
    private final Histogram round = new Histogram(HIGHEST, 3);
    /** Traces whose stamps ran backwards (a clock of another host): not recorded. */
    private long skewed;

    public HopTable() {
        for (int i = 1; i < hops.length; i++) {
            hops[i] = new Histogram(HIGHEST, 3);
        }
    }

    /** Records one completed operation's trace. */
    public synchronized void record(long[] trace) {
        long previous = trace[HopTrace.SUBMIT];
        if (previous == 0 || trace[HopTrace.COMPLETED] < previous) {
            skewed++;
            return;
        }
        for (int i = 1; i < trace.length; i++) {
            if (trace[i] != 0 && trace[i] < previous) {
                skewed++;
                return;
            }
            previous = trace[i] == 0 ? previous : trace[i];
        }
        previous = trace[HopTrace.SUBMIT];
        for (int i = 1; i < trace.length; i++) {
            if (trace[i] != 0) {
                hops[i].recordValue(Math.min(HIGHEST, trace[i] - previous));
                previous = trace[i];
            }
        }
        round.recordValue(Math.min(HIGHEST, trace[HopTrace.COMPLETED] - trace[HopTrace.SUBMIT]));
    }

    /** Operations recorded. */
    public synchronized long count() {
        return round.getTotalCount();
    }

    /** How many recorded operations passed {@code hop}. */
    public synchronized long passed(int hop) {
        return histogram(hop).getTotalCount();
    }

    /** The median time (ns) spent on {@code hop} by the operations that passed it; -1 if none did. */
    public synchronized long median(int hop) {
        Histogram h = histogram(hop);
        return h.getTotalCount() == 0 ? -1 : h.getValueAtPercentile(50);
    }

    /** The times of {@code hop}; for {@link HopTrace#SUBMIT}, which has no time before it, the whole round's. */
    private Histogram histogram(int hop) {
        return hop == HopTrace.SUBMIT ? round : hops[hop];
    }

    /** One line of the table: a hop (or the whole round), how many traced operations passed it, and its times in ns. */
    public record Row(String hop, long passed, long p50, long p90, long p99, double mean) {
    }

    /** The hops some traced operation passed, in their order, then the whole round. */
    public synchronized List<Row> rows() {
        List<Row> rows = new ArrayList<>();
        for (int i = 1; i < hops.length; i++) {
            if (hops[i].getTotalCount() > 0) {
                rows.add(row(HopTrace.hopName(i), hops[i]));
            }
        }
        rows.add(row(ROUND, round));
        return rows;
    }

    /** The name of the last row. */
    public static final String ROUND = "the whole round (submitted to completed)";

    private static Row row(String name, Histogram h) {
        return new Row(name, h.getTotalCount(), h.getValueAtPercentile(50), h.getValueAtPercentile(90), h.getValueAtPercentile(99),
                h.getMean());
    }

    /** Prints the table: one line per hop passed, with its p50, p90, p99 and mean in microseconds, then the round. */
    public void print(PrintWriter out) {
        List<Row> rows = rows();
        out.printf("%nwhere the time goes: %,d traced operations (each hop: the time from the stamp before it; microseconds)%n",
                count());
        out.printf("  %-52s %8s %9s %9s %9s %9s%n", "hop", "passed", "p50", "p90", "p99", "mean");
        for (Row r : rows) {
            out.printf("  %-52s %8d %9.1f %9.1f %9.1f %9.1f%n", r.hop(), r.passed(), r.p50() / 1e3, r.p90() / 1e3, r.p99() / 1e3,
                    r.mean() / 1e3);
        }
        long left = skewed();
        if (left > 0) {
            out.printf("  (%,d traces left out: their stamps ran backwards, as clocks of two hosts do)%n", left);
        }
        out.flush();
    }

    private synchronized long skewed() {
        return skewed;
    }
}
