package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.OwnershipTable;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.SuperblockDescriptor;
import dev.dex.rdma.ForwardingRemoteMemory;

/**
 * Online merges of two neighbouring partitions (PartitionMerges, docs/partition-splits.md): under writes, checked
 * against a model, with the merged partition moving to another engine afterwards; the owner killed at every writing
 * verb of a merge; an operation that waited on the partition merged away; a commit whose answer is lost; the id taken
 * again by a later split; refusals. The fixture's tree holds keys 2, 4, ..., 2n with value key + 1.
 */
class PartitionMergeTest {
    private static final DexEngineSettings CONFIG =
            DexEngineSettings.dex(3_000L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);

    @Test
    void aMergeUnderWritesLosesNothingRefusesNoOperationAndTheMergedPartitionMovesOn() throws Exception {
        try (DexFixture fixture = new DexFixture(2, 2, 20_000, 4, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            List<DexEngine> engines = fixture.open(2, CONFIG, 1); // offloading too; a holds 0 and 2, b 1 and 3
            DexEngine a = engines.get(0);
            DexEngine b = engines.get(1);
            b.release(1);
            a.acquire(1);
            PartitionTable before = a.partitions();
            long high = before.upperInclusive(1);
            int threads = 4;
            Map<Long, Long> model = new ConcurrentHashMap<>();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicBoolean merged = new AtomicBoolean();
            AtomicLong writesAfterMerge = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> writers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                writers.add(new Thread(() -> {
                    SplittableRandom random = new SplittableRandom(thread);
                    try (DexSession session = a.newSession()) {
                        for (long n = 1; !stop.get(); n++) {
                            // Each thread its own keys, over both partitions; a third are odd keys, new to the tree.
                            long index = random.nextLong(1, high / (2L * threads));
                            long key = 2 * (threads * index + thread) + (random.nextInt(3) == 0 ? 1 : 0);
                            session.put(key, n); // never refused: an operation that waited on 1 enters 0 after the merge
                            model.put(key, n);
                            if (merged.get()) {
                                writesAfterMerge.incrementAndGet();
                            }
                        }
                    } catch (Throwable t2) {
                        failure.compareAndSet(null, t2);
                    }
                }, "writer-" + t));
            }
            writers.forEach(Thread::start);
            Thread.sleep(200);
            DexEngine.MergeReport report = a.mergePartitions(0, 1);
            merged.set(true);
            Thread.sleep(300);
            stop.set(true);
            for (Thread writer : writers) {
                writer.join(TimeUnit.SECONDS.toMillis(30));
                assertFalse(writer.isAlive(), writer.getName() + " is stuck");
            }
            if (failure.get() != null) {
                throw new AssertionError("a writer failed (the merge must refuse nothing)", failure.get());
            }
            assertTrue(writesAfterMerge.get() > 100, "writes went on after the merge: " + writesAfterMerge.get());
            assertEquals(1, report.removed());
            assertEquals(4, report.version(), "the table's second version");
            assertTrue(report.framesDropped() > 0, "both partitions' frames are dropped: " + report);
            PartitionTable after = before.merge(0, 1);
            assertEquals(new PartitionTable.Versioned(after, 4), PartitionTable.loadVersioned(fixture.admin));
            assertEquals(after, a.partitions(), "the merging engine serves the table it committed");
            assertTrue(a.holds(0) && !a.holds(1), "1 is merged away");
            CacheValidator.validate(a);

            // The merged partition moves: its new owner replays 0's log, which holds 1's keys from after the merge.
            a.release(0);
            b.acquire(0);
            assertEquals(after, b.partitions(), "the acquiring engine read the merged table");
            try (DexSession session = b.newSession()) {
                for (Map.Entry<Long, Long> e : model.entrySet()) {
                    assertTrue(session.lookup(e.getKey()), "key " + e.getKey() + " is there");
                    assertEquals(e.getValue(), session.value(), "key " + e.getKey() + " has its last acknowledged value");
                }
            }
            CacheValidator.validate(b);
            TreeMap<Long, Long> expected = fixture.initialModel();
            expected.putAll(model);
            assertEquals(expected, fixture.validateFlushAndRead());
        }
    }

