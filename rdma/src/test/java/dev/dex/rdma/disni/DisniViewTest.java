package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Map;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.replica.StaleViewException;
import dev.dex.rdma.testing.TestResources;

/**
 * A {@code disni} replica's gate, with the production control fabric ({@code tcp} on loopback) and an
 * {@link InJvmRdmaTransport} standing for the network: a client connected in a view of the replica group gets keys of
 * that view and runs its atomics on the replica's memory node in that view; once the replica moves past the view, the
 * device refuses the client's READs and WRITEs and the memory node its atomics, each said as a
 * {@link StaleViewException} (not a fence, not an unknown failure), and none of them changes the region.
 */
class DisniViewTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final int SERVER = 3;
    private static final long ALICE = 0xA11CEL;
    private static final long BOB = 0xB0BL;
    private static final long WORD = GlobalAddress.of(SERVER, CHUNK);
    private static final long PAGE = GlobalAddress.of(SERVER, 2L * CHUNK);

    @AutoClose
    private final TestResources resources = new TestResources();
    private final DeviceModel model = new DeviceModel();
    private final InJvmRdmaTransport network = model.network();
    private final DisniFabric memorySide = resources.closeAfter(model.fabric());
    private final ExportedRegion region = resources.closeAfter(memorySide.export(SERVER, 16L * CHUNK, CHUNK));
    private final DisniFabric computeSide = resources.closeAfter(model.fabric());
    private final Map<Integer, String> endpoints = Map.of(SERVER, region.endpoint());

    private static UnsafeBuffer word(long value) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        buffer.putLong(0, value);
        return buffer;
    }

    private static long read(RemoteMemory memory, long address) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        memory.read(address, buffer, 0, Long.BYTES);
        return buffer.getLong(0);
    }

    @Test
    void aReplicaThatMovesPastAViewRefusesEveryVerbOfItAsStaleAndKeepsItsRegion() {
        memorySide.advanceView(SERVER, 1);
        RemoteMemory old = resources.closeAfter(computeSide.connect(endpoints, ALICE, 1));
        old.write(WORD, word(7), 0, Long.BYTES);
        assertEquals(7, old.compareAndSwap(WORD, 7, 8), "the atomic runs on the replica in view 1");
        assertEquals(8, old.fetchAndAdd(WORD, 1));

        memorySide.advanceView(SERVER, 2);

        assertStale(assertThrows(StaleViewException.class, () -> old.write(WORD, word(100), 0, Long.BYTES)));
        assertStale(assertThrows(StaleViewException.class, () -> old.write(PAGE, new UnsafeBuffer(new byte[1024]), 0, 1024)));
        assertStale(assertThrows(StaleViewException.class, () -> read(old, WORD)));
        assertStale(assertThrows(StaleViewException.class, () -> old.compareAndSwap(WORD, 9, 100)));
        assertStale(assertThrows(StaleViewException.class, () -> old.fetchAndAdd(WORD, 100)));
        VerbBatch batch = new VerbBatch(3);
        batch.read(WORD, new UnsafeBuffer(new byte[Long.BYTES]), 0, Long.BYTES);
        batch.write(PAGE, word(100), 0, Long.BYTES);
        batch.compareAndSwap(WORD, 9, 100);
        old.submit(batch);
        for (int slot = 0; slot < 3; slot++) {
            assertStale(assertInstanceOf(StaleViewException.class, batch.failure(slot), "slot " + slot));
        }
        assertStale(assertThrows(StaleViewException.class, () -> computeSide.connect(endpoints, BOB, 1)));

        RemoteMemory current = resources.closeAfter(computeSide.connect(endpoints, BOB, 2));
        assertEquals(9, read(current, WORD), "nothing of view 1 reached the region after the move");
        assertEquals(0, read(current, PAGE));
        assertEquals(9, current.compareAndSwap(WORD, 9, 10), "a client of view 2 is served");
    }

    private static void assertStale(StaleViewException stale) {
        assertEquals(SERVER, stale.serverId());
        assertEquals(1, stale.clientView());
        assertEquals(2, stale.replicaView());
    }

    @Test
    void aClientOfANewerViewIsServedBeforeAndAfterTheReplicaMovesToIt() {
        memorySide.advanceView(SERVER, 2);
        RemoteMemory early = resources.closeAfter(computeSide.connect(endpoints, ALICE, 3));
        early.write(WORD, word(5), 0, Long.BYTES);

        memorySide.advanceView(SERVER, 3);

        assertEquals(5, read(early, WORD));
        assertEquals(5, early.fetchAndAdd(WORD, 1));
        memorySide.advanceView(SERVER, 4);
        assertThrows(StaleViewException.class, () -> read(early, WORD));
        assertThrows(IllegalArgumentException.class, () -> memorySide.advanceView(SERVER, 3), "a view only grows");
    }

    /**
     * A plain client (keys of view 0) of a replica in a newer view is refused, and gives back nothing: the refusal's
     * answer carries the replica's view where a grant's id would be, and once that id was taken for a grant to release
     * (here Bob's own second grant, id 2, while the replica is in view 2).
     */
    @Test
    void aPlainClientOfAReplicaInANewerViewIsRefusedAndReleasesNothing() {
        memorySide.advanceView(SERVER, 2);
        resources.closeAfter(computeSide.connect(endpoints, BOB, 2));
        RemoteMemory second = resources.closeAfter(computeSide.connect(endpoints, BOB, 2));
        second.write(PAGE, word(3), 0, Long.BYTES);

        assertThrows(StaleViewException.class, () -> computeSide.connect(endpoints, BOB));

        assertEquals(3, read(second, PAGE), "Bob's grant 2 still works");
    }

    /** A word's write in a view goes to the replica's memory node, where a refusal is exact; longer writes go over RDMA. */
    @Test
    void aWordsWriteInAViewGoesToTheMemoryNodeAndLongerWritesOverRdma() {
        memorySide.advanceView(SERVER, 1);
        RemoteMemory memory = resources.closeAfter(computeSide.connect(endpoints, ALICE, 1));
        network.record();

        memory.write(WORD, word(41), 0, Long.BYTES);
        memory.write(PAGE, new UnsafeBuffer(new byte[16]), 0, 16);

        assertEquals(1, network.recorded().size(), "only the 16-byte write went over RDMA: " + network.recorded());
        assertEquals(16, network.recorded().get(0).length());
        assertEquals(41, region.region().getLongVolatile(GlobalAddress.offset(WORD)));
        memorySide.advanceView(SERVER, 2);
        assertStale(assertThrows(StaleViewException.class, () -> memory.write(WORD, word(42), 0, Long.BYTES)));
        assertEquals(41, region.region().getLongVolatile(GlobalAddress.offset(WORD)), "refused means not written");
    }

    /**
     * On a device, once one request of a queue pair meets the access error the others are flushed: a flushed request of
     * a client whose replica moved on is stale too (it never ran), not a failure of unknown outcome.
     */
    @Test
    void aFlushedRequestOfAReplicaThatMovedOnIsStale() {
        memorySide.advanceView(SERVER, 1);
        RemoteMemory memory = resources.closeAfter(computeSide.connect(endpoints, ALICE, 1));
        memorySide.advanceView(SERVER, 2);
        network.failNextWorkRequest(new dev.dex.rdma.FabricException("RDMA READ on memory server " + SERVER
                + " completed with IBV_WC_WR_FLUSH_ERR (5)"));

        assertStale(assertThrows(StaleViewException.class, () -> read(memory, PAGE)));
    }

    @Test
    void aFencedClientInAViewIsToldItIsFenced() {
        memorySide.advanceView(SERVER, 1);
        RemoteMemory fenced = resources.closeAfter(computeSide.connect(endpoints, ALICE, 1));
        RemoteMemory other = resources.closeAfter(computeSide.connect(endpoints, BOB, 1));
        fenced.write(WORD, word(1), 0, Long.BYTES);

        memorySide.fence(SERVER, ALICE);

        assertThrows(FencedException.class, () -> fenced.write(WORD, word(2), 0, Long.BYTES));
        assertThrows(FencedException.class, () -> fenced.compareAndSwap(WORD, 1, 2));
        assertEquals(1, read(other, WORD), "the fenced client changed nothing; the other one is served");
    }
}
