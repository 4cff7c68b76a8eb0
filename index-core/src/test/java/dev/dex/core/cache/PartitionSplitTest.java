package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/**
 * Online splits of a partition (PartitionSplits, docs/partition-splits.md): under writes, checked against a model, with
 * the new partition taken by another engine; the owner killed at every writing verb of a split; and what an operation
 * routed by the table before the split gets. The fixture's tree holds keys 2, 4, ..., 2n with value key + 1.
 */
class PartitionSplitTest {
    private static final DexEngineSettings CONFIG =
            DexEngineSettings.dex(3_000L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);

    /** A session on each engine, for one thread: a key goes to the engine that holds its partition now. */
    private record Sessions(DexSession a, DexSession b) {
    }

    /** Puts {@code key} through whichever engine serves it; waits while neither does (between a split and its acquire). */
    private static void put(Sessions sessions, long key, long value, AtomicLong servedByB) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                sessions.a().put(key, value);
                return;
            } catch (PartitionNotHeldException notOnA) {
                try {
                    sessions.b().put(key, value);
                    servedByB.incrementAndGet();
                    return;
                } catch (PartitionNotHeldException notOnB) {
                    assertTrue(System.nanoTime() < deadline, "key " + key + " was served by neither engine for 10 s");
                    Thread.onSpinWait();
                }
            }
        }
    }

    @Test
    void aSplitUnderWritesLosesNothingAndTheNewPartitionIsServedByAnotherEngine() throws Exception {
        try (DexFixture fixture = new DexFixture(2, 2, 20_000, 4, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            List<DexEngine> engines = fixture.open(2, CONFIG, 1); // offloading too
            DexEngine a = engines.get(0);
            DexEngine b = engines.get(1);
            PartitionTable before = a.partitions();
            long high = before.upperInclusive(0);
            int threads = 4;
            Map<Long, Long> model = new ConcurrentHashMap<>();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong servedByB = new AtomicLong();
            AtomicLong writesAfterSplit = new AtomicLong();
            AtomicBoolean split = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> writers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                writers.add(new Thread(() -> {
                    SplittableRandom random = new SplittableRandom(thread);
                    try (DexSession sa = a.newSession(); DexSession sb = b.newSession()) {
                        Sessions sessions = new Sessions(sa, sb);
                        for (long n = 1; !stop.get(); n++) {
                            // Each thread its own keys (key / 2 = thread mod threads), so the model is each key's last put;
                            // a third are odd keys, new to the tree: their inserts split leaves on both sides of the boundary.
                            // After the split only the odd-numbered half of them: the last values of the other half were
                            // written before it and must survive it (its write-back).
                            long index = random.nextLong(1, high / (2L * threads));
                            index = split.get() ? index | 1 : index;
                            long key = 2 * (threads * index + thread) + (random.nextInt(3) == 0 ? 1 : 0);
                            put(sessions, key, n, servedByB);
                            model.put(key, n);
                            if (split.get()) {
                                writesAfterSplit.incrementAndGet();
                            }
                        }
                    } catch (Throwable t2) {
                        failure.compareAndSet(null, t2);
                    }
                }, "writer-" + t));
            }
            writers.forEach(Thread::start);
            Thread.sleep(200);
            long boundary = a.splitBoundary(0, high / 2);
            assertTrue(boundary > before.lowerExclusive(0) && boundary < high, "a boundary inside partition 0: " + boundary);
            DexEngine.SplitReport report = a.split(0, boundary);
            split.set(true);
            assertEquals(4, report.added(), "the lowest free id");
            assertEquals(4, report.version(), "the table's second version");
            assertTrue(report.framesDropped() > 0, "partition 0's frames are dropped: " + report);
            Thread.sleep(100);
            b.acquire(report.added());
            Thread.sleep(300);
            stop.set(true);
            for (Thread writer : writers) {
                writer.join(TimeUnit.SECONDS.toMillis(30));
                assertFalse(writer.isAlive(), writer.getName() + " is stuck");
            }
            if (failure.get() != null) {
                throw new AssertionError("a writer failed", failure.get());
            }
            assertTrue(servedByB.get() > 0, "the new partition's keys were written on b after it acquired it");
            assertTrue(writesAfterSplit.get() > 100, "writes went on after the split: " + writesAfterSplit.get());

            PartitionTable after = PartitionTable.load(fixture.admin);
            assertEquals(after, a.partitions(), "the splitting engine serves the table it committed");
            assertEquals(after, b.partitions(), "the acquiring engine read it");
            assertEquals(boundary, after.upperInclusive(0));
            assertEquals(boundary, after.lowerExclusive(4));
            assertEquals(high, after.upperInclusive(4));
            assertArrayEquals(new int[] {0, 4, 1, 2, 3}, after.ids());
            assertTrue(a.holds(0) && !a.holds(4) && b.holds(4));

            CacheValidator.validate(a);
            CacheValidator.validate(b);
            try (DexSession sa = a.newSession(); DexSession sb = b.newSession()) {
                for (Map.Entry<Long, Long> e : model.entrySet()) {
                    DexSession s = e.getKey() <= boundary ? sa : sb;
                    assertTrue(s.lookup(e.getKey()), "key " + e.getKey() + " is there");
                    assertEquals(e.getValue(), s.value(), "key " + e.getKey() + " has its last acknowledged value");
                }
            }
            for (DexEngine engine : engines) {
                for (int id : after.ids()) {
                    engine.release(id);
                }
            }
            TreeMap<Long, Long> remote = new TreeMap<>();
            TreeValidator.validate(fixture.admin, (k, v) -> remote.put(fixture.wide.firstWord(k), v));
            long inserted = model.keySet().stream().filter(k -> k % 2 == 1).count();
            assertTrue(inserted > 100, "new keys were inserted: " + inserted);
            assertEquals(fixture.loaded + inserted, remote.size(), "the loaded keys and the inserted ones, no other");
            for (Map.Entry<Long, Long> e : model.entrySet()) {
                assertEquals(e.getValue(), remote.get(e.getKey()), "remote memory holds key " + e.getKey() + "'s last value");
            }
        }
    }

    @Test
    void aCrashAtAnyWritingVerbOfASplitLosesNoAcknowledgedWrite() {
        int crashed = TableChangeCrashes.crashAtEveryWritingVerb(CONFIG, table -> table.upperInclusive(0),
                () -> new TableChangeCrashes.Change() {
                    long boundary;

                    @Override
                    public PartitionTable plan(DexEngine engine) {
                        boundary = engine.splitBoundary(0, engine.partitions().upperInclusive(0) / 2);
                        return engine.partitions().split(0, boundary, 4);
                    }

                    @Override
                    public void run(DexEngine engine) {
                        engine.split(0, boundary);
                    }
                });
        assertTrue(crashed >= 5, "the split's writing verbs were each a crash point: " + crashed);
    }

    @Test
    void anOperationOnAKeyTheSplitGaveAwayIsRefusedForTheNewPartitionAndAScanStopsAtTheBoundary() throws Exception {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            java.util.concurrent.CountDownLatch locking = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch commit = new java.util.concurrent.CountDownLatch(1);
            fixture.connectionWrapper = memory -> TableChangeCrashes.holdingTheCommit(memory, locking, commit);
            DexEngine a = fixture.open(1, CONFIG).get(0);
            long high = a.partitions().upperInclusive(0);
            long boundary = a.splitBoundary(0, high / 2);
            try (DexSession session = a.newSession(); DexSession waiting = a.newSession()) {
                assertTrue(session.lookup(boundary + 2), "served before the split");
                java.util.concurrent.CompletableFuture<DexEngine.SplitReport> split =
                        java.util.concurrent.CompletableFuture.supplyAsync(() -> a.split(0, boundary));
                assertTrue(locking.await(10, TimeUnit.SECONDS));
                // A put routed by the old table: it waits for the paused partition, then finds the key given away.
                java.util.concurrent.CompletableFuture<Void> put =
                        java.util.concurrent.CompletableFuture.runAsync(() -> waiting.put(boundary + 2, 99));
                Thread.sleep(100);
                assertFalse(put.isDone(), "the put waits while its partition is paused");
                commit.countDown();
                DexEngine.SplitReport report = split.get(10, TimeUnit.SECONDS);
                java.util.concurrent.ExecutionException failed = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> put.get(10, TimeUnit.SECONDS));
                PartitionNotHeldException refused = (PartitionNotHeldException) failed.getCause();
                assertEquals(report.added(), refused.partition(), "refused for the partition that holds the key now");
                PartitionNotHeldException later = assertThrows(PartitionNotHeldException.class, () -> session.lookup(boundary + 2));
                assertEquals(report.added(), later.partition());
                assertTrue(session.lookup(boundary), "the boundary stays in the split partition");
                long[] keys = new long[100];
                long[] values = new long[100];
                long start = boundary - 20;
                int n = session.scan(start, 100, keys, values);
                long expected = java.util.stream.LongStream.rangeClosed(start, boundary).filter(k -> k % 2 == 0 && k >= 2).count();
                assertEquals(expected, n, "the scan returns the keys up to the boundary and stops");
                assertTrue(keys[n - 1] <= boundary && keys[n - 1] > boundary - 2, "its last key is the boundary's");
                a.acquire(report.added());
                assertEquals(100, session.scan(start, 100, keys, values), "and crosses it once both are held");
                assertTrue(session.lookup(boundary + 2));
                assertEquals(boundary + 3, session.value(), "the refused put changed nothing");
            }
        }
    }

    @Test
    void aBatchWhoseRecordsReachTheLogAfterTheSplitLosesNothingInATakeover() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            CrashRecoveryTest.DyingMemory[] dying = new CrashRecoveryTest.DyingMemory[1];
            DexEngine a = TableChangeCrashes.openDying(fixture, CONFIG, dying);
            long high = a.partitions().upperInclusive(0);
            long boundary = a.splitBoundary(0, high / 2);
            long givenAway = boundary + 2;
            long kept = boundary - 2;
            try (DexSession session = a.newSession()) {
                session.beginBatch();
                session.put(givenAway, 5);
                session.put(kept, 6);
                a.split(0, boundary); // the batch's operations left the partition; its records are not in the log yet
                session.commit();
            }
            dying[0].kill();
            DexEngine successor = fixture.openEngine(CONFIG, null);
            successor.instanceGone(a.instanceId());
            for (int id : PartitionTable.load(fixture.admin).ids()) {
                successor.acquire(id); // the records lie below the split's checkpoint: nothing of the new partition replays
            }
            try (DexSession session = successor.newSession()) {
                assertTrue(session.lookup(givenAway));
                assertEquals(5, session.value(), "written back by the split");
                assertTrue(session.lookup(kept));
                assertEquals(6, session.value());
            }
        }
    }

    @Test
    void theSplitPartitionStillReusesTheLeavesItsMergesFreedInTheHalfItGaveAway() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            DexEngine engine = fixture.open(1, CONFIG.withLeafAdmission(0.5)).get(0);
            TreeMap<Long, Long> model = MergeTest.deleteShare(fixture, engine, 0.9, 11);
            engine.merge(0);
            int freed = engine.merges.freeCount(0);
            assertTrue(freed > 20, "partition 0's merges freed leaves: " + freed);
            long high = engine.partitions().upperInclusive(0);
            // Low in the partition: most leaves it freed lie above the boundary, in the half it gives away.
            long boundary = engine.splitBoundary(0, high / 5);
            engine.split(0, boundary);
            try (DexSession session = engine.newSession()) {
                for (long key = 1; key < boundary; key += 2) {
                    assertTrue(session.insert(key, key + 1), "insert " + key);
                    model.put(key, key + 1);
                }
            }
            long reused = engine.merges.counts()[1];
            assertTrue(reused > 20, "the splits below the boundary reused the free leaves, wherever they were freed: "
                    + reused + " of " + freed);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /** A connection whose writing verbs fail while {@code failing}; {@code landed}: the failed verb took effect. */
    static final class Unanswered extends ForwardingRemoteMemory {
        final java.util.concurrent.atomic.AtomicReference<java.util.function.LongPredicate> failing =
                new java.util.concurrent.atomic.AtomicReference<>(address -> false);
        volatile boolean landed;

        Unanswered(RemoteMemory delegate) {
            super(delegate);
        }

        @Override
        public void write(long address, org.agrona.DirectBuffer src, int offset, int length) {
            if (failing.get().test(address)) {
                if (landed) {
                    super.write(address, src, offset, length);
                }
                throw new dev.dex.rdma.FabricException("no answer to a write at " + address);
            }
            super.write(address, src, offset, length);
        }

        @Override
        public long compareAndSwap(long address, long expected, long desired) {
            if (failing.get().test(address)) {
                if (landed) {
                    super.compareAndSwap(address, expected, desired);
                }
                throw new dev.dex.rdma.FabricException("no answer to a compare-and-swap at " + address);
            }
            return super.compareAndSwap(address, expected, desired);
        }
    }

    @org.junit.jupiter.params.ParameterizedTest(name = "the commit landed: {0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
    void aCommitWhoseAnswerIsLostIsLearnedFromTheStoredTable(boolean landed) {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            Unanswered[] connection = new Unanswered[1];
            fixture.connectionWrapper = memory -> connection[0] = new Unanswered(memory);
            DexEngine a = fixture.open(1, CONFIG).get(0);
            PartitionTable before = a.partitions();
            long high = before.upperInclusive(0);
            long boundary = a.splitBoundary(0, high / 2);
            connection[0].landed = landed;
            // The commit's compare-and-swap of the version from odd to even: the one whose answer is lost.
            long version = dev.dex.core.tree.SuperblockDescriptor.TABLE_VERSION_ADDRESS;
            boolean[] once = {false};
            connection[0].failing.set(address -> address == version && !once[0] && (once[0] = PartitionTable.storedVersion(fixture.admin) % 2 == 1));
            if (landed) {
                DexEngine.SplitReport report = a.split(0, boundary);
                assertEquals(boundary, a.partitions().upperInclusive(0), "the split counts: its commit landed");
                assertEquals(new PartitionTable.Versioned(a.partitions(), report.version()), PartitionTable.loadVersioned(fixture.admin));
            } else {
                IllegalStateException failed = assertThrows(IllegalStateException.class, () -> a.split(0, boundary));
                assertTrue(failed.getMessage().contains("was not split"), failed.getMessage());
                assertEquals(before, a.partitions());
                assertEquals(before, PartitionTable.load(fixture.admin), "the old table is still the one read");
            }
            assertTrue(once[0], "the commit's answer was lost");
            connection[0].failing.set(address -> false);
            try (DexSession session = a.newSession()) {
                if (landed) {
                    assertThrows(PartitionNotHeldException.class, () -> session.lookup(boundary + 2), "given to the new partition");
                } else {
                    assertTrue(session.lookup(boundary + 2), "still served: no split");
                }
                assertTrue(session.lookup(boundary), "the partition serves on");
            }
            // The ownership entry says the range the engine serves: an offload of a key above the boundary is refused after
            // a split, and let through without one.
            String refusal = dev.dex.core.partition.OwnershipTable.refusal(fixture.regions.get(0).region(), 0, 0,
                    a.log(0).epoch(), boundary + 2);
            assertEquals(landed, refusal != null, "ownership of key " + (boundary + 2) + ": " + refusal);
        }
    }

    @Test
    void aCommitWhoseAnswerIsLostUnderAnotherNodesChangeCountsAsLanded() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            DexEngine[] other = new DexEngine[1];
            AtomicBoolean armed = new AtomicBoolean();
            // Engine a's commit lands, and before its answer (lost) comes, engine b splits partition 1 on top of it.
            fixture.connectionWrapper = memory -> other[0] != null ? memory : new ForwardingRemoteMemory(memory) {
                @Override
                public long compareAndSwap(long address, long expected, long desired) {
                    if (address == dev.dex.core.tree.SuperblockDescriptor.TABLE_VERSION_ADDRESS && expected % 2 == 1
                            && armed.compareAndSet(true, false)) {
                        super.compareAndSwap(address, expected, desired);
                        DexEngine b = other[0];
                        b.split(1, b.splitBoundary(1, b.partitions().upperInclusive(1) - 100));
                        throw new dev.dex.rdma.FabricException("no answer to the commit");
                    }
                    return super.compareAndSwap(address, expected, desired);
                }
            };
            DexEngine a = fixture.openEngine(CONFIG, null);
            other[0] = fixture.openEngine(CONFIG, null);
            a.acquire(0);
            other[0].acquire(1);
            long high = a.partitions().upperInclusive(0);
            long boundary = a.splitBoundary(0, high / 2);
            armed.set(true);
            DexEngine.SplitReport report = a.split(0, boundary);
            PartitionTable stored = PartitionTable.load(fixture.admin);
            assertEquals(4, stored.count(), "both splits are stored: " + stored);
            assertEquals(6, report.version(), "the split counts, in the table with the other node's split on top");
            assertEquals(stored, a.partitions(), "and the splitting engine serves that table");
            assertEquals(boundary, stored.upperInclusive(0));
            try (DexSession session = a.newSession()) {
                assertTrue(session.lookup(boundary));
                assertThrows(PartitionNotHeldException.class, () -> session.lookup(boundary + 2), "given to the new partition");
            }
        }
    }

    @Test
    void aSplitAfterAFailedWriteIsRefusedUntilThePartitionIsAcquiredAgain() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            Unanswered[] connection = new Unanswered[1];
            fixture.connectionWrapper = memory -> connection[0] = new Unanswered(memory);
            DexEngine a = fixture.open(1, CONFIG.withLeafAdmission(0.0)).get(0);
            long high = a.partitions().upperInclusive(0);
            connection[0].failing.set(address -> true);
            try (DexSession session = a.newSession()) {
                assertThrows(RuntimeException.class, () -> session.put(4, 5), "a write-through whose answer is lost");
            }
            connection[0].failing.set(address -> false);
            IllegalStateException refused = assertThrows(IllegalStateException.class, () -> a.split(0, a.splitBoundary(0, high / 2)));
            assertTrue(refused.getMessage().contains("a write of this compute node failed"), refused.getMessage());
            assertEquals(2, PartitionTable.loadVersioned(fixture.admin).version(), "no table committed");
            a.release(0);
            a.acquire(0);
            assertEquals(4, a.split(0, a.splitBoundary(0, high / 2)).version(), "acquired again, it splits");
        }
    }

    @Test
    void aSplitOnChunksWithoutRoomForASecondTableIsRefusedAndTheOwnershipTablesStay() {
        try (dev.dex.rdma.local.LocalFabric fabric = new dev.dex.rdma.local.LocalFabric()) {
            fabric.export(0, 16L << 20, 4096);
            RemoteMemory memory = fabric.connect(0);
            long[] keys = new long[2_000];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = 2L * i + 2;
            }
            dev.dex.core.tree.BulkLoader.formatAndLoad(memory, new dev.dex.core.tree.TreeSettings(2, 0.7),
                    dev.dex.core.tree.SortedEntries.of(keys, keys), n -> { });
            PartitionTable table = dev.dex.core.partition.Partitioning.fromLeafFences(memory, 2);
            PartitionTable.store(memory, table);
            DexEngine a = DexEngine.open(fabric.connect(0), CONFIG, null, RedoLogSettings.OFF);
            a.acquire(0);
            a.acquire(1);
            long ownership = memory.readLong(dev.dex.rdma.GlobalAddress.of(0, dev.dex.core.partition.OwnershipTable.TABLE_POINTER_OFFSET));
            long entries = memory.readLong(ownership + dev.dex.core.partition.OwnershipTable.ENTRIES_OFFSET);
            IllegalStateException refused = assertThrows(IllegalStateException.class,
                    () -> a.split(0, a.splitBoundary(0, table.upperInclusive(0) / 2)));
            assertTrue(refused.getMessage().contains("cannot change"), refused.getMessage());
            assertEquals(ownership, memory.readLong(dev.dex.rdma.GlobalAddress.of(0, dev.dex.core.partition.OwnershipTable.TABLE_POINTER_OFFSET)),
                    "the ownership table was not replaced");
            assertEquals(2, entries, "sized for the table's partitions where it cannot change");
            try (DexSession session = a.newSession()) {
                assertTrue(session.lookup(4));
            }
            a.close();
        }
    }

    @Test
    void aTakeoverThatMeetsASplitOfItsPartitionServesTheSplitRange() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            List<DexEngine> engines = fixture.open(1, CONFIG);
            DexEngine a = engines.get(0);
            long high = a.partitions().upperInclusive(0);
            long boundary = a.splitBoundary(0, high / 2);
            AtomicBoolean armed = new AtomicBoolean();
            AtomicReference<DexEngine.SplitReport> split = new AtomicReference<>();
            // A later engine reads the table, then starts to take partition 0 over while A still holds it; A's split commits
            // after the later engine checked the version, at its first compare-and-swap (its log takeover).
            DexEngine late = DexEngine.open(new ForwardingRemoteMemory(fixture.fabric.connect(0)) {
                @Override
                public long compareAndSwap(long address, long expected, long desired) {
                    if (armed.compareAndSet(true, false)) {
                        split.set(a.split(0, boundary));
                    }
                    return super.compareAndSwap(address, expected, desired);
                }
            }, CONFIG, null, RedoLogSettings.ON);
            fixture.engines.add(late);
            armed.set(true);
            late.acquire(0);
            assertTrue(split.get() != null, "the split ran inside the takeover");
            assertEquals(boundary, late.partitions().upperInclusive(0), "the takeover serves the range the stored table has");
            try (DexSession session = late.newSession()) {
                assertTrue(session.lookup(boundary));
                PartitionNotHeldException refused = assertThrows(PartitionNotHeldException.class, () -> session.lookup(boundary + 2));
                assertEquals(split.get().added(), refused.partition());
            }
            String refusal = dev.dex.core.partition.OwnershipTable.refusal(fixture.regions.get(0).region(), 0, 0,
                    late.log(0).epoch(), boundary + 2);
            assertTrue(refusal != null && refusal.contains("outside partition 0"), "registered narrowed: " + refusal);
        }
    }

    @Test
    void badSplitsAreRefusedAndChangeNothing() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            DexEngine a = fixture.open(1, CONFIG).get(0);
            PartitionTable table = a.partitions();
            long high = table.upperInclusive(0);
            IllegalArgumentException outside = assertThrows(IllegalArgumentException.class, () -> a.split(0, high + 10));
            assertTrue(outside.getMessage().contains("not inside partition 0"), outside.getMessage());
            a.release(1);
            IllegalStateException notHeld = assertThrows(IllegalStateException.class, () -> a.split(1, high + 10));
            assertTrue(notHeld.getMessage().contains("not held by this compute node"), notHeld.getMessage());
            assertEquals(new PartitionTable.Versioned(table, 2), PartitionTable.loadVersioned(fixture.admin));
        }
    }
}
