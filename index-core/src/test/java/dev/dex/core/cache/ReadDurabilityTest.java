package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.agrona.DirectBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * A batch that read a write of another batch is answered only once that write is durable: otherwise a client
 * could be shown a value that a crash of the compute node then takes away.
 */
class ReadDurabilityTest {
    /**
     * Holds every remote write of 40 bytes (one log record) while {@code hold}, of thread {@code only} if set, until
     * released.
     */
    static final class HeldLog extends ForwardingRemoteMemory {
        final CountDownLatch release = new CountDownLatch(1);
        final CountDownLatch holding = new CountDownLatch(1);
        volatile boolean hold;
        volatile Thread only;

        HeldLog(RemoteMemory delegate) {
            super(delegate);
        }

        @Override
        public void write(long address, DirectBuffer src, int srcOffset, int length) {
            Thread holds = only;
            if (hold && length == dev.dex.core.log.RedoLogDescriptor.RECORD_LENGTH && (holds == null || holds == Thread.currentThread())) {
                holding.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            super.write(address, src, srcOffset, length);
        }
    }

    /** Formats a tree of one partition on {@code fabric}'s one memory server; returns a log-holding connection to it. */
    private static HeldLog onePartition(LocalFabric fabric) {
        fabric.export(0, 16L << 20, 64 << 10);
        RemoteMemory admin = fabric.connect(0);
        Superblock.format(admin, TreeSettings.defaults());
        PartitionTable.store(admin, PartitionTable.equalWidth(1, 0, 1_000));
        return new HeldLog(fabric.connect(0));
    }

    /** An engine on {@code memory}, every leaf admitted, holding the partition. */
    private static DexEngine holding(RemoteMemory memory) {
        DexEngine engine = DexEngine.open(memory, DexEngineSettings.withCache("no-offload", 1 << 20).withLeafAdmission(1.0), null,
                RedoLogSettings.ON);
        engine.acquire(0);
        return engine;
    }

    @Test
    void aBatchThatReadAWriteNotYetInTheLogWaitsForIt() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            HeldLog memory = onePartition(fabric);
            DexEngine engine = holding(memory);
            DexSession writer = engine.newSession();
            DexSession reader = engine.newSession();
            assertFalse(reader.lookup(7)); // the root leaf is cached from here on
            memory.hold = true;
            CompletableFuture<Boolean> write = CompletableFuture.supplyAsync(() -> writer.put(7, 70));
            assertTrue(memory.holding.await(5, TimeUnit.SECONDS), "the writer's record is on its way to the log");

