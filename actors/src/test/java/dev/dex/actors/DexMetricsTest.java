package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.function.LongConsumer;

import org.junit.jupiter.api.Test;

/** A client's request latencies, recorded by operation through a recorder looked up once. */
class DexMetricsTest {
    @Test
    void rebalanceRoundsAndTheirMovesAreCountedAndScraped() {
        DexMetrics metrics = new DexMetrics();
        metrics.rebalanceRound(8);
        metrics.rebalanceRound(3);
        assertTrue(metrics.rebalanceRounds() == 2 && metrics.rebalanceMoves() == 11, "2 rounds, 11 moves");
        String scrape = metrics.scrape();
        assertTrue(scrape.contains("dex_rebalance_rounds_total 2.0"), scrape);
        assertTrue(scrape.contains("dex_rebalance_moves_total 11.0"), scrape);
    }

    @Test
    void aRecorderCountsIntoItsOperationsSeriesAsRequestByNameDoes() {
        DexMetrics metrics = new DexMetrics();
        LongConsumer gets = metrics.requests("get");
        gets.accept(2_000_000);
        gets.accept(3_000_000);
        metrics.request("get", 1_000_000);
        metrics.requests("scan").accept(1_000_000);
        String scrape = metrics.scrape();
        assertTrue(scrape.contains("dex_client_request_seconds_count{op=\"get\"} 3"), scrape);
        assertTrue(scrape.contains("dex_client_request_seconds_sum{op=\"get\"} 0.006"), scrape);
        assertTrue(scrape.contains("dex_client_request_seconds_count{op=\"scan\"} 1"), scrape);
        assertFalse(scrape.contains("op=\"put\""), "no series for an operation never recorded: " + scrape);
    }
}
