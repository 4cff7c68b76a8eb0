package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.core.node.WideKeys;

/**
 * Threads on C engines over one pool, with caches of a few dozen frames so that cooling, eviction,
 * write-back, admission and splits of owned and shared nodes all run concurrently. Thread t alone writes
 * the keys {@code k} with {@code k % threads == t} (through whichever engine holds k's partition), so
 * its private map is the model of their last values; every value encodes its key, so a torn or misrouted
 * read fails at once. Ends with the cache validator, a flush, the tree validator, and the comparison.
 */
class DexStressTest {

    @ParameterizedTest(name = "{0} engines={1} threads={2} frames={3} P_A={4} partitions={5} leafFences={6} latencyNs={7} ops={8} redoLog={9} key bytes={10}")
    @CsvSource({
            "dex,         1, 2, 600, 1.0, 4,  true,  0,    60000, false, 8",
            "dex,         1, 4, 32,  0.5, 8,  true,  0,    15000, false, 8",
            "dex,         2, 4, 48,  0.3, 8,  false, 0,    15000, false, 8",
            "dex,         3, 3, 96,  1.0, 12, false, 0,    15000, false, 8",
            "dex,         2, 4, 40,  0.5, 8,  false, 1000, 3000,  false, 8",
            "sherman,     2, 4, 32,  0.0, 8,  false, 0,    15000, false, 8",
            "partitioned, 2, 4, 0,   0.0, 8,  false, 0,    15000, false, 8",
            "dex,         2, 4, 48,  0.5, 4,  false, 0,    15000, true,  8",
            "dex,         1, 4, 600, 1.0, 2,  true,  0,    15000, true,  8",
            "sherman,     2, 4, 32,  0.0, 8,  false, 0,    15000, true,  8",
            "dex,         2, 4, 48,  0.3, 8,  false, 0,    15000, false, 16",
            "dex,         1, 4, 32,  0.5, 8,  true,  0,    15000, true,  16",
            "dex,         2, 4, 64,  0.5, 6,  false, 0,    15000, false, 64",
            "sherman,     2, 4, 32,  0.0, 8,  false, 0,    10000, true,  64"})
    void concurrentOperationsKeepEveryLastWrite(String mode, int engines, int threads, int frames, double admission,
                                                int partitions, boolean leafFences, long latencyNs,
                                                int opsPerThread, boolean redoLog, int keyBytes) throws Exception {
        try (DexFixture fixture = new DexFixture(2, 1, 4_000, partitions, leafFences, latencyNs,
                dev.dex.core.tree.TreeSettings.DEFAULT_BULK_FILL_FACTOR, false, keyBytes)) {
            // A one-chunk log (64 KiB, 1,636 records): many threads share a partition's log, wrap it, and checkpoint.
            fixture.redoLog = redoLog ? dev.dex.core.log.RedoLogSettings.ON.withBytes(64 << 10) : dev.dex.core.log.RedoLogSettings.OFF;
            DexEngineSettings config = new DexEngineSettings(mode, (long) frames * FrameHeaderDescriptor.FRAME_LENGTH,
                    DexEngineSettings.DEFAULT_COOLING_RATIO, admission);
            List<DexEngine> list = fixture.open(engines, config);
            List<Map<Long, Long>> models = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                models.add(new HashMap<>());
            }
            fixture.initialModel().forEach((k, v) -> models.get((int) (k % threads)).put(k, encode(k, 0)));
            // Rewrite the loaded values so every value in the tree encodes its key.
            for (int e = 0; e < engines; e++) {
                WideKeys.Session s = fixture.wide.of(list.get(e).newSession());
                for (var entry : fixture.initialModel().entrySet()) {
                    if (fixture.partitionOf(entry.getKey()) % engines == e) {
                        s.update(entry.getKey(), encode(entry.getKey(), 0));
                    }
                }
                s.session().close();
            }

            long range = 2L * fixture.loaded + 200;
            CountDownLatch start = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                Thread worker = new Thread(() -> {
                    WideKeys.Session[] sessions = list.stream().map(e -> fixture.wide.of(e.newSession()))
                            .toArray(WideKeys.Session[]::new);
                    try {
                        start.await();
                        run(fixture, sessions, id, threads, opsPerThread, range, models.get(id));
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        for (WideKeys.Session s : sessions) {
                            s.session().close();
                        }
                    }
                }, "dex-stress-" + t);
                workers.add(worker);
                worker.start();
            }
            start.countDown();
            for (Thread worker : workers) {
                worker.join(TimeUnit.MINUTES.toMillis(3));
                assertTrue(!worker.isAlive(), worker.getName() + " did not finish");
            }
            assertNull(failure.get(), () -> "worker failed: " + failure.get());