            reader.beginBatch();
            assertTrue(reader.lookup(7), "the write is in the cache, visible");
            assertEquals(70, reader.value());
            CompletableFuture<Void> answered = CompletableFuture.runAsync(reader::commit);
            Thread.sleep(200);
            assertFalse(answered.isDone(), "the read is not answered while what it saw is not durable");
            assertFalse(write.isDone(), "nor is the write");
            memory.release.countDown();
            answered.get(5, TimeUnit.SECONDS);
            assertFalse(write.get(5, TimeUnit.SECONDS), "the put added the key: it was not there");
            assertTrue(engine.log(0).durableLsn() >= 1);
        }
    }

    /**
     * A write that changes nothing answers from what the leaf holds, as a read does: an insert of a key another batch
     * just put is refused "already present", a delete or an update of a key another batch just deleted finds nothing.
     * If that other write is not yet in the log, a crash could take it away after the answer, so the batch's commit
     * waits for it as for a read (it did not, until 2026-11-29).
     */
    @org.junit.jupiter.params.ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"insert after a put", "delete after a delete", "update after a delete"})
    void aBatchWhoseWriteChangedNothingBecauseOfAWriteNotYetInTheLogWaitsForIt(String what) throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            HeldLog memory = onePartition(fabric);
            DexEngine engine = holding(memory);
            DexSession writer = engine.newSession();
            DexSession other = engine.newSession();
            boolean insert = what.startsWith("insert");
            if (!insert) {
                writer.put(7, 70); // committed: the key is there, durably
            }
            memory.hold = true;
            CompletableFuture<Boolean> write = CompletableFuture.supplyAsync(() -> insert ? writer.put(7, 70) : writer.delete(7));
            assertTrue(memory.holding.await(5, TimeUnit.SECONDS), "the writer's record is on its way to the log");

            other.beginBatch();
            boolean changed = insert ? other.insert(7, 71) : what.startsWith("delete") ? other.delete(7) : other.update(7, 71);
            assertFalse(changed, what + ": the other write is visible, so this one changes nothing");
            CompletableFuture<Void> answered = CompletableFuture.runAsync(other::commit);
            Thread.sleep(200);
            assertFalse(answered.isDone(), what + ": not answered while the write it rests on is not durable");
            memory.release.countDown();
            answered.get(5, TimeUnit.SECONDS);
            write.get(5, TimeUnit.SECONDS);
        }
    }

    /**
     * The same for an offloaded write: the memory node answers "already present" from a put another batch made there
     * and has not committed yet (its record waits in that batch, and its operation's exclusion ended with it). The
     * insert's batch is answered only once that put's record is in the log.
     */
    @Test
    void anOffloadedInsertRefusedBecauseOfAnotherBatchsPutWaitsForThatPutsCommit() throws Exception {
        try (DexFixture fixture = new DexFixture(2, 2, 20_000, 4, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            java.util.concurrent.atomic.AtomicReference<HeldLog> held = new java.util.concurrent.atomic.AtomicReference<>();
            fixture.connectionWrapper = memory -> {
                HeldLog wrapped = new HeldLog(memory);
                held.set(wrapped);
                return wrapped;
            };
            DexEngineSettings config = DexEngineSettings.withCache("offload-only", 6L * FrameHeaderDescriptor.FRAME_LENGTH)
                    .withLeafAdmission(0.0);
            DexEngine engine = fixture.open(1, config, 1).get(0);
            HeldLog memory = held.get();
            long key = 1_000; // loaded: every even key
            DexSession writer = engine.newSession();
            DexSession other = engine.newSession();
            long offloads = engine.stats().offloads();
            writer.beginBatch();
            writer.put(key, 4_242);
            other.beginBatch();
            assertFalse(other.insert(key, 4_343), "the put is applied at the memory node");
            assertEquals(offloads + 2, engine.stats().offloads(), "both writes went to the memory node: " + engine.stats());
            memory.hold = true;
            CompletableFuture<Void> written = CompletableFuture.runAsync(writer::commit);
            assertTrue(memory.holding.await(5, TimeUnit.SECONDS), "the put's record is on its way to the log");
            CompletableFuture<Void> answered = CompletableFuture.runAsync(other::commit);
            Thread.sleep(200);
            assertFalse(answered.isDone(), "the insert is not answered while the put it was refused for is not durable");
            memory.release.countDown();
            written.get(5, TimeUnit.SECONDS);
            answered.get(5, TimeUnit.SECONDS);
        }
    }

    /**
     * A batch that wrote in one partition and then scanned into the next used to wait, in the middle of the scan, for the
     * first partition's log to hold every LSN taken there: its own record among them, which only its commit writes. The
     * batch hung, and so did two batches waiting for each other's records. The reads now wait at the commit, after the
     * batch's own records are written.
     */
    @Test
    void aBatchThatWroteAndThenScannedIntoAnotherPartitionDoesNotWaitForItself() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 16L << 20, 64 << 10);
            RemoteMemory admin = fabric.connect(0);
            Superblock.format(admin, TreeSettings.defaults());
            PartitionTable.store(admin, PartitionTable.equalWidth(2, 0, 1_000));
            DexEngine engine = DexEngine.open(fabric.connect(0), DexEngineSettings.withCache("no-offload", 1 << 20), null,
                    RedoLogSettings.ON);
            engine.acquire(0);
            engine.acquire(1);
            DexSession loader = engine.newSession();
            loader.put(800, 8);
            DexSession[] sessions = {engine.newSession(), engine.newSession()};
            java.util.concurrent.CyclicBarrier bothWrote = new java.util.concurrent.CyclicBarrier(sessions.length);
            java.util.List<CompletableFuture<Integer>> batches = new java.util.ArrayList<>();
            for (int s = 0; s < sessions.length; s++) {
                DexSession session = sessions[s];
                long key = 100 + s;
                batches.add(CompletableFuture.supplyAsync(() -> {
                    session.beginBatch();
                    session.put(key, key * 10);
                    try {
                        bothWrote.await(5, TimeUnit.SECONDS); // both batches hold a record not yet in partition 0's log
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                    long[] keys = new long[10];
                    long[] values = new long[10];
                    int n = session.scan(50, 10, keys, values); // from partition 0 into partition 1
                    session.commit();
                    return n;
                }));
            }
            for (CompletableFuture<Integer> batch : batches) {
                assertEquals(3, batch.get(10, TimeUnit.SECONDS), "the scan saw both writes of partition 0 and the key of partition 1");
            }
            assertTrue(engine.log(0).durableLsn() >= 2, "both batches' records are in partition 0's log");
        }
    }
}
