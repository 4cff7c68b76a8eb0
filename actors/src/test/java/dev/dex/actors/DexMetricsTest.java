package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.dex.actors.partition.Ops;

/** A client's request latencies, recorded by operation kind through the data points {@link DexMetrics} keeps. */
class DexMetricsTest {
    @Test
    void requestsAreCountedUnderTheirKindsLabelAndAKindNeverRequestedHasNoSeries() {
        DexMetrics metrics = new DexMetrics();
        metrics.request(Ops.GET, 2_000_000);
        metrics.request(Ops.GET, 3_000_000);
        metrics.request(Ops.SCAN, 1_000_000);
        metrics.request(Ops.PUT, 500_000);
        metrics.request("delete", 1_000);
        metrics.request(Ops.DELETE, 1_000);
        metrics.request(42, 1_000);
        String scrape = metrics.scrape();
        assertTrue(scrape.contains("dex_client_request_seconds_count{op=\"get\"} 2"), scrape);
        assertTrue(scrape.contains("dex_client_request_seconds_sum{op=\"get\"} 0.005"), scrape);
        assertTrue(scrape.contains("dex_client_request_seconds_count{op=\"scan\"} 1"), scrape);
        assertTrue(scrape.contains("dex_client_request_seconds_count{op=\"put\"} 1"), scrape);
        // by name and by kind, one series
        assertTrue(scrape.contains("dex_client_request_seconds_count{op=\"delete\"} 2"), scrape);
        assertTrue(scrape.contains("dex_client_request_seconds_count{op=\"operation 42\"} 1"), scrape);
        assertFalse(scrape.contains("op=\"insert\""), scrape);
        assertFalse(scrape.contains("op=\"update\""), scrape);
    }
}
