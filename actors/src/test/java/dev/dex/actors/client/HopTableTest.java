package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.dex.actors.partition.HopTrace;

/** The per-hop table: each hop counts from the last stamp before it, hops not passed are left out, clocks that ran backwards are not recorded. */
class HopTableTest {
    @Test
    void eachHopCountsFromTheLastStampPassedAndTheHopsAddUpToTheRound() {
        HopTable table = new HopTable();
        long[] trace = HopTrace.create();
        trace[HopTrace.SUBMIT] = 1_000;
        trace[HopTrace.DRAIN] = 1_010;
        trace[HopTrace.SENT] = 1_030;
        // ENCODED and DECODED not passed (an in-process message): the router counts from SENT.
        trace[HopTrace.ROUTER] = 1_100;
        trace[HopTrace.PARTITION] = 1_150;
        trace[HopTrace.WORKER_START] = 1_160;
        trace[HopTrace.WORKER_END] = 1_200;
        trace[HopTrace.ANSWERED] = 1_210;
        trace[HopTrace.ROUTER_OUT] = 1_220;
        trace[HopTrace.CLIENT] = 1_300;
        trace[HopTrace.COMPLETED] = 1_340;

        table.record(trace);

        assertEquals(1, table.count());
        assertEquals(10, table.median(HopTrace.DRAIN));
        assertEquals(20, table.median(HopTrace.SENT));
        assertEquals(-1, table.median(HopTrace.ENCODED), "a hop not passed has no figure");
        assertEquals(70, table.median(HopTrace.ROUTER));
        assertEquals(40, table.median(HopTrace.WORKER_END));
        assertEquals(80, table.median(HopTrace.CLIENT));
        assertEquals(340, table.median(HopTrace.SUBMIT), "the whole round");
        List<HopTable.Row> rows = table.rows();
        assertEquals(HopTable.ROUND, rows.get(rows.size() - 1).hop());
        long sum = rows.subList(0, rows.size() - 1).stream().mapToLong(HopTable.Row::p50).sum();
        assertEquals(340, sum, "the hops add up to the round");
        assertEquals(11, rows.size(), "ten hops passed, then the round");
    }

    @Test
    void aTraceWhoseStampsRunBackwardsIsLeftOutAndSaidSo() {
        HopTable table = new HopTable();
        long[] trace = HopTrace.create();
        trace[HopTrace.SUBMIT] = 5_000;
        trace[HopTrace.DRAIN] = 5_010;
        trace[HopTrace.DECODED] = 4_000; // another host's clock
        trace[HopTrace.COMPLETED] = 6_000;
        table.record(trace);
        long[] unsubmitted = HopTrace.create();
        unsubmitted[HopTrace.COMPLETED] = 7;
        table.record(unsubmitted);

        assertEquals(0, table.count());
        StringWriter text = new StringWriter();
        table.print(new PrintWriter(text));
        assertTrue(text.toString().contains("2 traces left out"), text.toString());
    }
}
