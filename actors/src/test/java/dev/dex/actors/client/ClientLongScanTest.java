package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.actors.TestCluster;
import dev.dex.actors.partition.Ops;
import dev.dex.core.partition.PartitionTable;

/**
 * A client scan may ask for up to 16 x {@link Ops#MAX_SCAN} entries, more than one scan message carries:
 * the client must keep asking, inside a partition as well as across partitions, until it has them all.
 */
@ExtendWith(LogCapturingExtension.class)
class ClientLongScanTest {
    private static final PartitionTable TABLE = PartitionTable.equalWidth(TestCluster.PARTITIONS, 0, TestCluster.KEY_RANGE);

    @Test
    void aScanLongerThanOneMessageReturnsEveryEntryEvenInsideOnePartition() throws Exception {
        try (TestCluster cluster = new TestCluster()) {
            cluster.memoryNode();
            cluster.computeNode(8L << 20);
            // A batch answer that is lost (too large for Artery) would only be sent again after two minutes.
            DexClientApi client = cluster.client(Duration.ofMinutes(2));
            cluster.awaitUp(Duration.ofSeconds(30));

            int dense = 2;
            long first = TABLE.lowerExclusive(dense) + 1;
            TreeMap<Long, Long> model = new TreeMap<>();
            for (long key = first; key < first + Ops.MAX_SCAN + 300; key++) {
                model.put(key, -key);
            }
            for (long key = TABLE.lowerExclusive(dense + 1) + 1; key < TABLE.lowerExclusive(dense + 1) + 200; key++) {
                model.put(key, -key);
            }
            List<CompletableFuture<Boolean>> puts = new ArrayList<>();
            for (Map.Entry<Long, Long> e : model.entrySet()) {
                puts.add(client.put(e.getKey(), e.getValue()).toCompletableFuture());
            }
            for (CompletableFuture<Boolean> put : puts) {
                assertFalse(put.get(60, TimeUnit.SECONDS));
            }

            assertScan(client, model, first, Ops.MAX_SCAN);
            assertScan(client, model, first + 100, Ops.MAX_SCAN + 150);
            assertScan(client, model, first, Ops.MAX_SCAN + 300);
            assertScan(client, model, first, model.size());
            assertScan(client, model, Long.MIN_VALUE, model.size() + 1);

            // Full scans of one partition sent together: each batch carries at most MAX_SCAN scan entries, so no
            // answer outgrows Artery's 256 KiB frame (three in one batch made a 384 KiB answer that was dropped).
            List<CompletableFuture<List<DexClientApi.Entry>>> together = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                together.add(client.scan(first + i, Ops.MAX_SCAN).toCompletableFuture());
            }
            for (int i = 0; i < together.size(); i++) {
                List<DexClientApi.Entry> scanned = together.get(i).get(30, TimeUnit.SECONDS);
                assertEquals(Ops.MAX_SCAN, scanned.size(), "scan " + i);
                assertEquals(first + i, scanned.get(0).key(), "scan " + i);
                assertEquals(first + i + Ops.MAX_SCAN - 1, scanned.get(Ops.MAX_SCAN - 1).key(), "scan " + i);
            }
        }
    }

    private static void assertScan(DexClientApi client, TreeMap<Long, Long> model, long start, int count) throws Exception {
        List<DexClientApi.Entry> expected = new ArrayList<>();
        for (Map.Entry<Long, Long> e : model.tailMap(start, true).entrySet()) {
            if (expected.size() == count) {
                break;
            }
            expected.add(new DexClientApi.Entry(e.getKey(), e.getValue()));
        }
        List<DexClientApi.Entry> scanned = client.scan(start, count).toCompletableFuture().get(60, TimeUnit.SECONDS);
        assertEquals(expected.size(), scanned.size(), "entries of a scan of " + count + " from " + start);
        assertEquals(expected, scanned, "scan of " + count + " from " + start);
    }
}