    @Test
    void aCrashAtAnyWritingVerbOfAMergeLosesNoAcknowledgedWrite() {
        int crashed = TableChangeCrashes.crashAtEveryWritingVerb(CONFIG, table -> table.upperInclusive(1),
                () -> new TableChangeCrashes.Change() {
                    @Override
                    public PartitionTable plan(DexEngine engine) {
                        return engine.partitions().merge(0, 1);
                    }

                    @Override
                    public void run(DexEngine engine) {
                        engine.mergePartitions(0, 1);
                    }
                });
        assertTrue(crashed >= 5, "the merge's writing verbs were each a crash point: " + crashed);
    }

    @Test
    void theMergedPartitionsLogReplaysTheOtherPartitionsKeysWrittenAfterTheMerge() {
        try (DexFixture fixture = new DexFixture(2, 2, 4_000, 4, true, 0)) {
            CrashRecoveryTest.DyingMemory[] dying = new CrashRecoveryTest.DyingMemory[1];
            DexEngine a = TableChangeCrashes.openDying(fixture, CONFIG, dying);
            PartitionTable before = a.partitions();
            a.mergePartitions(0, 1);
            TreeMap<Long, Long> model = new TreeMap<>();
            try (DexSession session = a.newSession()) {
                for (long key = before.upperInclusive(0) + 1; key <= before.upperInclusive(1); key += 3) {
                    session.put(key, key * 7); // keys of the partition merged away, now 0's: in 0's log only
                    model.put(key, key * 7);
                }
            }
            dying[0].kill(); // nothing written back since the merge
            DexEngine successor = fixture.openEngine(CONFIG, null);
            successor.instanceGone(a.instanceId());
            assertEquals(before.merge(0, 1), PartitionTable.load(fixture.admin));
            DexEngine.AcquireReport report = successor.acquireReport(0);
            assertTrue(report.replayed() >= model.size(), "0's log held the writes of 1's keys: " + report);
            try (DexSession session = successor.newSession()) {
                for (Map.Entry<Long, Long> e : model.entrySet()) {
                    assertTrue(session.lookup(e.getKey()), "key " + e.getKey());
                    assertEquals(e.getValue(), session.value(), "key " + e.getKey());
                }
            }
            CacheValidator.validate(successor);
        }
    }

    /** A connection on which the partition table's version word stops answering, after a compare-and-swap that lands. */
    private static final class SilentTable extends ForwardingRemoteMemory {
        volatile boolean silent;

        SilentTable(dev.dex.rdma.RemoteMemory delegate) {
            super(delegate);
        }

        @Override
        public long compareAndSwap(long address, long expected, long desired) {
            if (address == SuperblockDescriptor.TABLE_VERSION_ADDRESS && (desired & 1) == 0 && expected % 2 == 1 && !silent) {
                silent = true; // the commit: it lands, its answer does not come, nor any read of the table for a while
                super.compareAndSwap(address, expected, desired);
                throw new dev.dex.rdma.FabricException("no answer to the commit");
            }
            return super.compareAndSwap(address, expected, desired);
        }

        @Override
        public void read(long address, org.agrona.MutableDirectBuffer dst, int dstOffset, int length) {
            if (silent && address <= SuperblockDescriptor.TABLE_VERSION_ADDRESS && SuperblockDescriptor.TABLE_VERSION_ADDRESS < address + length) {
                throw new dev.dex.rdma.FabricException("no answer to a read of the table's version");
            }
            super.read(address, dst, dstOffset, length);
        }
    }

