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

    private static DexEngine open(RemoteMemory memory, int frames) {
        return DexEngine.open(memory, new DexEngineSettings("no-offload", (long) frames * FrameHeaderDescriptor.FRAME_LENGTH,
                DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, RedoLogSettings.ON.withBytes(CHUNK));
    }

    @org.junit.jupiter.params.ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.ValueSource(strings = {"every third node read fails", "every other log read fails, the first one included"})
    void aTakeoverReadsAgainAfterAFailedReadAndServesEveryAcknowledgedWrite(String faults) {
        boolean nodes = faults.contains("node");
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 64L << 20, CHUNK);
            RemoteMemory admin = fabric.connect(0);
            Superblock.format(admin, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            PartitionTable.store(admin, PartitionTable.equalWidth(1, 0, RANGE));

            DexEngine a = open(fabric.connect(0), 4096);
            a.acquire(0);
            TreeMap<Long, Long> acknowledged = new TreeMap<>();
            SplittableRandom random = new SplittableRandom(7);
            DexSession session = a.newSession(); // never closed, never checkpointed: A vanishes with its pages dirty
            for (int i = 0; i < 600; i++) {
                long key = random.nextLong(1, RANGE);
                long value = random.nextLong();
                session.put(key, value);
                acknowledged.put(key, value);
            }
            assertTrue(a.dirtyFrames.get() > 0, "A holds dirty pages when it vanishes");

            FlakyReads flaky = new FlakyReads(fabric.connect(0), nodes ? 3 : 2, nodes);
            DexEngine b = open(flaky, 64);
            try {
                b.instanceGone(a.instanceId());
                flaky.on = true;
                DexEngine.AcquireReport report = b.acquireReport(0);
                flaky.on = false;
                assertEquals(600, report.replayed(), "every record of A's log was replayed: " + report);
                assertTrue(flaky.failed.get() >= 1, faults + " during the replay: " + flaky.failed.get() + " failed");

                try (DexSession reader = b.newSession()) {
                    for (var entry : acknowledged.entrySet()) {
                        assertTrue(reader.lookup(entry.getKey()), "key " + entry.getKey() + " is served after the takeover");
                        assertEquals(entry.getValue().longValue(), reader.value(), "key " + entry.getKey());
                    }
                }
            } finally {
                b.close();
            }
        }
    }
}
