package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;

import org.agrona.MutableDirectBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.testing.TestResources;

/**
 * A scan reads its next leaves together ({@link ScanPrefetch}): it returns what a scan that reads them one by one returns,
 * its leaves go in batches, no image read ahead is cached, and under concurrent writers a scan never returns a value
 * older than one acknowledged before it began, nor a value of another key.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ScanPrefetchTest {
    private static final int KEYS = 20_000;
    private static final int CHUNK = 1 << 20;

    @AutoClose
    private final TestResources resources = new TestResources();

    /** Counts node reads issued alone and in batches. */
    private static final class CountingReads extends ForwardingRemoteMemory {
        final AtomicLong single = new AtomicLong();
        final AtomicLong batched = new AtomicLong();

        CountingReads(RemoteMemory delegate) {
            super(delegate);
        }

        @Override
        public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
            if (length == NodeHeaderDescriptor.NODE_LENGTH) {
                single.incrementAndGet();
            }
            super.read(address, dst, dstOffset, length);
        }

        @Override
        public void start(VerbBatch batch) {
            for (int i = 0; i < batch.size(); i++) {
                if (batch.op(i) == VerbBatch.READ) {
                    batched.incrementAndGet();
                }
            }
            startOnDelegate(batch);
        }
    }

    /** Keys 1..KEYS, key k holding value k x 3 (k in the low 20 bits, so a value names its key). */
    private LocalFabric loaded() {
        LocalFabric fabric = resources.closeAfter(new LocalFabric());
        fabric.export(0, 64L * CHUNK, CHUNK);
        RemoteMemory admin = resources.closeAfter(fabric.connect(0));
        long[] k = new long[KEYS];
        long[] v = new long[KEYS];
        for (int i = 0; i < KEYS; i++) {
            k[i] = i + 1;
            v[i] = (i + 1) * 3L;
        }
        BulkLoader.formatAndLoad(admin, TreeSettings.defaults(), SortedEntries.of(k, v), loaded -> { });
        PartitionTable.store(admin, PartitionTable.equalWidth(2, 0, KEYS + 1L));
        return fabric;
    }

    private static DexEngine engine(RemoteMemory memory, double leafAdmission) {
        DexEngine engine = DexEngine.open(memory, new DexEngineSettings("no-offload", 4096L * FrameHeaderDescriptor.FRAME_LENGTH,
                DexEngineSettings.DEFAULT_COOLING_RATIO, leafAdmission), null, RedoLogSettings.OFF);
        engine.acquire(0);
        engine.acquire(1);
        return engine;
    }

    @Test
    void aLongScanReadsItsLeavesInBatchesAndReturnsEveryEntry() {
        LocalFabric fabric = loaded();
        CountingReads memory = new CountingReads(resources.closeAfter(fabric.connect(0)));
        DexEngine engine = engine(memory, 0.0); // no leaf is ever cached: every leaf of a scan is read
        try (DexSession session = engine.newSession()) {
            long[] keys = new long[KEYS];
            long[] values = new long[KEYS];
            session.lookup(1); // caches the inner nodes of the first leaf's path
            long singleBefore = memory.single.get();
            int n = session.scan(1, 6_000, keys, values);
            assertEquals(6_000, n);
            for (int i = 0; i < n; i++) {
                assertEquals(i + 1, keys[i], "entry " + i);
                assertEquals((i + 1) * 3L, values[i], "entry " + i);
            }
            long single = memory.single.get() - singleBefore;
            long batched = memory.batched.get();
            ScanPrefetch prefetch = prefetchOf(session);
            assertTrue(prefetch.used() > 50, "the scan used leaves read ahead: " + prefetch.used());
            assertTrue(batched >= 4 * single, "most leaves came in batches: " + batched + " batched, " + single + " alone");
            assertTrue(prefetch.readAhead() - prefetch.used() <= ScanPrefetch.MAX,
                    "at most one batch's worth read ahead and not used: " + prefetch.readAhead() + " read, " + prefetch.used() + " used");

            // A whole scan across both partitions, and one of the first partition alone, against the same model.
            n = session.scan(1, KEYS, keys, values);
            assertEquals(KEYS, n);
            for (int i = 0; i < n; i++) {
                assertEquals(i + 1, keys[i]);
                assertEquals((i + 1) * 3L, values[i]);
            }
            n = session.scanPartition(new long[] {5_000}, KEYS, keys, values);
            assertEquals(10_000 - 5_000 + 1, n, "the first partition ends at 10,000");
            assertEquals(10_000, keys[n - 1]);

            // Every inner node is cached now: a scan of 100 entries reads its first leaf in one batch with the next.
            long singles = memory.single.get();
            long batchedBefore = memory.batched.get();
            SplittableRandom random = new SplittableRandom(5);
            for (int i = 0; i < 50; i++) {
                long start = random.nextLong(1, 9_000);
                assertEquals(100, session.scan(start, 100, keys, values));
                assertEquals(start + 99, keys[99]);
            }
            // Alone only where a scan goes on under the next parent (the leaves read ahead stop at the parent's end).
            assertTrue(memory.single.get() - singles <= 10, "leaves of 50 scans read alone: " + (memory.single.get() - singles));
            assertTrue(memory.batched.get() - batchedBefore >= 100, "two leaves or more a scan, in batches");
        }
        assertEquals(0, cachedLeaves(engine), "no image read ahead was cached");
        CacheValidator.validate(engine);
        engine.close();
    }

    /**
     * Lazy leaf admission keeps its odds: at P_A 1 every leaf a scan reads is admitted, so none is read ahead (an image
     * read ahead is never cached); at P_A 0.5 about half of the leaves are read ahead and the others are cached.
     */
    @Test
    void leavesTheDrawAdmitsAreReadByTheScanAndCached() {
        LocalFabric fabric = loaded();
        DexEngine always = engine(resources.closeAfter(fabric.connect(0)), 1.0);
        long[] keys = new long[6_000];
        long[] values = new long[6_000];
        try (DexSession session = always.newSession()) {
            assertEquals(6_000, session.scan(1, 6_000, keys, values));
            assertEquals(0, prefetchOf(session).readAhead(), "every leaf drawn to be admitted: none read ahead");
        }
        int perLeaf = always.keys.leafCapacity();
        int cached = cachedLeaves(always);
        assertTrue(cached >= 6_000 / perLeaf, "every leaf the scan read is cached: " + cached);
        CacheValidator.validate(always);
        always.close();

        DexEngine half = engine(resources.closeAfter(fabric.connect(0)), 0.5);
        try (DexSession session = half.newSession()) {
            assertEquals(6_000, session.scan(1, 6_000, keys, values));
            for (int i = 0; i < 6_000; i++) {
                assertEquals((i + 1) * 3L, values[i]);
            }
            ScanPrefetch prefetch = prefetchOf(session);
            int admitted = cachedLeaves(half);
            long total = admitted + prefetch.used();
            assertTrue(prefetch.used() > total / 4 && admitted > total / 4,
                    "about half read ahead, half cached: " + prefetch.used() + " read ahead and used, " + admitted + " cached");
        }
        CacheValidator.validate(half);
        half.close();
    }

    /**
     * The race that makes an image read ahead unfit for the cache, made to happen: right after each batch of leaves the
     * scan reads ahead, another thread writes the first key of each of those leaves (but the batch's first) (through to remote memory, or into
     * the leaf if its draw admits it). The scan may return a written key's old or new value, but never another key's;
     * and afterwards every key reads its latest value: no image read ahead (older than those writes) was cached. With
     * such images admitted at P_A, this fails.
     */
    @Test
    void anImageReadAheadIsNeverCachedEvenWhenALeafChangedSince() throws Exception {
        LocalFabric fabric = loaded();
        AtomicReference<DexEngine> engineRef = new AtomicReference<>();
        java.util.Set<Long> written = java.util.concurrent.ConcurrentHashMap.newKeySet();
        RemoteMemory racing = new ForwardingRemoteMemory(resources.closeAfter(fabric.connect(0))) {
            @Override
            public void start(VerbBatch batch) {
                super.start(batch); // the reads happen now, one after the other, before the writes below
                java.util.List<Long> firstKeys = new java.util.ArrayList<>();
                dev.dex.core.node.NodeView leaf = new dev.dex.core.node.NodeView(engineRef.get().keys);
                // Slot 0 may be the leaf the scan's own miss reads with the others, under its IO marker: a write to it
                // would wait for the scan, which waits for this writer.
                for (int i = 1; i < batch.size(); i++) {
                    if (batch.op(i) == VerbBatch.READ && batch.failure(i) == null) {
                        leaf.wrap(batch.destination(i), batch.bufferOffset(i));
                        if (leaf.isLeaf() && leaf.count() > 0) {
                            firstKeys.add(leaf.key(0));
                        }
                    }
                }
                Thread writer = new Thread(() -> {
                    try (DexSession other = engineRef.get().newSession()) {
                        for (long k : firstKeys) {
                            other.put(k, k * 5);
                            written.add(k);
                        }
                    }
                });
                writer.start();
                try {
                    writer.join();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        DexEngine engine = engine(racing, 0.2);
        engineRef.set(engine);
        long[] keys = new long[6_000];
        long[] values = new long[6_000];
        try (DexSession session = engine.newSession()) {
            assertEquals(6_000, session.scan(1, 6_000, keys, values));
            ScanPrefetch prefetch = prefetchOf(session);
            assertTrue(written.size() > 50 && prefetch.used() > 50, "the scan read leaves ahead and their first keys were"
                    + " written after each batch: " + written.size() + " written, " + prefetch.used() + " images used");
            for (int i = 0; i < 6_000; i++) {
                long k = i + 1;
                assertEquals(k, keys[i]);
                assertTrue(values[i] == k * 3 || written.contains(k) && values[i] == k * 5, "key " + k + " holds " + values[i]);
            }
            for (long k = 1; k <= 6_000; k++) {
                assertTrue(session.lookup(k));
                assertEquals(written.contains(k) ? k * 5 : k * 3, session.value(), "key " + k + ": no image older than its"
                        + " write was cached");
            }
        }
        CacheValidator.validate(engine);
        engine.close();
    }

    /**
     * Two writers, each of its own keys, put stamped values (stamp << 20 | key) while two scanners scan long ranges with P_A 0.1 (some leaves
     * cached, most read): every entry a scan returns holds a value of its own key, never older than the value of that key
     * acknowledged before the scan began, and the scan's keys are exactly the range's. Then the cache and the tree are
     * validated.
     */
    @Test
    void scansUnderWritersNeverGoBackInTime() throws Exception {
        LocalFabric fabric = loaded();
        DexEngine engine = engine(resources.closeAfter(fabric.connect(0)), 0.1);
        AtomicLongArray acknowledged = new AtomicLongArray(KEYS + 1);
        for (int k = 1; k <= KEYS; k++) {
            acknowledged.set(k, k * 3L);
        }
        AtomicLong stamps = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        Thread[] threads = new Thread[4];
        for (int t = 0; t < threads.length; t++) {
            boolean writer = t < 2;
            long seed = t;
            threads[t] = new Thread(() -> {
                SplittableRandom random = new SplittableRandom(seed);
                long[] keys = new long[2_000];
                long[] values = new long[2_000];
                long[] floor = new long[KEYS + 1];
                try (DexSession session = engine.newSession()) {
                    while (System.nanoTime() < deadline && failure.get() == null) {
                        if (writer) {
                            // Each writer its own keys (odd or even): a key's values are acknowledged in stamp order.
                            int key = random.nextInt(1, KEYS / 2 + 1) * 2 - (int) seed;
                            long value = stamps.incrementAndGet() << 20 | key;
                            session.put(key, value);
                            acknowledged.set(key, value);
                            continue;
                        }
                        int start = random.nextInt(1, KEYS - keys.length);
                        for (int k = start; k < start + keys.length; k++) {
                            floor[k] = acknowledged.get(k);
                        }
                        int n = session.scan(start, keys.length, keys, values);
                        assertEquals(keys.length, n);
                        for (int i = 0; i < n; i++) {
                            long key = start + i;
                            assertEquals(key, keys[i], "scan from " + start + ", entry " + i);
                            long value = values[i];
                            boolean initial = value == key * 3;
                            assertTrue(initial || (value & ((1 << 20) - 1)) == key, "key " + key + " holds another key's value " + value);
                            assertTrue(value >= floor[(int) key] || initial && floor[(int) key] == key * 3,
                                    "key " + key + ": " + value + " is older than " + floor[(int) key] + ", acknowledged before the scan");
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, (writer ? "writer-" : "scanner-") + t);
            threads[t].start();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        assertTrue(stamps.get() > 1_000, "the writers wrote: " + stamps.get());
        CacheValidator.validate(engine);
        engine.close();
        RemoteMemory admin = resources.closeAfter(fabric.connect(0));
        Map<Long, Long> stored = new java.util.HashMap<>();
        TreeValidator.validate(admin, stored::put);
        for (int k = 1; k <= KEYS; k++) {
            assertEquals(acknowledged.get(k), stored.get((long) k), "key " + k);
        }
    }

    private static ScanPrefetch prefetchOf(DexSession session) {
        try {
            java.lang.reflect.Field field = DexSession.class.getDeclaredField("admission");
            field.setAccessible(true);
            return ((Admission) field.get(session)).prefetch;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Frames that cache a leaf. */
    private static int cachedLeaves(DexEngine engine) {
        int leaves = 0;
        dev.dex.core.node.NodeView view = new dev.dex.core.node.NodeView(engine.keys);
        for (int f = 0; f < engine.arena.frames(); f++) {
            int state = engine.arena.state(f);
            if ((state == FrameHeaderDescriptor.HOT || state == FrameHeaderDescriptor.COOLING) && engine.arena.wrap(view, f).isLeaf()) {
                leaves++;
            }
        }
        return leaves;
    }
}
