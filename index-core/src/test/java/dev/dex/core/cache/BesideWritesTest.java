package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.DirectBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.dex.core.log.RedoLogDescriptor;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.local.LocalFabric;

/**
 * A write to an uncached owned leaf outside a batch sends its page and its redo-log record together
 * ({@link GroupCommit#writeBeside}, docs/durability.md "A record beside its page"): one batch of two writes, not two
 * writes one after the other. A fault in either write of that batch leaves nothing lost and nothing stuck: a record
 * whose write failed is written again before the write is acknowledged, and a page write that failed is reported
 * only once its record is in the log, so no later commit waits for a hole.
 */
class BesideWritesTest {
    /** One partition: every leaf is owned (none spans two partitions). */
    private static final int PARTITIONS = 1;
    private static final long RANGE = 2_000_000;
    private static final int CHUNK = 4096;
    /** Logs that hold every record of a test without a checkpoint, so that the takeover replays them all. */
    private static final int LOG = 1 << 20;
    private static final int RECORD = RedoLogDescriptor.RECORD_LENGTH;

    /** Counts the batches it is given and what they hold; fails chosen writes once each, before they are applied. */
    static final class WatchedMemory extends ForwardingRemoteMemory {
        /** Batches of exactly one node write and one record write. */
        final AtomicInteger pageAndRecord = new AtomicInteger();
        /** Node writes (1 KiB) issued alone, outside any batch. */
        final AtomicInteger pagesAlone = new AtomicInteger();
        /** Record writes issued alone. */
        final AtomicInteger recordsAlone = new AtomicInteger();
        /** Record writes and node writes still to fail, and those failed. */
        final AtomicInteger failRecords = new AtomicInteger();
        final AtomicInteger failPages = new AtomicInteger();
        final AtomicLong failed = new AtomicLong();
        private final ThreadLocal<Boolean> inBatch = ThreadLocal.withInitial(() -> false);

        WatchedMemory(RemoteMemory delegate) {
            super(delegate);
        }

        /** Batches of a page and a record on two different memory servers (none may be). */
        final AtomicInteger pageAndRecordApart = new AtomicInteger();

        @Override
        public void start(VerbBatch batch) {
            if (batch.size() == 2 && batch.op(0) == VerbBatch.WRITE && batch.length(0) == NodeHeaderDescriptor.NODE_LENGTH
                    && batch.op(1) == VerbBatch.WRITE && batch.length(1) == RECORD) {
                pageAndRecord.incrementAndGet();
                if (GlobalAddress.serverId(batch.address(0)) != GlobalAddress.serverId(batch.address(1))) {
                    pageAndRecordApart.incrementAndGet();
                }
            }
            inBatch.set(true);
            try {
                super.start(batch); // each verb through write() below
            } finally {
                inBatch.set(false);
            }
        }

        @Override
        public void write(long address, DirectBuffer src, int srcOffset, int length) {
            boolean batched = inBatch.get();
            if (!batched && length == NodeHeaderDescriptor.NODE_LENGTH) {
                pagesAlone.incrementAndGet();
            } else if (!batched && length == RECORD) {
                recordsAlone.incrementAndGet();
            }
            if (batched && length == RECORD && take(failRecords) || batched && length == NodeHeaderDescriptor.NODE_LENGTH && take(failPages)) {
                failed.incrementAndGet();
                throw new FabricException("injected: the write of " + length + " bytes at " + address + " was lost");
            }
            super.write(address, src, srcOffset, length);
        }

        private static boolean take(AtomicInteger left) {
            return left.getAndUpdate(n -> Math.max(0, n - 1)) > 0;
        }

        void reset() {
            pageAndRecordApart.set(0);
            pageAndRecord.set(0);
            pagesAlone.set(0);
            recordsAlone.set(0);
        }
    }

    private static final class Pool implements AutoCloseable {
        final LocalFabric fabric = new LocalFabric();
        private final int logBytes;

        Pool() {
            this(LOG);
        }

