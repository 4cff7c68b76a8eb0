package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.MutableDirectBuffer;
import org.junit.jupiter.api.Test;

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
 * which every third read of a tree node fails. Before a replayed record was applied again after such a read, every
 * acquire met a failed read somewhere in the replay and was given up whole, so the partition could never be taken
 * over; now B's first acquire replays every record and serves every key A acknowledged.
 */
class ReplayReadFailureTest {
    private static final long RANGE = 1L << 20;
    private static final int CHUNK = 64 << 10;

    /** Fails every {@code every}-th read of a whole tree node while on; the failed read does not happen. */
    private static final class FlakyNodeReads extends ForwardingRemoteMemory {
        private final int every;
        private final AtomicLong nodeReads = new AtomicLong();
        private final AtomicLong failed = new AtomicLong();
        private volatile boolean on;

        FlakyNodeReads(RemoteMemory delegate, int every) {
            super(delegate);
            this.every = every;
        }

        @Override
        public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
            if (on && length == NodeHeaderDescriptor.NODE_LENGTH && nodeReads.incrementAndGet() % every == 0) {
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

    @Test
    void aTakeoverAppliesARecordAgainAfterAFailedReadAndServesEveryAcknowledgedWrite() {
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

            FlakyNodeReads flaky = new FlakyNodeReads(fabric.connect(0), 3);
            DexEngine b = open(flaky, 64);
            b.instanceGone(a.instanceId());
            flaky.on = true;
            DexEngine.AcquireReport report = b.acquireReport(0);
            flaky.on = false;
            assertEquals(600, report.replayed(), "every record of A's log was replayed: " + report);
            assertTrue(flaky.failed.get() >= 3, "reads of tree nodes failed during the replay: " + flaky.failed.get());

            try (DexSession reader = b.newSession()) {
                for (var entry : acknowledged.entrySet()) {
                    assertTrue(reader.lookup(entry.getKey()), "key " + entry.getKey() + " is served after the takeover");
                    assertEquals(entry.getValue().longValue(), reader.value(), "key " + entry.getKey());
                }
            }
            b.close();
        }
    }
}
