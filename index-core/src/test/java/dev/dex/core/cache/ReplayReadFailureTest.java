package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.MutableDirectBuffer;

import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * A takeover whose replay meets reads that go unanswered: engine A writes keys into a partition and vanishes (its pages
 * never written back, its records only in the redo log), and engine B takes the partition over through a connection on
 * which every third read of a tree node (a replayed record's descent) fails, or every other read of a batch of log
 * records. Before a replay made such a read again, every acquire met a failed read somewhere in the replay and was
 * given up whole, so the partition could never be taken over; now B's first acquire replays every record and serves
 * every key A acknowledged.
 */
class ReplayReadFailureTest {
    private static final long RANGE = 1L << 20;
    private static final int CHUNK = 64 << 10;

    /**
     * Fails every {@code every}-th read while on, the first one included: of a whole tree node ({@code nodes}), or of
     * more than a node (a batch of log records); the failed read does not happen.
     */
    private static final class FlakyReads extends ForwardingRemoteMemory {
        private final int every;
        private final boolean nodes;
        private final AtomicLong matching = new AtomicLong();
        private final AtomicLong failed = new AtomicLong();
        private volatile boolean on;
        /** A thread whose every write fails, or null. */
        private volatile Thread failingWriter;
        /** Page writes (whole nodes) of {@link #failingWriter} still to fail; when negative, every write of it fails. */
        private final AtomicLong writesToFail = new AtomicLong(-1);

        @Override
        public void write(long address, org.agrona.DirectBuffer src, int srcOffset, int length) {
            boolean fails = Thread.currentThread() == failingWriter && (writesToFail.get() < 0
                    || length == NodeHeaderDescriptor.NODE_LENGTH && writesToFail.getAndUpdate(n -> Math.max(0, n - 1)) > 0);
            if (fails) {
                throw new FabricException("memory server " + GlobalAddress.serverId(address) + " did not answer a WRITE"
                        + " (fault injected by the test)");
            }
            super.write(address, src, srcOffset, length);
        }

        FlakyReads(RemoteMemory delegate, int every, boolean nodes) {
            super(delegate);
            this.every = every;
            this.nodes = nodes;
        }

        @Override
        public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
            boolean matches = nodes ? length == NodeHeaderDescriptor.NODE_LENGTH : length > NodeHeaderDescriptor.NODE_LENGTH;
            if (on && matches && matching.incrementAndGet() % every == 1) {
                failed.incrementAndGet();
                throw new FabricException("memory server " + GlobalAddress.serverId(address) + " did not answer a READ"
                        + " (fault injected by the test)");
            }
            super.read(address, dst, dstOffset, length);
        }
    }

    /**
     * The other side of the rule: a record whose own write failed (the write-through of a leaf that B does not cache;
     * two in a row fail, so applying it again would get through) is not applied again, and the takeover is given up;
     * the next acquire, with the memory server answering again, replays everything. With the replay's own failed writes
     * not watched, the first acquire gets through and this fails.
     */
    @org.junit.jupiter.api.Test
    void aRecordWhoseOwnWriteFailedIsNotAppliedAgainAndTheTakeoverIsGivenUp() {
        try (LocalFabric fabric = new LocalFabric()) {
            TreeMap<Long, Long> acknowledged = new TreeMap<>();
            DexEngine a = writeAndVanish(fabric, acknowledged);
            FlakyReads flaky = new FlakyReads(fabric.connect(0), 3, true);
            DexEngine b = open(flaky, 4); // a few frames: the replay writes leaves through
            try {
                b.instanceGone(a.instanceId());
                flaky.failingWriter = Thread.currentThread();
                flaky.writesToFail.set(2);
                flaky.on = true;
                org.junit.jupiter.api.Assertions.assertThrows(FabricException.class, () -> b.acquireReport(0),
                        "a replayed record's own write failed: the takeover is given up, not the record applied again");
                assertTrue(flaky.writesToFail.get() < 2, "a page write of the replay failed");
                flaky.on = false;
                flaky.failingWriter = null;
                DexEngine.AcquireReport report = b.acquireReport(0);
                assertEquals(600, report.replayed(), "the next acquire replays every record: " + report);
                assertServes(b, acknowledged);
            } finally {
                b.close();
            }
        }
    }

    /**
     * A takeover's replay admits every leaf it reads, whatever P_A (here 0.1): each record lands in the cache and none is
     * written through, so the takeover's only page writes are its checkpoint's, one per page. With the leaves admitted at
     * P_A, most records of a leaf were each read and written through (about ten per leaf before one was admitted).
     */
    @org.junit.jupiter.api.Test
    void aTakeoverAdmitsEveryLeafItReplaysWhateverTheAdmissionProbability() {
        try (LocalFabric fabric = new LocalFabric()) {
            TreeMap<Long, Long> acknowledged = new TreeMap<>();
            DexEngine a = writeAndVanish(fabric, acknowledged);
            RemoteMemory memory = fabric.connect(0);
            DexEngine b = DexEngine.open(memory, new DexEngineSettings("no-offload", 4096L * FrameHeaderDescriptor.FRAME_LENGTH,
                    DexEngineSettings.DEFAULT_COOLING_RATIO, 0.1), null, RedoLogSettings.ON.withBytes(CHUNK));
            try {
                b.instanceGone(a.instanceId());
                dev.dex.rdma.VerbSnapshot before = memory.counters().snapshot();
                DexEngine.AcquireReport report = b.acquireReport(0);
                dev.dex.rdma.VerbSnapshot during = memory.counters().snapshot().minus(before);
                assertEquals(600, report.replayed());
                assertTrue(report.pages() > 5, "the replay dirtied the partition's leaves: " + report);
                assertTrue(during.writes() - report.pages() < 20, "every page write was the checkpoint's: " + during.writes()
                        + " writes, " + report.pages() + " pages written back");
                assertServes(b, acknowledged);
            } finally {
                b.close();
            }
        }
    }

    /**
     * Formats a tree of one partition on {@code fabric}'s server 0, and has engine A write 600 keys into it and vanish:
     * its pages never written back, its records only in the redo log. Returns A; its writes go to {@code acknowledged}.
     */
    private static DexEngine writeAndVanish(LocalFabric fabric, TreeMap<Long, Long> acknowledged) {
        fabric.export(0, 64L << 20, CHUNK);
        RemoteMemory admin = fabric.connect(0);
        Superblock.format(admin, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
        PartitionTable.store(admin, PartitionTable.equalWidth(1, 0, RANGE));
        DexEngine a = open(fabric.connect(0), 4096);
        a.acquire(0);
        SplittableRandom random = new SplittableRandom(7);
        DexSession session = a.newSession(); // never closed, never checkpointed: A vanishes with its pages dirty
        for (int i = 0; i < 600; i++) {
            long key = random.nextLong(1, RANGE);
            long value = random.nextLong();
            session.put(key, value);
            acknowledged.put(key, value);
        }
        assertTrue(a.dirtyFrames.get() > 0, "A holds dirty pages when it vanishes");
        return a;
    }

    /** {@code engine} serves every key of {@code acknowledged} with its value. */
    private static void assertServes(DexEngine engine, TreeMap<Long, Long> acknowledged) {
        try (DexSession reader = engine.newSession()) {
            for (var entry : acknowledged.entrySet()) {
                assertTrue(reader.lookup(entry.getKey()), "key " + entry.getKey() + " is served after the takeover");
                assertEquals(entry.getValue().longValue(), reader.value(), "key " + entry.getKey());
            }
        }
    }

    private static DexEngine open(RemoteMemory memory, int frames) {
        return DexEngine.open(memory, new DexEngineSettings("no-offload", (long) frames * FrameHeaderDescriptor.FRAME_LENGTH,
                DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, RedoLogSettings.ON.withBytes(CHUNK));
    }

    @org.junit.jupiter.params.ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"every third node read fails", "every other log read fails, the first one included",
            "every third node read fails while another thread's writes all fail"})
    void aTakeoverReadsAgainAfterAFailedReadAndServesEveryAcknowledgedWrite(String faults) throws InterruptedException {
        boolean nodes = faults.contains("node");
        boolean failingWrites = faults.contains("another thread");
        try (LocalFabric fabric = new LocalFabric()) {
            TreeMap<Long, Long> acknowledged = new TreeMap<>();
            DexEngine a = writeAndVanish(fabric, acknowledged);

            FlakyReads flaky = new FlakyReads(fabric.connect(0), nodes ? 3 : 2, nodes);
            DexEngine b = open(flaky, 64);
            // Another thread of B whose writing verbs all fail meanwhile, as an operation of another partition's would
            // when its memory server stops answering: B's failed writes keep counting up through the replay.
            java.util.concurrent.atomic.AtomicBoolean replaying = new java.util.concurrent.atomic.AtomicBoolean(true);
            AtomicLong otherFailures = new AtomicLong();
            Thread other = new Thread(() -> {
                org.agrona.concurrent.UnsafeBuffer word = new org.agrona.concurrent.UnsafeBuffer(new byte[8]);
                while (replaying.get()) {
                    try {
                        b.memory.write(GlobalAddress.of(0, 0), word, 0, 8);
                    } catch (FabricException expected) {
                        otherFailures.incrementAndGet();
                    }
                    java.util.concurrent.locks.LockSupport.parkNanos(20_000);
                }
            }, "failing-writer");
            flaky.failingWriter = other;
            try {
                b.instanceGone(a.instanceId());
                flaky.on = true;
                if (failingWrites) {
                    other.start();
                }
                DexEngine.AcquireReport report;
                try {
                    report = b.acquireReport(0);
                } finally {
                    replaying.set(false);
                    other.join();
                }
                flaky.on = false;
                if (failingWrites) {
                    assertTrue(otherFailures.get() > 10, "the other thread's writes failed during the replay: " + otherFailures);
                }
                assertEquals(600, report.replayed(), "every record of A's log was replayed: " + report);
                assertTrue(flaky.failed.get() >= 1, faults + " during the replay: " + flaky.failed.get() + " failed");

                assertServes(b, acknowledged);
            } finally {
                b.close();
            }
        }
    }
}
