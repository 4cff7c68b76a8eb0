package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.testing.TestResources;

/**
 * A partition's old owner that is still running (cut off, paused, not yet dead) while a new owner takes the
 * partition over: on the {@code tcp} fabric the new owner fences it before the replay, so none of its writes,
 * log appends or write-backs is applied any more, and the new owner serves exactly what was acknowledged.
 */
class StaleOwnerFencingTest {
    private static final long OLD_OWNER = 0x01D0L;
    private static final long NEW_OWNER = 0x0E1AL;
    private static final long RANGE = 10_000;
    private static final int CHUNK = 4096;

    @AutoClose
    private final TestResources resources = new TestResources();
    private final TcpFabric fabric = resources.closeAfter(new TcpFabric());
    private final Map<Integer, String> endpoints;

    StaleOwnerFencingTest() {
        ExportedRegion zero = resources.closeAfter(fabric.export(0, 32L << 20, CHUNK));
        ExportedRegion one = resources.closeAfter(fabric.export(1, 32L << 20, CHUNK));
        endpoints = Map.of(0, zero.endpoint(), 1, one.endpoint());
        try (RemoteMemory admin = fabric.connect(endpoints)) {
            Superblock.format(admin, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            PartitionTable.store(admin, PartitionTable.equalWidth(2, 0, RANGE));
        }
    }

    private DexEngine engine(long client) {
        RemoteMemory memory = resources.closeAfter(fabric.connect(endpoints, client));
        return DexEngine.open(memory, new DexEngineSettings("no-offload", 512L * FrameHeaderDescriptor.FRAME_LENGTH,
                DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, RedoLogSettings.ON);
    }

    @Test
    void aNewOwnerFencesAnOwnerThatDidNotGiveThePartitionUp() {
        DexEngine old = engine(OLD_OWNER);
        old.acquire(0);
        old.acquire(1);
        IndexSession writer = old.newSession();
        for (long key = 0; key < RANGE; key += 3) {
            writer.put(key, key + 1); // committed alone: in the log, and acknowledged
        }

        DexEngine heir = engine(NEW_OWNER);
        heir.instanceGone(old.instanceId());
        DexEngine.AcquireReport report = heir.acquireReport(0);

        assertEquals(OLD_OWNER, report.previousOwner(), "the old owner had not given partition 0 up");
        assertTrue(report.fenced(), "and the tcp fabric fenced it before the replay");
        assertTrue(fabric.isFenced(0, OLD_OWNER) && fabric.isFenced(1, OLD_OWNER), "on every memory node");
        // The old owner still believes it holds both partitions: nothing it writes is acknowledged any more.
        RuntimeException refused = assertThrows(RuntimeException.class, () -> writer.put(3, -1));
        assertTrue(causedByFence(refused), "the write failed because the owner is fenced: " + refused);
        assertThrows(RuntimeException.class, () -> writer.put(RANGE - 1, -1), "on its other partition too");
        assertThrows(RuntimeException.class, old::checkpointAll, "its write-back of dirty pages is refused");

        try (IndexSession reader = heir.newSession()) {
            heir.acquire(1);
            for (long key = 0; key < RANGE; key++) {
                boolean found = reader.lookup(key);
                assertEquals(key % 3 == 0, found, "key " + key + " present exactly when acknowledged");
                if (found) {
                    assertEquals(key + 1, reader.value(), "key " + key + " has its acknowledged value");
                }
            }
            reader.put(3, 42);
            assertTrue(reader.lookup(3));
            assertEquals(42, reader.value());
        }
        assertEquals(0, heir.acquireReport(0).previousOwner(), "held already: nothing to fence");
        heir.release(0);
        heir.release(1);
        TreeValidator.Report valid = TreeValidator.validate(resources.closeAfter(fabric.connect(endpoints)));
        assertEquals(RANGE / 3 + 1, valid.entries(), "the remote tree is valid and holds what was acknowledged");
    }

    @Test
    void anOwnerThatReleasedIsNotFencedAndKeepsServingItsOtherPartitions() {
        DexEngine old = engine(OLD_OWNER);
        old.acquire(0);
        old.acquire(1);
        try (IndexSession writer = old.newSession()) {
            writer.put(1, 10);
            writer.put(RANGE - 1, 20);
        }
        old.release(0);

        DexEngine heir = engine(NEW_OWNER);
        DexEngine.AcquireReport report = heir.acquireReport(0);

        assertEquals(0, report.previousOwner(), "a released partition names no owner to fence");
        assertFalse(report.fenced());
        assertFalse(fabric.isFenced(0, OLD_OWNER));
        try (IndexSession writer = old.newSession(); IndexSession reader = heir.newSession()) {
            writer.put(RANGE - 2, 30);
            assertTrue(writer.lookup(RANGE - 2));
            assertEquals(30, writer.value(), "the old owner keeps serving partition 1");
            assertTrue(reader.lookup(1));
            assertEquals(10, reader.value());
        }
    }

    private static boolean causedByFence(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t instanceof FencedException || t.getMessage() != null && t.getMessage().contains("fenced")) {
                return true;
            }
        }
        return false;
    }
}
