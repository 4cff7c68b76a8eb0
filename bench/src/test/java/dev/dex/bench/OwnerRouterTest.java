package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentSkipListMap;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.SortedEntries;

class OwnerRouterTest {
    private static final int PARTITIONS = 8;
    private final KeySpace space = new KeySpace(10_000);
    private final PartitionTable table = PartitionTable.equalWidth(PARTITIONS, space.minKey(), space.maxKey());
    private final ConcurrentSkipListMap<Long, Long> map = new ConcurrentSkipListMap<>();

    private List<FakePartitionedEngine> engines(int count) {
        SortedEntries entries = space.entries();
        while (entries.next()) {
            map.put(entries.key(), entries.value());
        }
        List<FakePartitionedEngine> engines = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            engines.add(new FakePartitionedEngine(table, map));
        }
        return engines;
    }

    @Test
    void assignGivesPartitionPToEnginePModC() {
        List<FakePartitionedEngine> engines = engines(3);
        OwnerRouter.assign(engines);
        for (int p = 0; p < PARTITIONS; p++) {
            for (int e = 0; e < engines.size(); e++) {
                assertEquals(e == p % 3, engines.get(e).holds(p), "engine " + e + ", partition " + p);
            }
        }
    }

    @Test
    void everyKeyGoesToTheEngineHoldingItsPartition() {
        List<FakePartitionedEngine> engines = engines(3);
        OwnerRouter.assign(engines);
        try (OwnerRouter router = new OwnerRouter(engines)) {
            SplittableRandom random = new SplittableRandom(9);
            for (int i = 0; i < 10_000; i++) {
                long key = space.loadedKey(random.nextLong(space.keys()));
                IndexSession session = router.sessionFor(key);
                assertTrue(assertDoesNotThrow(() -> session.lookup(key)), "key " + key);
            }
            assertSame(router.sessionFor(table.lowerExclusive(1) + 1), router.sessionFor(table.upperInclusive(1)));
            assertNotSame(router.sessionFor(table.upperInclusive(1)), router.sessionFor(table.upperInclusive(1) + 1));
            assertSame(router.sessionFor(table.upperInclusive(0)), router.sessionFor(table.upperInclusive(3)));
        }
        long[] served = engines.stream().mapToLong(e -> e.served.sum()).toArray();
        assertEquals(10_000, Arrays.stream(served).sum());
        assertTrue(Arrays.stream(served).allMatch(s -> s > 1000), Arrays.toString(served));
    }

    @Test
    void scansGoToTheEngineOfTheStartKeysPartition() {
        List<FakePartitionedEngine> engines = engines(2);
        OwnerRouter.assign(engines);
        long[] keys = new long[Workload.SCAN_LENGTH];
        long[] values = new long[Workload.SCAN_LENGTH];
        try (OwnerRouter router = new OwnerRouter(engines)) {
            long nearEnd = table.upperInclusive(2) - 10 * KeySpace.GAP;
            int n = router.sessionFor(nearEnd).scan(nearEnd, Workload.SCAN_LENGTH, keys, values);
            assertTrue(n > 0 && n < Workload.SCAN_LENGTH, "a scan stops at its partition's end: " + n);
            assertTrue(keys[n - 1] <= table.upperInclusive(2));
            long start = space.loadedKey(0);
            assertEquals(Workload.SCAN_LENGTH, router.sessionFor(start).scan(start, Workload.SCAN_LENGTH, keys, values));
        }
    }

    @Test
    void aPartitionHeldByNoEngineOrTwoEnginesIsReported() {
        List<FakePartitionedEngine> engines = engines(2);
        for (int p = 0; p < PARTITIONS - 1; p++) {
            engines.get(p % 2).acquire(p);
        }
        IllegalStateException none = assertThrows(IllegalStateException.class, () -> new OwnerRouter(engines));
        assertTrue(none.getMessage().contains("partition " + (PARTITIONS - 1) + " is held by no engine"), none.getMessage());
        engines.get(0).acquire(PARTITIONS - 1);
        engines.get(1).acquire(PARTITIONS - 1);
        IllegalStateException two = assertThrows(IllegalStateException.class, () -> new OwnerRouter(engines));
        assertTrue(two.getMessage().contains("more than one engine"), two.getMessage());
    }

    @ParameterizedTest
    @EnumSource(Workload.class)
    void theRunnerRoutesEveryOperationToTheHoldingEngine(Workload workload) {
        List<FakePartitionedEngine> engines = engines(3);
        OwnerRouter.assign(engines);
        BenchSettings config = config(workload, 3, engines.size());
        RunStats stats;
        try (EngineCluster cluster = new EngineCluster(engines, 1 << 20, List.of())) {
            stats = new BenchRunner(config, space, cluster, Progress.plain(new PrintWriter(new StringWriter()))).run();
        }
        assertEquals(config.ops(), Arrays.stream(stats.outcomes()).sum());
        assertEquals(config.ops() + config.warmup(), engines.stream().mapToLong(e -> e.served.sum()).sum());
        assertTrue(engines.stream().allMatch(e -> e.served.sum() > 0));
        assertEquals(0.5, stats.cacheHitRatio());
        assertEquals(config.ops(), stats.latency().getTotalCount());
    }

    @Test
    void withACommitBatchEveryOperationRunsOnceInBatchesOfOnePartition() {
        List<FakePartitionedEngine> engines = engines(2);
        OwnerRouter.assign(engines);
        BenchSettings config = config(Workload.WRITE_INTENSIVE, 2, engines.size(), 8);
        RunStats stats;
        try (EngineCluster cluster = new EngineCluster(engines, 1 << 20, List.of())) {
            stats = new BenchRunner(config, space, cluster, Progress.plain(new PrintWriter(new StringWriter()))).run();
        }
        long served = engines.stream().mapToLong(e -> e.served.sum()).sum();
        long batched = engines.stream().mapToLong(e -> e.batchedOps.sum()).sum();
        long commits = engines.stream().mapToLong(e -> e.commits.sum()).sum();
        assertEquals(config.ops() + config.warmup(), served, "every operation ran once");
        assertEquals(served, batched, "every operation ran inside a batch");
        assertEquals(0, engines.stream().mapToLong(e -> e.badBatches.sum()).sum(), "no batch spans two partitions or is empty");
        assertEquals(8, engines.stream().mapToInt(e -> e.largestBatch.get()).max().orElse(0), "batches hold up to 8 operations");
        // Only each thread's last batch per partition, in each phase, may be short.
        assertTrue(commits <= served / 8 + 2L * 2 * PARTITIONS, commits + " commits for " + served + " operations");
        assertEquals(config.ops(), Arrays.stream(stats.outcomes()).sum());
        assertEquals(config.ops(), stats.latency().getTotalCount(), "one latency per operation, its batch's");
    }

    private BenchSettings config(Workload workload, int threads, int engines) {
        return config(workload, threads, engines, 1);
    }

    @Test
    void aCommitBatchRunWithoutWarmUpRunsEveryOperation() {
        List<FakePartitionedEngine> engines = engines(2);
        OwnerRouter.assign(engines);
        BenchSettings config = config(Workload.READ_ONLY, 2, engines.size(), 4, 0);
        try (EngineCluster cluster = new EngineCluster(engines, 1 << 20, List.of())) {
            RunStats stats = new BenchRunner(config, space, cluster, Progress.plain(new PrintWriter(new StringWriter()))).run();
            assertEquals(config.ops(), Arrays.stream(stats.outcomes()).sum());
        }
        assertEquals(config.ops(), engines.stream().mapToLong(e -> e.batchedOps.sum()).sum());
    }

    private BenchSettings config(Workload workload, int threads, int engines, int commitBatch) {
        return config(workload, threads, engines, commitBatch, 2_000);
    }

    private BenchSettings config(Workload workload, int threads, int engines, int commitBatch, long warmup) {
        // delete-heavy deletes each key once: its warm-up and run fit in the keys.
        long ops = workload == Workload.DELETE_HEAVY ? space.keys() - warmup : 20_000;
        return new BenchSettings(workload, Mode.DEX, Distribution.ZIPF, 0.99, space.keys(), ops, warmup,
                threads, 0.08, -1, engines, 1, 1, PARTITIONS, 0, "local", 11, null, false, commitBatch,
                dev.dex.core.cache.DexEngineSettings.DEFAULT_LEAF_ADMISSION, 8, null);
    }

    @Test
    void aFailingOperationStopsTheRunAndIsReported() {
        List<FakePartitionedEngine> engines = engines(2);
        OwnerRouter.assign(engines);
        engines.get(1).failAfter = 5_000;
        try (EngineCluster cluster = new EngineCluster(engines, 1 << 20, List.of())) {
            BenchRunner runner = new BenchRunner(config(Workload.READ_ONLY, 4, 2), space, cluster,
                    Progress.plain(new PrintWriter(new StringWriter())));
            IllegalStateException e = assertTimeoutPreemptively(Duration.ofSeconds(20),
                    () -> assertThrows(IllegalStateException.class, runner::run));
            assertEquals("injected failure", e.getCause().getMessage());
        }
        assertTrue(engines.get(0).served.sum() < 22_000, "the other threads stopped early");
    }

    @Test
    void aWorkerThatCannotRouteFailsTheRunBeforeItStarts() {
        List<FakePartitionedEngine> engines = engines(2);
        engines.get(0).acquire(0);
        try (EngineCluster cluster = new EngineCluster(engines, 1 << 20, List.of())) {
            BenchRunner runner = new BenchRunner(config(Workload.READ_ONLY, 3, 2), space, cluster,
                    Progress.plain(new PrintWriter(new StringWriter())));
            IllegalStateException e = assertTimeoutPreemptively(Duration.ofSeconds(20),
                    () -> assertThrows(IllegalStateException.class, runner::run));
            assertTrue(e.getCause().getMessage().contains("held by no engine"), e.getCause().getMessage());
        }
        assertEquals(0, engines.get(0).served.sum());
    }
}