    @Test
    void aMergeWhoseOutcomeCannotBeLearnedGivesBothPartitionsUpToBeAcquiredFromTheStoredTable() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 4, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            SilentTable[] connection = new SilentTable[1];
            fixture.connectionWrapper = memory -> connection[0] = new SilentTable(memory);
            DexEngine a = fixture.open(1, CONFIG).get(0);
            PartitionTable before = a.partitions();
            long inRight = before.upperInclusive(0) + 2;
            IllegalStateException unknown = assertThrows(IllegalStateException.class, () -> a.mergePartitions(0, 1));
            assertTrue(unknown.getMessage().contains("may or may not have been committed"), unknown.getMessage());
            assertFalse(a.holds(0) || a.holds(1), "neither is served from either table: both given up");
            assertTrue(a.holds(2) && a.holds(3), "the others serve on");
            connection[0].silent = false;
            a.acquire(0); // from the stored table, in which the merge landed
            assertEquals(before.merge(0, 1), a.partitions());
            try (DexSession session = a.newSession()) {
                assertTrue(session.lookup(inRight));
                assertEquals(inRight + 1, session.value());
            }
            assertThrows(IllegalArgumentException.class, () -> a.acquire(1), "1 left the table");
        }
    }

    @Test
    void anOperationThatWaitedOnThePartitionMergedAwayIsServedByTheMergedOne() throws Exception {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            CountDownLatch locking = new CountDownLatch(1);
            CountDownLatch commit = new CountDownLatch(1);
            fixture.connectionWrapper = memory -> TableChangeCrashes.holdingTheCommit(memory, locking, commit);
            DexEngine a = fixture.open(1, CONFIG).get(0);
            long boundary = a.partitions().upperInclusive(0);
            long key = boundary + 2; // in partition 1
            try (DexSession waiting = a.newSession(); DexSession session = a.newSession()) {
                CompletableFuture<DexEngine.MergeReport> merge = CompletableFuture.supplyAsync(() -> a.mergePartitions(0, 1));
                assertTrue(locking.await(10, TimeUnit.SECONDS));
                CompletableFuture<Void> put = CompletableFuture.runAsync(() -> waiting.put(key, 99));
                Thread.sleep(100);
                assertFalse(put.isDone(), "the put waits while its partition is paused");
                commit.countDown();
                assertEquals(1, merge.get(10, TimeUnit.SECONDS).removed());
                put.get(10, TimeUnit.SECONDS); // served, not refused
                assertTrue(session.lookup(key));
                assertEquals(99, session.value(), "the waiting put landed in the merged partition");
                long[] keys = new long[100];
                long[] values = new long[100];
                assertEquals(100, session.scan(boundary - 100, 100, keys, values), "a scan crosses the old boundary");
            }
        }
    }

    @ParameterizedTest(name = "the commit landed: {0}")
    @ValueSource(booleans = {true, false})
    void aMergeWhoseCommitAnswerIsLostIsLearnedFromTheStoredTable(boolean landed) {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 2, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            PartitionSplitTest.Unanswered[] connection = new PartitionSplitTest.Unanswered[1];
            fixture.connectionWrapper = memory -> connection[0] = new PartitionSplitTest.Unanswered(memory);
            DexEngine a = fixture.open(1, CONFIG).get(0);
            PartitionTable before = a.partitions();
            long inRight = before.upperInclusive(0) + 2;
            connection[0].landed = landed;
            long version = SuperblockDescriptor.TABLE_VERSION_ADDRESS;
            boolean[] once = {false};
            connection[0].failing.set(address -> address == version && !once[0]
                    && (once[0] = PartitionTable.storedVersion(fixture.admin) % 2 == 1));
            if (landed) {
                DexEngine.MergeReport report = a.mergePartitions(0, 1);
                assertEquals(before.merge(0, 1), a.partitions(), "the merge counts: its commit landed");
                assertEquals(new PartitionTable.Versioned(a.partitions(), report.version()), PartitionTable.loadVersioned(fixture.admin));
                assertFalse(a.holds(1));
            } else {
                IllegalStateException failed = assertThrows(IllegalStateException.class, () -> a.mergePartitions(0, 1));
                assertTrue(failed.getMessage().contains("was not merged"), failed.getMessage());
                assertEquals(before, a.partitions());
                assertEquals(before, PartitionTable.load(fixture.admin), "the old table is still the one read");
                assertTrue(a.holds(0) && a.holds(1), "both still held");
            }
            assertTrue(once[0], "the commit's answer was lost");
            connection[0].failing.set(address -> false);
            try (DexSession session = a.newSession()) {
                assertTrue(session.lookup(inRight), "served either way");
                assertEquals(inRight + 1, session.value());
            }
            // Partition 0's ownership entry says the range the engine serves: a key of 1 under 0 is let through only after
            // a merge.
            String refusal = OwnershipTable.refusal(fixture.regions.get(0).region(), 0, 0, a.log(0).epoch(), inRight);
            assertEquals(!landed, refusal != null, "ownership of key " + inRight + " under partition 0: " + refusal);
        }
    }

    @Test
    void theIdMergedAwayIsTakenAgainByASplitWhoseOwnerStartsCleanWithoutTheOldFreeLeaves() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            DexEngine a = fixture.open(1, CONFIG.withLeafAdmission(0.5)).get(0);
            TreeMap<Long, Long> model = MergeTest.deleteShare(fixture, a, 0.9, 11);
            a.merge(1);
            assertTrue(a.merges.freeCount(1) > 20, "partition 1's leaf merges freed leaves: " + a.merges.freeCount(1));
            long leakedBefore = a.mergeCounts()[2];
            PartitionTable before = a.partitions();
            a.mergePartitions(0, 1);
            assertTrue(a.mergeCounts()[2] > leakedBefore, "1's free chains are cut, their leaves counted as leaked");
            long boundary = a.splitBoundary(0, before.upperInclusive(0));
            DexEngine.SplitReport split = a.split(0, boundary);
            assertEquals(1, split.added(), "the lowest free id: the one merged away");
            DexEngine b = fixture.openEngine(CONFIG, null);
            DexEngine.AcquireReport acquired = b.acquireReport(1);
            assertEquals(0, acquired.replayed(), "the id's old log has nothing to replay");
            try (DexSession session = b.newSession()) {
                for (long key = boundary + 1; key < a.partitions().upperInclusive(1); key += 2) {
                    assertTrue(session.insert(key, key + 1), "insert " + key);
                    model.put(key, key + 1);
                }
            }
            assertEquals(0, b.mergeCounts()[3], "no leaf of the id's old chains is inherited");
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void badMergesAreRefusedAndChangeNothing() {
        try (DexFixture fixture = new DexFixture(1, 2, 4_000, 4, true, 0)) {
            PartitionSplitTest.Unanswered[] connection = new PartitionSplitTest.Unanswered[1];
            fixture.connectionWrapper = memory -> connection[0] = new PartitionSplitTest.Unanswered(memory);
            DexEngine a = fixture.open(1, CONFIG.withLeafAdmission(0.0)).get(0);
            PartitionTable table = a.partitions();
            IllegalArgumentException apart = assertThrows(IllegalArgumentException.class, () -> a.mergePartitions(0, 2));
            assertTrue(apart.getMessage().contains("not the right neighbour"), apart.getMessage());
            assertThrows(IllegalArgumentException.class, () -> a.mergePartitions(1, 0), "the right one first");
            a.release(3);
            IllegalStateException notHeld = assertThrows(IllegalStateException.class, () -> a.mergePartitions(2, 3));
            assertTrue(notHeld.getMessage().contains("partition 3 is not held"), notHeld.getMessage());
            connection[0].failing.set(address -> true);
            long inRight = table.upperInclusive(0) + 2;
            try (DexSession session = a.newSession()) {
                assertThrows(RuntimeException.class, () -> session.put(inRight, 5), "a write-through whose answer is lost");
            }
            connection[0].failing.set(address -> false);
            IllegalStateException failedWrite = assertThrows(IllegalStateException.class, () -> a.mergePartitions(0, 1));
            assertTrue(failedWrite.getMessage().contains("a write of this compute node failed"), failedWrite.getMessage());
            assertEquals(new PartitionTable.Versioned(table, 2), PartitionTable.loadVersioned(fixture.admin));
            assertTrue(a.holds(0) && a.holds(1) && a.holds(2));
            try (DexSession session = a.newSession()) {
                assertTrue(session.lookup(4), "partition 0 serves on");
            }
        }
    }
}
