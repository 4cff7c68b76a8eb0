package dev.dex.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

/**
 * The behaviour every {@link Fabric} transport promises. A transport's test extends this class and
 * supplies {@link #newFabric}; everything a test creates through the helpers is closed after it, clients
 * first. The reads, writes and atomics of the contract, and the helpers, are in {@link RemoteMemoryVerbContract};
 * batches of verbs in {@link RemoteMemoryBatchContract}; this class adds chunk allocation, errors, counters and latency.
 */
public abstract class RemoteMemoryContractTest extends RemoteMemoryBatchContract {
    // ---- chunk allocation

    @Test
    void chunkAllocatorHandsOutEachServersChunksFromIndexOneThenReportsFull() {
        Fabric fabric = fabric();
        export(fabric, 0);
        export(fabric, 1);
        RemoteMemory memory = connect(fabric, 0, 1);
        ChunkAllocator allocator = memory.chunkAllocator();
        assertEquals(CHUNK_LENGTH, allocator.chunkLength(0));
        assertEquals(CHUNK_LENGTH, allocator.chunkLength(1));

        for (int index = 1; index < CHUNKS; index++) {
            for (int server = 0; server <= 1; server++) {
                long chunk = allocator.allocateChunk(server);
                assertEquals(GlobalAddress.of(server, (long) index * CHUNK_LENGTH), chunk,
                        "chunk " + index + " of server " + server + " is " + GlobalAddress.toString(chunk));
            }
        }
        for (int server = 0; server <= 1; server++) {
            int id = server;
            assertEquals(id, assertThrows(MemoryFullException.class, () -> allocator.allocateChunk(id)).serverId());
            assertEquals(id, assertThrows(MemoryFullException.class, () -> allocator.allocateChunk(id)).serverId(),
                    "a full region stays full");
        }
    }

    @Test
    void clientsOfARegionShareItsChunkAllocation() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory first = connect(fabric, 0);
        RemoteMemory second = connect(fabric, 0);

