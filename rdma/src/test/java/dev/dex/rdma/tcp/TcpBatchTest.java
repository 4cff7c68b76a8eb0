package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.testing.TestResources;

/**
 * Batches over tcp when the peer or the network fails: every verb of the batch ends (no hang), each with the error its
 * single verb would have; the thread's next batch works on a new connection; a read whose server moved runs again
 * there, a write does not.
 */
class TcpBatchTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION = 64L * CHUNK;

    @AutoClose
    private final TestResources resources = new TestResources();

    private TcpFabric fabric(Duration verbTimeout) {
        return resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(verbTimeout), 0));
    }

    private static VerbBatch mixed(UnsafeBuffer buffer) {
        VerbBatch batch = new VerbBatch();
        for (int i = 0; i < 6; i++) {
            batch.read(GlobalAddress.of(0, CHUNK + i * 64L), buffer, i * 64, 64);
        }
        batch.write(GlobalAddress.of(0, 2L * CHUNK), buffer, 0, 64);
        batch.compareAndSwap(GlobalAddress.of(0, 3L * CHUNK), 0, 1);
        batch.fetchAndAdd(GlobalAddress.of(0, 3L * CHUNK + 8), 1);
        return batch;
    }

    @Test
    void aServerThatStopsAnsweringFailsEveryVerbOfTheBatchAfterTheTimeout() throws Exception {
        FakeMemoryServer server = resources.closeAfter(new FakeMemoryServer(0, FakeMemoryServer.Mode.SILENT));
        RemoteMemory memory = resources.closeAfter(fabric(Duration.ofMillis(300)).connect(Map.of(0, server.endpoint())));
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[6 * 64]);
        VerbBatch batch = mixed(buffer);

        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memory.submit(batch));

        for (int slot = 0; slot < batch.size(); slot++) {
            FabricException failure = assertInstanceOf(FabricException.class, batch.failure(slot), "slot " + slot);
            assertTrue(failure.getMessage().contains("within 300 ms"), failure.getMessage());
        }
        server.mode(FakeMemoryServer.Mode.ANSWER);
        buffer.setMemory(0, buffer.capacity(), (byte) 5);
        VerbBatch next = mixed(buffer);
        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memory.submit(next));
        assertNull(next.firstFailure(), "the next batch went to a new connection and was answered");
        assertArrayEquals(new byte[6 * 64], buffer.byteArray(), "the fake server's reads are zeroes");
    }

    @Test
    void aConnectionClosedUnderABatchFailsItsVerbsClearly() throws Exception {
        FakeMemoryServer server = resources.closeAfter(new FakeMemoryServer(0, FakeMemoryServer.Mode.CLOSE));
        RemoteMemory memory = resources.closeAfter(fabric(Duration.ofSeconds(30)).connect(Map.of(0, server.endpoint())));
        VerbBatch batch = mixed(new UnsafeBuffer(new byte[6 * 64]));

        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memory.submit(batch));

        for (int slot = 0; slot < batch.size(); slot++) {
            FabricException failure = assertInstanceOf(FabricException.class, batch.failure(slot), "slot " + slot);
            assertTrue(failure.getMessage().contains("memory server 0"), failure.getMessage());
        }
    }

    /**
     * Reads of a batch that time out wait for their server's relocation, as a single read does, and run again there; a
     * server that is not relocated within the failover wait is waited for once per batch, not once per read.
     */
    @Test
    void timedOutReadsWaitOnceForARelocationAndRunAgainThere() throws Exception {
        TcpFabric memorySide = fabric(Duration.ofSeconds(30));
        ExportedRegion region = resources.closeAfter(memorySide.export(0, REGION, CHUNK));
        ChaosProxy silent = resources.closeAfter(new ChaosProxy(region.endpoint()));
        ChaosProxy moved = resources.closeAfter(new ChaosProxy(region.endpoint()));
        TcpFabric clients = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofMillis(300)),
                ReplicaSettings.DEFAULTS.withFailoverWait(Duration.ofSeconds(1)), 0, null, null));
        RemoteMemory memory = resources.closeAfter(clients.connect(Map.of(0, silent.endpoint())));
        memory.readLong(GlobalAddress.of(0, CHUNK));

        silent.freeze();
        VerbBatch unmoved = mixed(new UnsafeBuffer(new byte[6 * 64]));
        long start = System.nanoTime();
        assertTimeoutPreemptively(Duration.ofSeconds(20), () -> memory.submit(unmoved));
        long took = System.nanoTime() - start;
        for (int slot = 0; slot < unmoved.size(); slot++) {
            assertInstanceOf(FabricException.class, unmoved.failure(slot), "slot " + slot);
        }
        assertTrue(took < 3_000_000_000L, "six reads waited once for a relocation (1 s), not six times: " + took / 1_000_000 + " ms");

        // A second client, connected through a proxy that goes silent only once it is connected.
        ChaosProxy silentLater = resources.closeAfter(new ChaosProxy(region.endpoint()));
        RemoteMemory second = resources.closeAfter(clients.connect(Map.of(0, silentLater.endpoint())));
        second.readLong(GlobalAddress.of(0, CHUNK));
        silentLater.freeze();
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[6 * 64]);
        buffer.setMemory(0, buffer.capacity(), (byte) 9);
        VerbBatch relocated = mixed(buffer);
        Thread mover = new Thread(() -> {
            try {
                Thread.sleep(500);
                second.relocate(0, moved.endpoint());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        mover.start();
        assertTimeoutPreemptively(Duration.ofSeconds(20), () -> second.submit(relocated));
        mover.join();
        silent.thaw();
        silentLater.thaw();
        for (int slot = 0; slot < 6; slot++) {
            assertNull(relocated.failure(slot), "read " + slot + " ran again where the server moved");
        }
        assertArrayEquals(new byte[6 * 64], buffer.byteArray(), "the region's bytes were read");
    }

    /**
     * With a failover wait, the batch's reads that failed because their connection was cut run again once the server is
     * relocated (a replica group's new primary), and read the region's bytes; its write and atomics fail, since running
     * them again could undo another client's change.
     */
    @Test
    void readsOfABatchRunAgainWhereTheirServerMovedAndItsWritesFail() throws Exception {
        TcpFabric memorySide = fabric(Duration.ofSeconds(30));
        ExportedRegion region = resources.closeAfter(memorySide.export(0, REGION, CHUNK));
        byte[] expected = new byte[6 * 64];
        for (int i = 0; i < expected.length; i++) {
            expected[i] = (byte) (i * 7 + 1);
        }
        RemoteMemory direct = resources.closeAfter(memorySide.connect(Map.of(0, region.endpoint())));
        direct.write(GlobalAddress.of(0, CHUNK), new UnsafeBuffer(expected), 0, expected.length);

        ChaosProxy first = new ChaosProxy(region.endpoint());
        ChaosProxy second = resources.closeAfter(new ChaosProxy(region.endpoint()));
        TcpFabric clients = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS,
                ReplicaSettings.DEFAULTS.withFailoverWait(Duration.ofSeconds(10)), 0, null, null));
        RemoteMemory memory = resources.closeAfter(clients.connect(Map.of(0, first.endpoint())));
        memory.readLong(GlobalAddress.of(0, CHUNK)); // connected through the first proxy

        UnsafeBuffer buffer = new UnsafeBuffer(new byte[6 * 64]);
        VerbBatch batch = mixed(buffer);
        first.freeze();
        memory.start(batch);
        Thread mover = new Thread(() -> {
            try {
                Thread.sleep(200);
                first.close(); // cuts the connection and refuses new ones: the reads can only run where the server moves
                Thread.sleep(300);
                memory.relocate(0, second.endpoint());
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        mover.start();
        assertTimeoutPreemptively(Duration.ofSeconds(20), batch::await);
        mover.join();
        first.thaw(); // its pumps, held since the freeze, find their sockets closed and end

        for (int slot = 0; slot < 6; slot++) {
            assertNull(batch.failure(slot), "read " + slot + " ran again at the new endpoint");
        }
        assertArrayEquals(expected, buffer.byteArray());
        for (int slot = 6; slot < batch.size(); slot++) {
            assertInstanceOf(FabricException.class, batch.failure(slot), "slot " + slot + " (" + batch.op(slot) + ") failed");
        }
        assertEquals(6, memory.counters().snapshot().reads() - 1, "six reads counted once each, with the first read");
    }
}