            for (DexEngine engine : list) {
                CacheStats stats = engine.stats();
                if (frames > 0) {
                    assertTrue(stats.admissions() > 0, "nodes were admitted: " + stats);
                }
                if (stats.admissions() > frames) {
                    // Frames are freed by eviction, of cooled frames only, or dropped (here: by merges, which drop the
                    // cached nodes they change).
                    assertTrue(stats.evictions() + stats.drops() >= stats.admissions() - frames && stats.coolings() >= stats.evictions(),
                            "admitting more nodes than frames takes cooling and eviction: " + stats);
                }
            }
            if (mode.equals("dex") && frames <= 48) {
                assertTrue(list.get(0).stats().admissions() > frames, "a cache this small is overrun: " + list.get(0).stats());
            }

            TreeMap<Long, Long> expected = new TreeMap<>();
            models.forEach(expected::putAll);
            if (redoLog) {
                // The engines vanish with their dirty pages; a new one takes every partition over from the logs.
                list.forEach(CacheValidator::validate);
                fixture.engines.clear();
                DexEngine heir = DexEngine.open(fixture.fabric.connect(fixture.regions.stream()
                        .mapToInt(dev.dex.rdma.ExportedRegion::serverId).toArray()),
                        new DexEngineSettings("no-offload", 4096L * FrameHeaderDescriptor.FRAME_LENGTH, DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0),
                        null, fixture.redoLog);
                list.forEach(gone -> heir.instanceGone(gone.instanceId()));
                for (int p = 0; p < fixture.table.count(); p++) {
                    heir.acquire(p);
                }
                fixture.engines.add(heir);
                TreeMap<Long, Long> recovered = new TreeMap<>();
                try (DexSession session = heir.newSession()) {
                    WideKeys.Session s = fixture.wide.of(session);
                    long[] keys = new long[expected.size() + 100];
                    long[] values = new long[keys.length];
                    int n = s.scan(Long.MIN_VALUE + 1, keys.length, keys, values);
                    for (int i = 0; i < n; i++) {
                        recovered.put(keys[i], values[i]);
                    }
                }
                assertEquals(expected, recovered, "every last write, read back by the heir after the writers vanished");
            }
            assertEquals(expected, fixture.validateFlushAndRead());
        }
    }

    static void run(DexFixture fixture, WideKeys.Session[] sessions, int id, int threads, int ops, long range,
                            Map<Long, Long> model) {
        SplittableRandom random = new SplittableRandom(id * 7919L + 3);
        long[] scanKeys = new long[40];
        long[] scanValues = new long[40];
        for (int op = 1; op <= ops; op++) {
            // Half the operations hit a hot range of a few leaves, so threads collide on the same frames.
            long any = random.nextBoolean() ? random.nextLong(1, 240) : random.nextLong(1, range);
            long own = any - Math.floorMod(any, (long) threads) + id;
            WideKeys.Session anySession = sessions[fixture.partitionOf(any) % sessions.length];
            WideKeys.Session ownSession = sessions[fixture.partitionOf(own) % sessions.length];
            switch (random.nextInt(10)) {
                case 0, 1 -> {
                    if (anySession.lookup(any)) {
                        checkValue(any, anySession.value());
                    }
                    if (ownSession.lookup(own)) {
                        assertEquals(model.get(own), ownSession.value(), "own key " + own);
                    } else {
                        assertNull(model.get(own), "own key " + own + " lost");
                    }
                }
                case 2, 3, 4 -> {
                    long v = encode(own, op);
                    assertEquals(model.put(own, v) != null, ownSession.put(own, v), "put " + own);
                }
                case 5 -> {
                    long v = encode(own, op);
                    assertEquals(model.containsKey(own), ownSession.update(own, v), "update " + own);
                    model.computeIfPresent(own, (k, old) -> v);
                }
                case 6 -> assertEquals(model.remove(own) != null, ownSession.delete(own), "delete " + own);
                case 7 -> {
                    long v = encode(own, op);
                    assertEquals(model.putIfAbsent(own, v) == null, ownSession.insert(own, v), "insert " + own);
                }
                default -> {
                    int n = anySession.scan(any, scanKeys.length, scanKeys, scanValues);
                    for (int i = 0; i < n; i++) {
                        assertTrue(i == 0 ? scanKeys[i] >= any : scanKeys[i] > scanKeys[i - 1], "scan order");
                        checkValue(scanKeys[i], scanValues[i]);
                    }
                }
            }
        }
    }

    static long encode(long key, int sequence) {
        return key * 1_000_003L + sequence;
    }

    static void checkValue(long key, long value) {
        long sequence = value - key * 1_000_003L;
        assertTrue(sequence >= 0 && sequence < 1_000_003L, "value " + value + " does not belong to key " + key);
    }
}