        assertEquals(GlobalAddress.of(0, CHUNK_LENGTH), first.chunkAllocator().allocateChunk(0));
        assertEquals(GlobalAddress.of(0, 2L * CHUNK_LENGTH), second.chunkAllocator().allocateChunk(0));
        assertEquals(GlobalAddress.of(0, 3L * CHUNK_LENGTH), first.chunkAllocator().allocateChunk(0));
    }

    @Test
    void concurrentAllocationHandsOutEveryChunkExactlyOnce() throws Exception {
        Fabric fabric = fabric();
        int chunks = 1024;
        export(fabric, 3, (long) chunks * CHUNK_LENGTH);
        RemoteMemory memory = connect(fabric, 3);
        int threads = 4;
        List<List<Long>> allocated = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            allocated.add(new ArrayList<>());
        }

        inParallel(threads, t -> {
            while (true) {
                try {
                    allocated.get(t).add(memory.chunkAllocator().allocateChunk(3));
                } catch (MemoryFullException e) {
                    assertEquals(3, e.serverId());
                    return;
                }
            }
        });

        Set<Long> distinct = new HashSet<>();
        for (List<Long> chunksOfThread : allocated) {
            for (long chunk : chunksOfThread) {
                assertEquals(3, GlobalAddress.serverId(chunk));
                long offset = GlobalAddress.offset(chunk);
                assertEquals(0, offset % CHUNK_LENGTH, "chunk at " + offset + " is not chunk-aligned");
                assertTrue(offset >= CHUNK_LENGTH && offset <= (long) (chunks - 1) * CHUNK_LENGTH, "chunk at " + offset);
                assertTrue(distinct.add(chunk), "chunk " + GlobalAddress.toString(chunk) + " handed out twice");
            }
        }
        assertEquals(chunks - 1, distinct.size());
    }

    // ---- errors

    @Test
    void addressOfAnUnconnectedServerIsRejected() {
        Fabric fabric = fabric();
        export(fabric, 0);
        export(fabric, 1);
        RemoteMemory memory = connect(fabric, 0);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[16]);

        for (int server : new int[] {1, 7, GlobalAddress.MAX_SERVER_ID}) {
            long address = GlobalAddress.of(server, CHUNK_LENGTH);
            assertThrows(IllegalArgumentException.class, () -> memory.read(address, buffer, 0, 8), "read on server " + server);
            assertThrows(IllegalArgumentException.class, () -> memory.write(address, buffer, 0, 8), "write on server " + server);
            assertThrows(IllegalArgumentException.class, () -> memory.compareAndSwap(address, 0, 1), "CAS on server " + server);
            assertThrows(IllegalArgumentException.class, () -> memory.fetchAndAdd(address, 1), "FAA on server " + server);
            assertThrows(IllegalArgumentException.class, () -> memory.chunkAllocator().allocateChunk(server), "allocation on server " + server);
        }
    }

    @Test
    void rangePastTheRegionEndIsRejectedAndWritesNothing() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        UnsafeBuffer ones = new UnsafeBuffer(pattern(16, 1));

        assertThrows(IllegalArgumentException.class, () -> memory.read(GlobalAddress.of(0, REGION_LENGTH - 4), ones, 0, 8));
        assertThrows(IllegalArgumentException.class, () -> memory.read(GlobalAddress.of(0, REGION_LENGTH), ones, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> memory.read(GlobalAddress.of(0, CHUNK_LENGTH), ones, 0, -1));
        assertThrows(IllegalArgumentException.class, () -> memory.write(GlobalAddress.of(0, REGION_LENGTH - 4), ones, 0, 8));
        assertThrows(IllegalArgumentException.class, () -> memory.write(GlobalAddress.of(0, REGION_LENGTH - 15), ones, 0, 16));
        assertThrows(IllegalArgumentException.class, () -> memory.compareAndSwap(GlobalAddress.of(0, REGION_LENGTH), 0, 1));
        assertThrows(IllegalArgumentException.class, () -> memory.fetchAndAdd(GlobalAddress.of(0, GlobalAddress.MAX_OFFSET - 7), 1));

        assertArrayEquals(new byte[16], readBytes(memory, 0, REGION_LENGTH - 16, 16), "tail of the region");
    }

    @Test
    void misalignedAtomicIsRejectedAndChangesNothing() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);

        assertThrows(IllegalArgumentException.class, () -> memory.compareAndSwap(GlobalAddress.of(0, CHUNK_LENGTH + 4), 0, -1));
        assertThrows(IllegalArgumentException.class, () -> memory.fetchAndAdd(GlobalAddress.of(0, CHUNK_LENGTH + 1), -1));

        assertArrayEquals(new byte[16], readBytes(memory, 0, CHUNK_LENGTH, 16));
    }

    @Test
    void swizzledAddressIsRejected() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long swizzled = GlobalAddress.swizzle(GlobalAddress.of(0, CHUNK_LENGTH));
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[8]);

        assertThrows(IllegalArgumentException.class, () -> memory.read(swizzled, buffer, 0, 8));
        assertThrows(IllegalArgumentException.class, () -> memory.write(swizzled, buffer, 0, 8));
        assertThrows(IllegalArgumentException.class, () -> memory.compareAndSwap(swizzled, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> memory.fetchAndAdd(swizzled, 1));
    }

    @Test
    void connectToAnUnexportedServerFails() {
        Fabric fabric = fabric();
        export(fabric, 0);

        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(1)));
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(0, 1)));
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(-1)));
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect()));
        assertArrayEquals(new int[] {0}, connect(fabric, 0).memoryServerIds(), "a failed connect leaves the fabric usable");
    }

    @Test
    void exportWithBadLengthsOrServerIdFails() {
        Fabric fabric = fabric();
        long[][] serverRegionChunk = {
            {0, REGION_LENGTH, CHUNK_LENGTH - 1},
            {0, REGION_LENGTH, CHUNK_LENGTH / 2},
            {0, 6 * 8192, 6000},
            {0, CHUNK_LENGTH, CHUNK_LENGTH},
            {0, 3L * CHUNK_LENGTH + 1, CHUNK_LENGTH},
            {0, 0, CHUNK_LENGTH},
            {0, 1L << GlobalAddress.OFFSET_BITS, CHUNK_LENGTH},
            {-1, REGION_LENGTH, CHUNK_LENGTH},
            {GlobalAddress.MAX_SERVER_ID + 1, REGION_LENGTH, CHUNK_LENGTH},
        };
        for (long[] bad : serverRegionChunk) {
            assertThrows(IllegalArgumentException.class,
                    () -> closeAfterTest(fabric.export((int) bad[0], bad[1], (int) bad[2])),
                    "export(" + bad[0] + ", " + bad[1] + ", " + bad[2] + ")");
        }
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(0)), "a failed export exports nothing");
    }

    @Test
    void exportingTheSameServerTwiceFailsAndKeepsTheFirstRegion() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory before = connect(fabric, 0);
        writeLong(before, GlobalAddress.of(0, CHUNK_LENGTH), 31);

        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.export(0, REGION_LENGTH, CHUNK_LENGTH)));

        assertEquals(31, readLong(connect(fabric, 0), GlobalAddress.of(0, CHUNK_LENGTH)));
    }

    @Test
    void closedExportAcceptsNoNewClient() {
        Fabric fabric = fabric();
        export(fabric, 1);
        ExportedRegion closed = fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);

        closed.close();

        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(0)));
        assertArrayEquals(new int[] {1}, connect(fabric, 1).memoryServerIds());
    }

    @Test
    void closedFabricAcceptsNoNewClient() {
        Fabric fabric = fabric();
        fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);

        fabric.close();

        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(0)));
    }

    @Test
    void verbsAfterCloseThrowIllegalState() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = fabric.connect(0);
        long address = GlobalAddress.of(0, CHUNK_LENGTH);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[8]);

        memory.close();
        memory.close();

        assertThrows(IllegalStateException.class, () -> memory.read(address, buffer, 0, 8));
        assertThrows(IllegalStateException.class, () -> memory.write(address, buffer, 0, 8));
        assertThrows(IllegalStateException.class, () -> memory.compareAndSwap(address, 0, 1));
        assertThrows(IllegalStateException.class, () -> memory.fetchAndAdd(address, 1));
        assertThrows(IllegalStateException.class, () -> memory.chunkAllocator().allocateChunk(0));
    }

    @Test
    void negativeLatencyIsRejected() {
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(newFabric(-1)));
    }

    // ---- counters and latency

    @Test
    void countersCountEachVerbAndTheBytesItMoves() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        RemoteMemory other = connect(fabric, 0);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[100]);
        long address = GlobalAddress.of(0, CHUNK_LENGTH);
        assertEquals(VerbSnapshot.ZERO, memory.counters().snapshot());

        for (int i = 0; i < 3; i++) {
            memory.read(address, buffer, 0, 10);
        }
        memory.write(address, buffer, 0, 100);
        memory.write(address, buffer, 0, 8);
        memory.compareAndSwap(address, 0, 1);
        memory.fetchAndAdd(address, 1);
        memory.chunkAllocator().allocateChunk(0);
        other.read(address, buffer, 0, 50);

        assertEquals(new VerbSnapshot(3, 2, 3, 0, 3 * 10 + 100 + 8 + 3 * 8), memory.counters().snapshot());
        assertEquals(new VerbSnapshot(1, 0, 0, 0, 50), other.counters().snapshot(), "another client counts its own verbs");
    }

    @Test
    void countersSumTheVerbsOfEveryThread() throws Exception {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        int threads = 4;
        int reads = 1_000;
        int writes = 500;

        inParallel(threads, t -> {
            UnsafeBuffer buffer = new UnsafeBuffer(new byte[16]);
            long address = GlobalAddress.of(0, (long) (t + 1) * CHUNK_LENGTH);
            for (int i = 0; i < reads; i++) {
                memory.read(address, buffer, 0, 16);
            }
            for (int i = 0; i < writes; i++) {
                memory.write(address, buffer, 0, 8);
            }
            memory.fetchAndAdd(address, 1);
        });

        assertEquals(new VerbSnapshot((long) threads * reads, (long) threads * writes, threads, 0,
                threads * (reads * 16L + writes * 8L + 8)), memory.counters().snapshot());
    }

    @Test
    void resetZeroesLaterSnapshotsAndKeepsEarlierThreadsExcluded() throws Exception {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long address = GlobalAddress.of(0, CHUNK_LENGTH);
        inParallel(3, t -> {
            UnsafeBuffer buffer = new UnsafeBuffer(new byte[32]);
            for (int i = 0; i < 100; i++) {
                memory.read(address, buffer, 0, 32);
            }
        });
        writeLong(memory, address, 5);
        assertEquals(new VerbSnapshot(300, 1, 0, 0, 300 * 32 + 8), memory.counters().snapshot());

        memory.counters().reset();
        assertEquals(VerbSnapshot.ZERO, memory.counters().snapshot());

        inParallel(1, t -> {
            UnsafeBuffer buffer = new UnsafeBuffer(new byte[24]);
            for (int i = 0; i < 7; i++) {
                memory.read(address, buffer, 0, 24);
            }
        });
        memory.fetchAndAdd(address, 1);
        assertEquals(new VerbSnapshot(7, 0, 1, 0, 7 * 24 + 8), memory.counters().snapshot());
    }

    @Test
    void injectedLatencyDelaysEveryVerb() {
        long latencyNs = 200_000;
        int reads = 20;
        Fabric fabric = fabric(latencyNs);
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[8]);

        long start = System.nanoTime();
        for (int i = 0; i < reads; i++) {
            memory.read(GlobalAddress.of(0, CHUNK_LENGTH), buffer, 0, 8);
        }
        long elapsed = System.nanoTime() - start;

        assertTrue(elapsed >= reads * latencyNs, reads + " reads took " + elapsed + " ns, less than " + reads + " x " + latencyNs);
    }
}