        Pool(int logBytes) {
            this.logBytes = logBytes;
            fabric.export(0, 256L << 20, CHUNK);
            fabric.export(1, 256L << 20, CHUNK);
            RemoteMemory admin = fabric.connect(0, 1);
            // Every tenth key, loaded in bulk: the subtrees below level 1 go to the two memory servers in turn, so the
            // partition's leaves lie on both, and its log on one.
            int n = (int) (RANGE / 10);
            long[] keys = new long[n];
            long[] values = new long[n];
            for (int i = 0; i < n; i++) {
                keys[i] = 1 + 10L * i;
                values[i] = keys[i];
            }
            BulkLoader.formatAndLoad(admin, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR), SortedEntries.of(keys, values),
                    loaded -> { });
            PartitionTable.store(admin, PartitionTable.equalWidth(PARTITIONS, 0, RANGE));
        }

        /** An engine that never admits a leaf (P_A 0): every leaf write is an uncached owned leaf's write-through. */
        private DexEngine engine(RemoteMemory memory) {
            return DexEngine.open(memory, new DexEngineSettings("no-offload", 256L * FrameHeaderDescriptor.FRAME_LENGTH,
                    DexEngineSettings.DEFAULT_COOLING_RATIO, 0.0), null, RedoLogSettings.ON.withBytes(logBytes));
        }

        /** {@link #engine}, holding every partition after the engines {@code gone}. */
        DexEngine open(RemoteMemory memory, DexEngine... gone) {
            DexEngine engine = engine(memory);
            for (DexEngine dead : gone) {
                engine.instanceGone(dead.instanceId());
            }
            for (int p = 0; p < PARTITIONS; p++) {
                engine.acquire(p);
            }
            return engine;
        }

        /**
         * Takes over from {@code gone}, which vanished, and checks that its replay read every record {@code gone}'s log
         * held after its checkpoint: a record missing from its slot would end the replay there, and every later record
         * (of writes whose pages were still in a cache) would be lost.
         */
        DexEngine takeOver(DexEngine gone) {
            var log = gone.log(0);
            long records = log.nextLsn() - log.checkpoint();
            DexEngine engine = engine(fabric.connect(0, 1));
            engine.instanceGone(gone.instanceId());
            assertTrue(records > 0, "the test needs records after the last checkpoint");
            assertEquals(records, engine.acquireReport(0).replayed(), "records replayed from the log of the engine that vanished");
            return engine;
        }

