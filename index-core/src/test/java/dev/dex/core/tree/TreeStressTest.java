package dev.dex.core.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.core.node.WideKeys;
import dev.dex.rdma.RemoteMemory;

/**
 * Several tree instances (compute nodes), several threads each, over one memory pool. Thread t owns the
 * keys {@code k} with {@code k % threads == t}: it alone writes them, so its private map is the model of
 * their last written values. Keys of all threads interleave, so every leaf is written by every thread and
 * splits run concurrently with reads, updates and deletes. Every value encodes its key, so any torn or
 * misdirected read is caught while the test runs; the end state must equal the union of the models. Runs at key
 * widths of 8, 16 and 64 bytes ({@link WideKeys}).
 */
class TreeStressTest {
    private static final long KEY_SPACE = 40_000;

    @ParameterizedTest(name = "instances={0} threadsPerInstance={1} servers={2} M={3} bulk={4} latencyNs={5} ops={6} key bytes={7}")
    @CsvSource({
            "2, 2, 2, 1, 0,    0,    30000, 8",
            "3, 2, 3, 2, 8000, 0,    20000, 8",
            "4, 1, 1, 3, 2000, 0,    20000, 8",
            "2, 2, 2, 0, 0,    2000, 4000,  8",
            "2, 2, 2, 1, 2000, 0,    20000, 16",
            "3, 1, 2, 0, 0,    0,    20000, 64"})
    void concurrentWritersAcrossInstancesKeepEveryLastWrite(int instances, int threadsPerInstance, int servers,
                                                            int subtreeLevel, int bulk, long latencyNs,
                                                            int opsPerThread, int keyBytes) throws Exception {
        int threads = instances * threadsPerInstance;
        WideKeys wide = new WideKeys(keyBytes);
        try (TestPools pools = new TestPools(servers, 64, latencyNs)) {
            RemoteMemory admin = pools.connect();
            TreeSettings config = TreeSettings.defaults().withSubtreeLevel(subtreeLevel).withKeyBytes(keyBytes);
            List<Map<Long, Long>> models = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                models.add(new HashMap<>());
            }
            long[] keys = new long[bulk];
            long[] values = new long[bulk];
            for (int i = 0; i < bulk; i++) {
                keys[i] = i * (KEY_SPACE / Math.max(1, bulk));
                values[i] = encode(keys[i], 0);
                models.get((int) Math.floorMod(keys[i], (long) threads)).put(keys[i], values[i]);
            }
            BulkLoader.formatAndLoad(admin, config, wide.entries(keys, values), n -> { });

            BaselineTree[] trees = new BaselineTree[instances];
            for (int i = 0; i < instances; i++) {
                trees[i] = BaselineTree.open(pools.connect());
            }
            CountDownLatch start = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                BaselineTree tree = trees[t % instances];
                Map<Long, Long> model = models.get(t);
                Thread worker = new Thread(() -> {
                    try {
                        start.await();
                        runWorker(wide.of(tree.newSession()), id, threads, opsPerThread, model);
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, "stress-" + t);
                workers.add(worker);
                worker.start();
            }
            start.countDown();
            for (Thread worker : workers) {
                worker.join(TimeUnit.MINUTES.toMillis(3));
                assertTrue(!worker.isAlive(), worker.getName() + " did not finish");
            }
            assertNull(failure.get(), () -> "worker failed: " + failure.get());

            Map<Long, Long> expected = new HashMap<>();
            models.forEach(expected::putAll);
            Map<Long, Long> actual = new HashMap<>();
            TreeValidator.Report report = TreeValidator.validateWords(admin, (k, v) -> actual.put(wide.fromWords(k, 0), v));
            assertEquals(expected.size(), actual.size(), "entries in the tree");
            assertEquals(expected, actual, "the tree must hold every thread's last written value");
            assertTrue(report.height() >= 2);
        }
    }

    private static void runWorker(WideKeys.Session session, int id, int threads, int ops, Map<Long, Long> model) {
        SplittableRandom random = new SplittableRandom(id * 7919L + 17);
        long[] scanKeys = new long[64];
        long[] scanValues = new long[64];
        for (int op = 1; op <= ops; op++) {
            long any = random.nextLong(KEY_SPACE);
            long own = any - Math.floorMod(any, (long) threads) + id;
            switch (random.nextInt(10)) {
                case 0, 1, 2 -> {
                    if (session.lookup(any)) {
                        checkValue(any, session.value());
                    }
                    if (session.lookup(own)) {
                        assertEquals(model.get(own), session.value(), "own key " + own);
                    } else {
                        assertNull(model.get(own), "own key " + own + " lost");
                    }
                }
                case 3, 4, 5 -> {
                    long v = encode(own, op);
                    boolean replaced = session.put(own, v);
                    assertEquals(model.put(own, v) != null, replaced, "put " + own);
                }
                case 6 -> {
                    long v = encode(own, op);
                    assertEquals(model.containsKey(own), session.update(own, v), "update " + own);
                    model.computeIfPresent(own, (k, old) -> v);
                }
                case 7 -> assertEquals(model.remove(own) != null, session.delete(own), "delete " + own);
                default -> {
                    int n = session.scan(any, scanKeys.length, scanKeys, scanValues);
                    for (int i = 0; i < n; i++) {
                        assertTrue(i == 0 ? scanKeys[i] >= any : scanKeys[i] > scanKeys[i - 1], "scan order");
                        checkValue(scanKeys[i], scanValues[i]);
                    }
                }
            }
        }
    }

    /** A value that names its key, so a misplaced or torn value cannot pass for a right one. */
    private static long encode(long key, int sequence) {
        return key * 1_000_003L + sequence;
    }

    private static void checkValue(long key, long value) {
        long sequence = value - key * 1_000_003L;
        assertTrue(sequence >= 0 && sequence < 1_000_003L, "value " + value + " does not belong to key " + key);
    }
}
