package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteOrder;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.log.RedoLog;
import dev.dex.core.log.RedoLogDescriptor;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.FaultInjectingRemoteMemory;
import dev.dex.rdma.FaultPlan;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.testing.TestResources;

/**
 * One failed verb at the places where it used to wedge a compute node or lose a write (issue 26,
 * {@code docs/durability.md} "When a verb fails"): every test injects the fault with {@link FaultInjectingRemoteMemory}
 * and asserts what follows: no frame or remote lock left held, no acknowledged write lost, no gap in a redo log, and a
 * partition that the next owner takes over cleanly.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class VerbFailureTest {
    private static final int CHUNK = 4096;
    private static final long LOADED = 4_000;
    private static final long CLIENT_A = 0xA1L;
    private static final long CLIENT_B = 0xB2L;

    @AutoClose
    private final TestResources resources = new TestResources();

    /** A fabric with one memory server, a bulk-loaded tree of keys 2, 4, ..., 2 x LOADED (value key + 1). */
    private final class Pool {
        final Fabric fabric;
        final Map<Integer, String> endpoints;
        final RemoteMemory admin;
        final PartitionTable table;

        Pool(boolean tcp, int partitions, boolean leafBounds) {
            fabric = resources.closeAfter(tcp ? new TcpFabric() : new LocalFabric());
            ExportedRegion region = resources.closeAfter(fabric.export(0, 64L << 20, CHUNK));
            endpoints = Map.of(0, region.endpoint());
            admin = resources.closeAfter(fabric.connect(endpoints));
            SharedLeaves.loadEvenKeys(admin, (int) LOADED);
            table = leafBounds ? dev.dex.core.partition.Partitioning.fromLeafFences(admin, partitions)
                    : PartitionTable.equalWidth(partitions, 0, 2 * LOADED + 2);
            PartitionTable.store(admin, table);
        }

        /** A connection with identity {@code client} (tcp) wrapped in a fault injector that starts switched off. */
        FaultInjectingRemoteMemory connect(long client, FaultPlan plan) {
            RemoteMemory connection = resources.closeAfter(fabric instanceof TcpFabric tcp ? tcp.connect(endpoints, client)
                    : fabric.connect(endpoints));
            FaultInjectingRemoteMemory faulty = new FaultInjectingRemoteMemory(connection, plan.withSeed(17));
            faulty.enabled(false);
            return faulty;
        }

        DexEngine engine(RemoteMemory memory, int frames, RedoLogSettings log) {
            return DexEngine.open(memory, new DexEngineSettings("no-offload", frames * (long) FrameHeaderDescriptor.FRAME_LENGTH,
                    DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, log);
        }

        /** Reads the remote tree after every engine was closed: its entries, checked by the validator. */
        Map<Long, Long> stored() {
            Map<Long, Long> stored = new HashMap<>();
            TreeValidator.validate(admin, stored::put);
            assertEquals(0, TreeValidator.lockedNodes(admin), "no remote lock left held");
            return stored;
        }
    }

    /** Writes and what the client was told: exact for acknowledged writes, two candidates for failed ones. */
    private static final class Model {
        final Map<Long, long[]> allowed = new HashMap<>();

        Model() {
            for (long i = 0; i < LOADED; i++) {
                allowed.put(2 * i + 2, new long[] {2 * i + 3});
            }
        }

        void acknowledged(long key, long value) {
            allowed.put(key, new long[] {value});
        }

        /** A put that failed: either the old value (or absence, -1) or the new one. */
        void uncertain(long key, long value) {
            long[] before = allowed.getOrDefault(key, new long[] {-1});
            long[] both = java.util.Arrays.copyOf(before, before.length + 1);
            both[before.length] = value;
            allowed.put(key, both);
        }

        void check(Map<Long, Long> stored) {
            for (Map.Entry<Long, long[]> entry : allowed.entrySet()) {
                Long value = stored.get(entry.getKey());
                long found = value == null ? -1 : value;
                boolean ok = false;
                for (long candidate : entry.getValue()) {
                    ok |= candidate == found;
                }
                assertTrue(ok, "key " + entry.getKey() + " holds " + found + ", allowed "
                        + java.util.Arrays.toString(entry.getValue()));
            }
        }
    }

    /** An engine without a cache (every leaf remote) holding all 8 equal-width partitions of {@code pool}. */
    private static DexEngine uncachedHoldingAll(Pool pool, FaultInjectingRemoteMemory faulty) {
        DexEngine engine = pool.engine(faulty, 0, RedoLogSettings.OFF);
        for (int p = 0; p < pool.table.count(); p++) {
            engine.acquire(p);
        }
        return engine;
    }

    /** The next put of {@code key} first releases the lock left pending, then takes it, and the key has its value. */
    private static void nextWriteReleasesThePendingLock(Pool pool, DexEngine engine, IndexSession session, long key) {
        session.put(key, 556);
        assertEquals(0, engine.pendingUnlocks());
        assertEquals(0, TreeValidator.lockedNodes(pool.admin), "no remote lock left held");
        assertTrue(session.lookup(key));
        assertEquals(556, session.value());
    }

    @Test
    void writeBacksThatFailLeaveNoFrameLockedAndAreWrittenLater() {
        Pool pool = new Pool(false, 2, true);
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withRate(0.05).withKinds(FaultPlan.Kind.WRITE));
        DexEngine engine = pool.engine(faulty, 24, RedoLogSettings.OFF); // a small cache: cooling and eviction all the time
        engine.acquire(0);
        engine.acquire(1);
        Model model = new Model();
        SplittableRandom random = new SplittableRandom(3);
        int failed = 0;
        faulty.enabled(true);
        try (IndexSession session = engine.newSession()) {
            for (int i = 0; i < 6_000; i++) {
                long key = 2 * (1 + random.nextLong(LOADED));
                long value = random.nextLong(1, Long.MAX_VALUE);
                try {
                    session.put(key, value);
                    model.acknowledged(key, value);
                } catch (FabricException e) {
                    model.uncertain(key, value);
                    failed++;
                }
                assertEquals(0, engine.lockedFrames(), "no frame stays locked between operations");
            }
            faulty.enabled(false);
            assertTrue(faulty.injected() > 20, "faults were injected: " + faulty.injected());
            assertEquals(0, engine.lockedFrames(), "no frame stays locked after a failed write-back");
            session.put(2, 77); // the node serves on
            model.acknowledged(2, 77);
        }
        engine.close(); // every dirty frame, also those whose write-back failed, is written now
        assertEquals(0, engine.dirtyFrames.get());
        model.check(pool.stored());
    }

    /**
     * A write-back goes in batches of {@link Flush#BATCH} pages; one page of a batch fails: the flush throws with every
     * frame unlocked, the batch's other pages are clean, the failed page and the pages after the batch stay dirty, and
     * the next write-back writes them.
     */
    @Test
    void aBatchedWriteBackWithOneFailedPageCleansOnlyWhatWasWritten() {
        Pool pool = new Pool(false, 1, true);
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withNthVerb(5).withKinds(FaultPlan.Kind.WRITE)
                .withApplyFirst(0));
        DexEngine engine = pool.engine(faulty, 1024, RedoLogSettings.OFF);
        engine.acquire(0);
        Model model = new Model();
        try (IndexSession session = engine.newSession()) {
            for (long k = 2; k <= 2 * LOADED; k += 20) { // a write in every leaf or two: many dirty pages
                session.put(k, k * 3);
                model.acknowledged(k, k * 3);
            }
        }
        long dirty = engine.dirtyFrames.get();
        assertTrue(dirty > 2 * Flush.BATCH, "enough dirty pages for three batches: " + dirty);
        faulty.enabled(true);
        FabricException failed = assertThrows(FabricException.class, () -> new Flush(engine).writeBackPartition(0));
        faulty.enabled(false);
        assertTrue(failed.getMessage().contains("fault injected"), failed.getMessage());
        assertEquals(0, engine.lockedFrames(), "no frame stays locked after the failed batch");
        assertEquals(dirty - (Flush.BATCH - 1), engine.dirtyFrames.get(),
                "the first batch's pages are clean but the failed one; the batches after it were not written");
        assertEquals(dirty - (Flush.BATCH - 1), new Flush(engine).writeBackPartition(0), "the next write-back writes the rest");
        assertEquals(0, engine.dirtyFrames.get());
        engine.close();
        model.check(pool.stored());
    }

    @Test
    void aSharedLeafWriteThatFailsReleasesItsRemoteLock() {
        // Equal-width bounds: the leaves that straddle a bound are shared, written through under their remote lock.
        Pool pool = new Pool(false, 8, false);
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withNthVerb(2).withKinds(FaultPlan.Kind.WRITE)
                .withApplyFirst(0));
        DexEngine engine = uncachedHoldingAll(pool, faulty);
        long key = SharedLeaves.find(pool.admin, pool.table)[0]; // a loaded key in a leaf that straddles a bound
        try (IndexSession session = engine.newSession()) {
            faulty.enabled(true);
            // Verbs of the put on a shared leaf: CAS (lock), read (version), write (node: the 1st write), write
            // (unlock: the 2nd, which fails). The write took effect: the put succeeds, and its lock waits to be released.
            session.put(key, 555);
            assertEquals(1, faulty.injected(), "the unlock failed");
            assertEquals(1, engine.pendingUnlocks(), "the lock waits to be released");
            assertEquals(1, TreeValidator.lockedNodes(pool.admin));
            faulty.enabled(false);
            nextWriteReleasesThePendingLock(pool, engine, session, key); // else the lock would stay busy for good
        }
    }

    @Test
    void aLockWhoseCompareAndSwapLostItsAnswerIsReleasedByTheNextOperation() {
        Pool pool = new Pool(false, 8, false);
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withNthVerb(1).withKinds(FaultPlan.Kind.CAS)
                .withApplyFirst(1));
        DexEngine engine = uncachedHoldingAll(pool, faulty);
        long key = SharedLeaves.find(pool.admin, pool.table)[0];
        try (IndexSession session = engine.newSession()) {
            faulty.enabled(true);
            // The lock's compare-and-swap took effect, but its answer was lost: the session may hold the lock.
            assertThrows(FabricException.class, () -> session.put(key, 555));
            assertEquals(1, faulty.injected());
            assertEquals(1, TreeValidator.lockedNodes(pool.admin), "the lock word holds this session's tag");
            assertEquals(1, engine.pendingUnlocks());
            faulty.enabled(false);
            nextWriteReleasesThePendingLock(pool, engine, session, key);
        }
    }

    @Test
    void aLockWhoseNodeWriteFailsIsReleasedAtOnce() {
        Pool pool = new Pool(false, 8, false);
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withNthVerb(1).withKinds(FaultPlan.Kind.WRITE)
                .withApplyFirst(0));
        DexEngine engine = uncachedHoldingAll(pool, faulty);
        long key = SharedLeaves.find(pool.admin, pool.table)[0];
        try (IndexSession session = engine.newSession()) {
            faulty.enabled(true);
            assertThrows(FabricException.class, () -> session.put(key, 555)); // the node write fails, not applied
            assertEquals(1, faulty.injected());
            assertEquals(0, TreeValidator.lockedNodes(pool.admin), "the lock was released although the write failed");
            faulty.enabled(false);
            assertTrue(session.lookup(key));
            assertEquals(key + 1, session.value(), "the failed write did not take effect");
        }
    }

    /**
     * @param commitFirst the batch's commit comes before the partition is given up (as on a compute node, where the
     *                    owner gives it up once the batch is answered), else after
     */
    @ParameterizedTest(name = "commit before the give-up: {0}")
    @ValueSource(booleans = {false, true})
    void aSplitWhoseWritesFailIsUndoneAndItsPartitionIsReplayed(boolean commitFirst) {
        Pool pool = new Pool(false, 2, true);
        // The split's first write (its right node) goes through; every try of the second (the parent) fails.
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withNthVerb(2).withBurst(StructureChanges.WRITE_ATTEMPTS)
                .withKinds(FaultPlan.Kind.WRITE).withApplyFirst(0.5));
        DexEngine engine = pool.engine(faulty, 4096,
                new RedoLogSettings(true, 64 * CHUNK, TimeUnit.MINUTES.toNanos(10)));
        engine.acquire(0);
        engine.acquire(1);
        int p = pool.table.partitionOf(1001);
        try (IndexSession acknowledged = engine.newSession()) {
            for (long k = 1001; k < 1041; k += 2) {
                acknowledged.put(k, -k); // new keys, each committed: in the log
            }
        }
        IndexSession batch = engine.newSession();
        batch.beginBatch(); // records wait in the session: the first remote write is the split's
        faulty.enabled(true);
        RuntimeException failed = null;
        for (long k = 1041; k < 1401 && failed == null; k += 2) {
            try {
                batch.put(k, -k);
            } catch (RuntimeException e) {
                failed = e;
            }
        }
        faulty.enabled(false);
        assertTrue(failed instanceof FabricException, "a split's write failed: " + failed);
        assertTrue(engine.partitionFailed(p), "the split of an owned node was undone in the cache: its partition failed");
        assertTrue(engine.logFailed(p), "its owner is told to give it up");
        assertTrue(engine.failure(p) instanceof FabricException);
        assertEquals(0, engine.lockedFrames());
        try (IndexSession other = engine.newSession()) {
            assertThrows(dev.dex.core.engine.PartitionNotHeldException.class, () -> other.lookup(1001),
                    "no operation enters a failed partition");
        }
        assertEquals(1, engine.pendingUnlocks(), "the node is to be repaired before its partition serves again");
        if (commitFirst) {
            // As a compute node does: the batch is answered (its commit fails) before the partition is given up. The
            // commit must not wait for the give-up, which waits for it (the log's wait is ten minutes here).
            IllegalStateException notDurable = assertTimeoutPreemptively(Duration.ofSeconds(30),
                    () -> assertThrows(IllegalStateException.class, batch::commit));
            assertTrue(notDurable.getMessage().contains("not durable"), notDurable.getMessage());
            assertTrue(engine.logFailed(p));
            engine.abandon(p);
        } else {
            engine.abandon(p);
            assertThrows(IllegalStateException.class, batch::commit, "the batch was not acknowledged, and is not durable");
        }
        batch.close();
        engine.acquire(p); // repairs the node, then replays the log
        assertEquals(0, engine.pendingUnlocks());
        try (IndexSession session = engine.newSession()) {
            for (long k = 1001; k < 1041; k += 2) {
                assertTrue(session.lookup(k), "acknowledged key " + k);
                assertEquals(-k, session.value());
            }
        }
        engine.close();
        Map<Long, Long> stored = pool.stored();
        for (long k = 1001; k < 1041; k += 2) {
            assertEquals(-k, stored.get(k), "key " + k + " in the remote tree");
        }
        for (long i = 0; i < LOADED; i++) {
            assertEquals(2 * i + 3, stored.get(2 * i + 2), "loaded key " + (2 * i + 2));
        }
    }

    @Test
    void aFailedLogFullCheckpointLeavesNoGap() {
        Pool pool = new Pool(false, 1, true);
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withNthVerb(1).withKinds(FaultPlan.Kind.WRITE)
                .withApplyFirst(0));
        DexEngine engine = pool.engine(faulty, 4096, RedoLogSettings.ON.withBytes(CHUNK));
        engine.acquire(0);
        RedoLog log = engine.log(0);
        int capacity = log.capacity();
        try (IndexSession session = engine.newSession()) {
            // A batch of more records than the log holds: its commit must checkpoint first, and the checkpoint's
            // first write-back fails once.
            session.beginBatch();
            for (int i = 0; i < capacity + 10; i++) {
                session.put(2L * (i % LOADED) + 2, 1000 + i);
            }
            faulty.enabled(true);
            session.commit();
            faulty.enabled(false);
            assertEquals(1, faulty.injected(), "the checkpoint's write-back failed once");
            assertEquals(log.nextLsn() - 1, log.durableLsn(), "no record left out");
            session.put(4, 44);
            assertEquals(log.nextLsn() - 1, log.durableLsn(), "the next commit is durable too");
        }
        assertFalse(engine.logFailed(0));
        engine.close();
        Map<Long, Long> stored = pool.stored();
        assertEquals(44, stored.get(4L));
    }

    @Test
    void aCommitOfThreeTimesTheLogWritesNothingPastIt() {
        Pool pool = new Pool(false, 1, true);
        FaultInjectingRemoteMemory connection = pool.connect(0, FaultPlan.none());
        DexEngine engine = pool.engine(connection, 4096, RedoLogSettings.ON.withBytes(CHUNK));
        engine.acquire(0);
        RedoLog log = engine.log(0);
        long sentinel = logAddress(pool.admin, 0) + CHUNK; // the chunk after the one-chunk log, whatever it holds
        UnsafeBuffer before = new UnsafeBuffer(new byte[CHUNK]);
        pool.admin.read(sentinel, before, 0, CHUNK);
        try (IndexSession session = engine.newSession()) {
            session.beginBatch();
            for (int i = 0; i < 3 * log.capacity(); i++) {
                session.put(2L * (i % LOADED) + 2, 7000 + i);
            }
            session.commit();
        }
        UnsafeBuffer after = new UnsafeBuffer(new byte[CHUNK]);
        pool.admin.read(sentinel, after, 0, CHUNK);
        for (int i = 0; i < CHUNK; i++) {
            assertEquals(before.getByte(i), after.getByte(i), "byte " + i + " after the log was overwritten");
        }
        assertEquals(log.nextLsn() - 1, log.durableLsn());
        engine.close();
        assertEquals(7000 + 3 * log.capacity() - 1, pool.stored().get(2L * ((3 * log.capacity() - 1) % LOADED) + 2));
    }

    @Test
    void anAcquireWhoseReplayCannotReadGivesTheOwnerWordBack() {
        Pool pool = new Pool(true, 2, true);
        FaultInjectingRemoteMemory a = pool.connect(CLIENT_A, FaultPlan.none());
        DexEngine first = pool.engine(a, 1024, RedoLogSettings.ON.withBytes(4 * CHUNK));
        first.acquire(0);
        try (IndexSession session = first.newSession()) {
            for (long k = 2; k < 200; k += 2) {
                session.put(k, -k); // acknowledged: in the log, not in the pages
            }
        }
        // A crashes (it never gives partition 0 up). B takes over; its replay cannot read the log's records.
        long log = logAddress(pool.admin, 0);
        Trap b = new Trap(pool.connect(CLIENT_B, FaultPlan.none()), log + RedoLogDescriptor.HEADER_LENGTH, log + 4 * CHUNK, false);
        DexEngine second = pool.engine(b, 1024, RedoLogSettings.ON.withBytes(4 * CHUNK));
        RuntimeException failed = assertThrows(RuntimeException.class, () -> second.acquire(0));
        assertTrue(b.sprung, "the replay's read failed: " + failed);
        b.off = true;
        assertFalse(second.holds(0));
        assertEquals(0, ownerClient(pool.admin, 0), "B gave the owner word back: nothing of it was written");
        assertEquals(0, second.abandon(0), "nothing held, nothing to abandon (and no spin)");
        // C takes over cleanly: it fences nobody it should not, and serves every acknowledged write.
        FaultInjectingRemoteMemory c = pool.connect(0xC3L, FaultPlan.none());
        DexEngine third = pool.engine(c, 1024, RedoLogSettings.ON.withBytes(4 * CHUNK));
        DexEngine.AcquireReport report = third.acquireReport(0);
        assertNotEquals(CLIENT_B, report.previousOwner(), "B is not fenced");
        try (IndexSession session = third.newSession()) {
            for (long k = 2; k < 200; k += 2) {
                assertTrue(session.lookup(k));
                assertEquals(-k, session.value());
            }
        }
    }

    @Test
    void anAcquireWhoseWritesFailLeavesNothingHeldAndTheNextOwnerFencesIt() {
        Pool pool = new Pool(true, 2, true);
        FaultInjectingRemoteMemory a = pool.connect(CLIENT_A, FaultPlan.none());
        DexEngine first = pool.engine(a, 1024, RedoLogSettings.ON.withBytes(4 * CHUNK));
        first.acquire(0);
        try (IndexSession session = first.newSession()) {
            for (long k = 2; k < 200; k += 2) {
                session.put(k, -k);
            }
        }
        // B's takeover: every write fails once its replay has read the log (its final checkpoint's write-backs on).
        long log = logAddress(pool.admin, 0);
        Trap b = new Trap(pool.connect(CLIENT_B, FaultPlan.none()), log + RedoLogDescriptor.HEADER_LENGTH, log + 4 * CHUNK, true);
        DexEngine second = pool.engine(b, 1024, RedoLogSettings.ON.withBytes(4 * CHUNK));
        RuntimeException failed = assertThrows(RuntimeException.class, () -> second.acquire(0));
        assertTrue(b.sprung, "a write after the replay's read failed: " + failed);
        assertFalse(second.holds(0));
        assertEquals(0, second.lockedFrames());
        assertEquals(0, second.abandon(0), "a later abandon returns at once: the partition is not RECOVERING");
        assertEquals(CLIENT_B, ownerClient(pool.admin, 0), "a write of B failed: it may still land, so B keeps the word"
                + " and the next owner fences it (" + failed + ")");
        FaultInjectingRemoteMemory c = pool.connect(0xC3L, FaultPlan.none());
        DexEngine third = pool.engine(c, 1024, RedoLogSettings.ON.withBytes(4 * CHUNK));
        DexEngine.AcquireReport report = third.acquireReport(0);
        assertEquals(CLIENT_B, report.previousOwner());
        assertTrue(report.fenced());
        try (IndexSession session = third.newSession()) {
            for (long k = 2; k < 200; k += 2) {
                assertTrue(session.lookup(k));
                assertEquals(-k, session.value(), "key " + k);
            }
        }
    }

    /**
     * Fails the reads of an address range (a log's records), or every write once such a read happened: a fault at
     * one step of a takeover, whatever the verbs before it were.
     */
    private static final class Trap extends dev.dex.rdma.ForwardingRemoteMemory {
        private final long from;
        private final long to;
        private final boolean writesAfter;
        volatile boolean armed;
        volatile boolean sprung;
        volatile boolean off;

        Trap(RemoteMemory delegate, long from, long to, boolean writesAfter) {
            super(delegate);
            this.from = from;
            this.to = to;
            this.writesAfter = writesAfter;
        }

        @Override
        public void read(long address, org.agrona.MutableDirectBuffer dst, int dstOffset, int length) {
            if (!off && address >= from && address < to) {
                if (!writesAfter) {
                    sprung = true;
                    throw new FabricException("memory server 0 did not answer a READ (trap)");
                }
                armed = true;
            }
            super.read(address, dst, dstOffset, length);
        }

        @Override
        public void write(long address, org.agrona.DirectBuffer src, int srcOffset, int length) {
            if (!off && armed) {
                sprung = true;
                throw new FabricException("memory server 0 did not answer a WRITE (trap)");
            }
            super.write(address, src, srcOffset, length);
        }
    }

    @Test
    void aReleaseThatCannotWriteBackFreesThePartitionAndTheNextOwnerReplaysIt() {
        Pool pool = new Pool(true, 2, true);
        FaultInjectingRemoteMemory a = pool.connect(CLIENT_A, FaultPlan.none().withRate(1).withKinds(FaultPlan.Kind.WRITE)
                .withApplyFirst(0));
        DexEngine first = pool.engine(a, 1024, RedoLogSettings.ON.withBytes(16 * CHUNK));
        first.acquire(0);
        try (IndexSession session = first.newSession()) {
            for (long k = 2; k < 400; k += 2) {
                session.put(k, k * 7); // dirty pages, records in the log
            }
        }
        a.enabled(true);
        long start = System.nanoTime();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> first.release(0));
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(30), "it gave up after its retries");
        assertTrue(e.getMessage().contains("redo log"), e.getMessage());
        assertFalse(first.holds(0));
        assertNull(first.log(0));
        assertEquals(0, first.lockedFrames());
        assertEquals(0, first.frameCounts()[3], "no dirty frame of it stays cached");
        a.enabled(false);
        FaultInjectingRemoteMemory b = pool.connect(CLIENT_B, FaultPlan.none());
        DexEngine second = pool.engine(b, 1024, RedoLogSettings.ON.withBytes(16 * CHUNK));
        DexEngine.AcquireReport report = second.acquireReport(0);
        assertEquals(CLIENT_A, report.previousOwner(), "A's writes failed: the next owner fences it");
        assertTrue(report.replayed() > 0);
        try (IndexSession session = second.newSession()) {
            for (long k = 2; k < 400; k += 2) {
                assertTrue(session.lookup(k));
                assertEquals(k * 7, session.value(), "key " + k);
            }
        }
    }

    @Test
    void aReleaseWhoseWriteBackFailsOnceWritesItAgainAndSucceeds() {
        Pool pool = new Pool(false, 2, true);
        FaultInjectingRemoteMemory a = pool.connect(0, FaultPlan.none().withNthVerb(1).withBurst(2)
                .withKinds(FaultPlan.Kind.WRITE).withApplyFirst(0));
        DexEngine first = pool.engine(a, 1024, RedoLogSettings.ON.withBytes(16 * CHUNK));
        first.acquire(0);
        try (IndexSession session = first.newSession()) {
            for (long k = 2; k < 400; k += 2) {
                session.put(k, k * 7);
            }
        }
        a.enabled(true);
        DexEngine.ReleaseReport report = first.release(0); // the first two write-backs fail, the retries write them
        a.enabled(false);
        assertEquals(2, a.injected());
        assertTrue(report.pagesWritten() > 0);
        assertFalse(first.holds(0));
        assertEquals(0, first.frameCounts()[3]);
        first.close();
        Map<Long, Long> stored = pool.stored();
        for (long k = 2; k < 400; k += 2) {
            assertEquals(k * 7, stored.get(k), "key " + k + " written back by the release");
        }
    }

    @Test
    void lookupsDoNotFailForAWriteBackOfAnotherPage() {
        Pool pool = new Pool(false, 2, true);
        FaultInjectingRemoteMemory faulty = pool.connect(0, FaultPlan.none().withRate(1).withKinds(FaultPlan.Kind.WRITE)
                .withApplyFirst(0));
        DexEngine engine = pool.engine(faulty, 16, RedoLogSettings.OFF); // a tiny cache: every miss needs a frame
        engine.acquire(0);
        engine.acquire(1);
        try (IndexSession session = engine.newSession()) {
            for (long k = 2; k <= 2 * LOADED; k += 2) {
                session.put(k, k); // dirty frames all over the cache
            }
            faulty.enabled(true); // no write goes through any more
            for (long k = 2; k <= 2 * LOADED; k += 6) {
                assertTrue(session.lookup(k), "a lookup needs no write of its own: it works uncached");
                assertEquals(k, session.value());
            }
            faulty.enabled(false);
        }
        assertTrue(faulty.injected() > 0, "evictions met failing write-backs");
        assertEquals(0, engine.lockedFrames());
        engine.close();
        Map<Long, Long> stored = pool.stored();
        for (long k = 2; k <= 2 * LOADED; k += 2) {
            assertEquals(k, stored.get(k), "key " + k);
        }
    }

    @Test
    void aScanAcrossPartitionsWaitsForTheLogsOfEveryPartitionItRead() {
        Pool pool = new Pool(false, 4, true);
        RedoLogSettings log = new RedoLogSettings(true, 16 * CHUNK, TimeUnit.MILLISECONDS.toNanos(300));
        DexEngine engine = pool.engine(pool.connect(0, FaultPlan.none()), 1024, log);
        for (int p = 0; p < 4; p++) {
            engine.acquire(p);
        }
        // The unlogged write lies in the middle one of the three partitions the scan reads (partitions 1, 2, 3).
        long start = pool.table.upperInclusive(0) + 2 - pool.table.upperInclusive(0) % 2;
        long inMiddle = pool.table.upperInclusive(1) + 2 - pool.table.upperInclusive(1) % 2;
        assertEquals(2, pool.table.partitionOf(inMiddle));
        try (IndexSession writer = engine.newSession(); IndexSession reader = engine.newSession()) {
            writer.beginBatch();
            writer.put(inMiddle, 4242); // in the cache, its record not in the log yet
            int span = (int) ((pool.table.upperInclusive(2) - start) / 2 + 4);
            long[] keys = new long[span];
            long[] values = new long[span];
            reader.beginBatch();
            IllegalStateException notDurable = assertThrows(IllegalStateException.class, () -> {
                reader.scan(start, span, keys, values);
                reader.commit();
            }, "the scan's answer may not go out before the write it read in partition 2 is durable");
            assertTrue(notDurable.getMessage().contains("partition 2"), notDurable.getMessage());
            writer.commit();
            reader.beginBatch();
            int n = reader.scan(start, span, keys, values);
            reader.commit(); // durable now
            assertTrue(pool.table.partitionOf(keys[n - 1]) == 3, "the scan ends in partition 3");
            boolean seen = false;
            for (int i = 0; i < n; i++) {
                seen |= keys[i] == inMiddle && values[i] == 4242;
            }
            assertTrue(seen, "the scan reads the write in partition 2");
        }
    }

    private static long logAddress(RemoteMemory memory, int partition) {
        long directory = memory.readLong(RedoLogDescriptor.DIRECTORY_POINTER_ADDRESS);
        return memory.readLong(directory + (long) partition * Long.BYTES);
    }

    private static long ownerClient(RemoteMemory memory, int partition) {
        UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
        memory.read(logAddress(memory, partition) + RedoLogDescriptor.OWNER_CLIENT_OFFSET, word, 0, 8);
        return word.getLong(0, ByteOrder.LITTLE_ENDIAN);
    }
}