        @Override
        public void close() {
            fabric.close();
        }
    }

    /** The keys the pool loaded: every tenth, each its own value. Puts of these keys update leaves (no split). */
    private static TreeMap<Long, Long> loaded() {
        TreeMap<Long, Long> model = new TreeMap<>();
        for (long k = 1; k < RANGE; k += 10) {
            model.put(k, k);
        }
        return model;
    }

    private static void assertServes(DexEngine engine, TreeMap<Long, Long> expected, String context) {
        try (DexSession s = engine.newSession()) {
            for (var e : expected.entrySet()) {
                assertTrue(s.lookup(e.getKey()), context + ": key " + e.getKey() + " is gone");
                assertEquals(e.getValue(), s.value(), context + ": key " + e.getKey());
            }
            long[] keys = new long[expected.size() + 10];
            long[] values = new long[keys.length];
            assertEquals(expected.size(), s.scan(Long.MIN_VALUE + 1, keys.length, keys, values), context + ": a scan of everything");
        }
    }

    @Test
    void anUncachedOwnedWriteSendsItsPageAndItsRecordTogether() {
        try (Pool pool = new Pool()) {
            WatchedMemory memory = new WatchedMemory(pool.fabric.connect(0, 1));
            DexEngine a = pool.open(memory);
            try (DexSession s = a.newSession()) {
                TreeMap<Long, Long> model = loaded();
                memory.reset();
                SplittableRandom random = new SplittableRandom(7);
                int puts = 2_000;
                for (int i = 0; i < puts; i++) {
                    long key = 1 + 10 * random.nextLong(RANGE / 10 - 1);
                    s.put(key, i);
                    model.put(key, (long) i);
                }
                // Every put rewrote an existing key of an uncached leaf. The leaves lie on both memory servers, the log on
                // one: a put whose page is on the log's server sends page and record together, any other sends its page
                // and then its record, as without this change (a page write that hangs on another server must not hold
                // up the log: GroupCommit.canWriteBeside).
                int together = memory.pageAndRecord.get();
                assertEquals(0, memory.pageAndRecordApart.get(), "pages sent beside a record on another server");
                assertEquals(puts, together + memory.pagesAlone.get(), "every put wrote its page once");
                assertEquals(memory.pagesAlone.get(), memory.recordsAlone.get(), "a page written alone has its record alone");
                assertTrue(together > puts / 4 && memory.pagesAlone.get() > puts / 4,
                        "the leaves lie on both servers: " + together + " together, " + memory.pagesAlone.get() + " apart");
                // Inside a batch of the engine (group commit) the records wait for the commit instead.
                memory.reset();
                s.beginBatch();
                for (int i = 0; i < 50; i++) {
                    long key = 1 + 10 * random.nextLong(RANGE / 10 - 1);
                    s.put(key, -i);
                    model.put(key, (long) -i);
                }
                s.commit();
                assertEquals(0, memory.pageAndRecord.get(), "a batch's writes do not go beside their records");
                assertEquals(50, memory.pagesAlone.get(), "a batch's page writes");
                // The records go to the log again, as the engine that owns them vanishes: B replays them, nothing lost.
                DexEngine b = pool.takeOver(a);
                assertServes(b, model, "after A vanished");
            }
        }
    }

    @Test
    void aRecordWhoseWriteFailedBesideItsPageIsWrittenAgainBeforeTheWriteIsAcknowledged() {
        try (Pool pool = new Pool()) {
            WatchedMemory memory = new WatchedMemory(pool.fabric.connect(0, 1));
            DexEngine a = pool.open(memory);
            TreeMap<Long, Long> model;
            try (DexSession s = a.newSession()) {
                model = loaded();
                memory.reset();
                memory.failRecords.set(5);
                for (int i = 0; i < 200; i++) {
                    long key = 1 + 10 * i;
                    s.put(key, -key);
                    model.put(key, -key);
                }
            }
            assertEquals(5, memory.failed.get(), "record writes that failed beside their pages");
            assertEquals(5 + memory.pagesAlone.get(), memory.recordsAlone.get(),
                    "records written on their own: those of pages on the other server, and the five written again");
            // A vanishes without a checkpoint: B finds every acknowledged write in A's log, and the log has no hole.
            DexEngine b = pool.takeOver(a);
            assertServes(b, model, "after A vanished");
        }
    }

    /** Two loaded keys whose leaves lie on the log's memory server: their writes go beside their records. */
    private static long[] keysBesideTheLog(DexSession s, WatchedMemory memory) {
        long[] found = new long[2];
        int n = 0;
        for (long k = 1; k < RANGE && n < 2; k += 10) {
            int before = memory.pageAndRecord.get();
            s.put(k, k); // the value it holds: the model does not change
            if (memory.pageAndRecord.get() > before && (n == 0 || k > found[0] + 1_000)) {
                found[n++] = k;
            }
        }
        assertEquals(2, n, "no leaves on the log's server");
        return found;
    }

    @Test
    void aPageWriteThatFailedIsReportedOnceItsRecordIsInTheLogAndNothingWaitsBehindIt() {
        try (Pool pool = new Pool()) {
            WatchedMemory memory = new WatchedMemory(pool.fabric.connect(0, 1));
            DexEngine a = pool.open(memory);
            TreeMap<Long, Long> model;
            long[] keys;
            try (DexSession s = a.newSession()) {
                model = loaded();
                keys = keysBesideTheLog(s, memory);
                memory.failPages.set(1);
                FabricException lost = assertThrows(FabricException.class, () -> s.put(keys[0], 4242));
                assertTrue(lost.getMessage().startsWith("injected"), lost.getMessage());
                // Its record was written beside the lost page: the log holds a write that was not acknowledged, which is
                // allowed (a failed write may or may not take effect). Then the page failed and its record failed too.
                memory.failPages.set(1);
                memory.failRecords.set(1);
                assertThrows(FabricException.class, () -> s.put(keys[1], 4343));
                assertEquals(3, memory.failed.get());
                // Nothing waits for a record of the failed writes: the next writes commit at once, from another thread's
                // session (before this one writes again) and from this one.
                Thread other = new Thread(() -> {
                    try (DexSession t = a.newSession()) {
                        t.put(31, 88);
                    }
                });
                other.start();
                assertTrue(joined(other), "a write of another session waited behind the failed ones");
                model.put(31L, 88L);
                s.put(21, 77);
                model.put(21L, 77L);
                // The failed writes: each key holds its old value or its new one; the model follows what is there.
                for (int i = 0; i < 2; i++) {
                    assertTrue(s.lookup(keys[i]));
                    long now = s.value();
                    assertTrue(now == keys[i] || now == 4242 + 101 * i, "key " + keys[i] + " holds " + now);
                    model.put(keys[i], now);
                }
            }
            DexEngine b = pool.takeOver(a);
            // B replays A's log: both failed writes' records are there (the second's written again on its own), so B may
            // hold the new values where A's pages kept the old ones. Every acknowledged write must be there.
            try (DexSession s = b.newSession()) {
                for (int i = 0; i < 2; i++) {
                    assertTrue(s.lookup(keys[i]));
                    long now = s.value();
                    assertTrue(now == keys[i] || now == 4242 + 101 * i, "key " + keys[i] + " holds " + now);
                    model.put(keys[i], now);
                }
            }
            assertServes(b, model, "after A vanished");
        }
    }

    /**
     * Thread A rewrites key k while thread B's record, whose LSN lies between A's two writes, has not reached the log.
     * A's second write, beside its record, must not be acknowledged before B's record is durable: when the node dies
     * instead, the next owner's replay stops at B's missing record, after A's first write, and would put k's first
     * value back over the second.
     */
    @Test
    void aWriteBesideItsRecordWaitsForTheRecordsBeforeIt() throws Exception {
        try (Pool pool = new Pool()) {
            CrashRecoveryTest.DyingMemory dying = new CrashRecoveryTest.DyingMemory(pool.fabric.connect(0, 1), Long.MAX_VALUE);
            ReadDurabilityTest.HeldLog stalling = new ReadDurabilityTest.HeldLog(dying);
            WatchedMemory memory = new WatchedMemory(stalling);
            DexEngine a = pool.open(memory);
            long[] keys;
            try (DexSession s = a.newSession()) {
                keys = keysBesideTheLog(s, memory);
            }
            a.checkpointAll();
            long k = keys[0];
            long j = keys[1];
            java.util.concurrent.atomic.AtomicReference<Throwable> secondFailed = new java.util.concurrent.atomic.AtomicReference<>();
            java.util.concurrent.CountDownLatch firstDone = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch goOn = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.atomic.AtomicBoolean acknowledged = new java.util.concurrent.atomic.AtomicBoolean();
            Thread writerA = new Thread(() -> {
                DexSession s = a.newSession(); // never closed: the node dies
                s.put(k, 1_001); // LSN c, durable
                firstDone.countDown();
                try {
                    goOn.await();
                    s.put(k, 1_002); // LSN c + 2, after B's c + 1
                    acknowledged.set(true);
                } catch (Throwable e) {
                    secondFailed.set(e);
                }
            });
            Thread writerB = new Thread(() -> {
                DexSession s = a.newSession();
                stalling.only = Thread.currentThread();
                stalling.hold = true;
                try {
                    s.put(j, 2_001); // LSN c + 1: its page is written, its record stalls, then the node dies
                } catch (RuntimeException died) {
                    // expected
                }
            });
            writerA.start();
            assertTrue(firstDone.await(10, java.util.concurrent.TimeUnit.SECONDS));
            writerB.start();
            assertTrue(stalling.holding.await(10, java.util.concurrent.TimeUnit.SECONDS), "B's record write never came");
            goOn.countDown();
            writerA.join(300);
            assertTrue(writerA.isAlive() && !acknowledged.get(), "A's second write was acknowledged while B's record before it"
                    + " was not in the log");
            dying.kill();
            stalling.release.countDown();
            writerA.join(10_000);
            writerB.join(10_000);
            assertTrue(!writerA.isAlive() && !writerB.isAlive(), "a writer hangs after the node died");
            assertTrue(secondFailed.get() != null, "A's second write failed when the log could not take B's record");
            // Either value of k is right now (the second write was not acknowledged), and the replay must be whole up to
            // its hole: k holds 1,001 or 1,002.
            DexEngine b = pool.open(pool.fabric.connect(0, 1), a);
            try (DexSession s = b.newSession()) {
                assertTrue(s.lookup(k));
                assertTrue(s.value() == 1_001 || s.value() == 1_002, "k holds " + s.value());
                if (acknowledged.get()) {
                    assertEquals(1_002, s.value(), "k lost its acknowledged second write");
                }
            }
        }
    }

    /**
     * A log of two chunks (about 200 records): it fills every hundred writes, so writes find it without room, with
     * the record one lap earlier not yet written, or past a checkpoint that moved meanwhile, and go the usual way then.
     * Four threads update their own keys until the engine's memory dies after a given number of writes; the engine
     * that takes over must hold every acknowledged write. A write beside its record is acknowledged only once every
     * record before it is durable too: else a replay that stops at another thread's lost record would put back an
     * older value of a key over the acknowledged one, in its page.
     */
    @ParameterizedTest(name = "memory dies after {0} writes")
    @ValueSource(longs = {300, 1_111, 2_500, 4_000})
    void fourThreadsOnASmallLogLoseNothingWhenTheirNodeDies(long budget) throws Exception {
        try (Pool pool = new Pool(2 * CHUNK)) {
            CrashRecoveryTest.DyingMemory dying = new CrashRecoveryTest.DyingMemory(pool.fabric.connect(0, 1), budget);
            WatchedMemory watched = new WatchedMemory(dying);
            DexEngine a;
            try {
                a = pool.open(watched);
            } catch (IllegalStateException crashedWhileAcquiring) {
                assertTrue(dying.dead(), "acquiring failed without the crash: " + crashedWhileAcquiring);
                return;
            }
            java.util.Map<Long, Long> acknowledged = new java.util.concurrent.ConcurrentHashMap<>();
            java.util.Map<Long, Long> inFlight = new java.util.concurrent.ConcurrentHashMap<>();
            java.util.List<Thread> threads = new java.util.ArrayList<>();
            for (int t = 0; t < 4; t++) {
                long thread = t;
                threads.add(new Thread(() -> {
                    DexSession session = a.newSession(); // never closed: the node dies
                    SplittableRandom random = new SplittableRandom(budget + thread);
                    for (int i = 0; i < 20_000; i++) {
                        // 64 loaded keys a thread, rewritten over and over: a replay that stopped at a hole before
                        // a key's last write would bring back its write before, over the acknowledged one.
                        long key = 1 + 10 * (random.nextInt(64) * 4 + thread);
                        long value = random.nextLong(1, Long.MAX_VALUE);
                        inFlight.put(thread, key);
                        try {
                            session.put(key, value);
                        } catch (RuntimeException died) {
                            return; // this write may or may not have taken effect
                        }
                        acknowledged.put(key, value);
                    }
                }));
            }
            threads.forEach(Thread::start);
            for (Thread thread : threads) {
                thread.join(60_000);
                assertTrue(!thread.isAlive(), "a writer hangs");
            }
            assertTrue(dying.dead(), "the writers finished before the memory died (raise the operation count)");
            assertTrue(watched.pageAndRecord.get() > 0, "no write went beside its record");
            DexEngine b = pool.open(pool.fabric.connect(0, 1), a);
            try (DexSession s = b.newSession()) {
                int lost = 0;
                for (var e : acknowledged.entrySet()) {
                    if (inFlight.containsValue(e.getKey())) {
                        continue; // its last write was in flight: either value is right
                    }
                    if (!s.lookup(e.getKey()) || s.value() != e.getValue()) {
                        lost++;
                    }
                }
                assertEquals(0, lost, "acknowledged writes lost of " + acknowledged.size());
            }
            CacheValidator.validate(b);
        }
    }

    private static boolean joined(Thread t) {
        try {
            t.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return !t.isAlive();
    }
}
