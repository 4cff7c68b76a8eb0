package dev.dex.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CyclicBarrier;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The first half of the behaviour every {@link Fabric} transport promises: reads, writes and atomics, with the
 * fixture and helpers the whole contract shares. {@link RemoteMemoryContractTest} adds the other half (chunk
 * allocation, errors, counters, latency); a transport's test extends that one.
 */
public abstract class RemoteMemoryVerbContract {
    protected static final int CHUNK_LENGTH = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    protected static final int CHUNKS = 16;
    protected static final long REGION_LENGTH = (long) CHUNKS * CHUNK_LENGTH;

    private static final long THREAD_TIMEOUT_MS = 30_000;

    private final Deque<AutoCloseable> resources = new ArrayDeque<>();

    /** A new fabric of the transport under test, injecting {@code latencyNs} before every verb. */
    protected abstract Fabric newFabric(long latencyNs);

    protected final Fabric fabric() {
        return fabric(0);
    }

    protected final Fabric fabric(long latencyNs) {
        return closeAfterTest(newFabric(latencyNs));
    }

    protected final ExportedRegion export(Fabric fabric, int serverId) {
        return export(fabric, serverId, REGION_LENGTH);
    }

    protected final ExportedRegion export(Fabric fabric, int serverId, long regionLength) {
        return closeAfterTest(fabric.export(serverId, regionLength, CHUNK_LENGTH));
    }

    protected final RemoteMemory connect(Fabric fabric, int... serverIds) {
        return closeAfterTest(fabric.connect(serverIds));
    }

    /** Closes {@code resource} after the test, before anything registered earlier. */
    protected final <T extends AutoCloseable> T closeAfterTest(T resource) {
        resources.push(resource);
        return resource;
    }

    @AfterEach
    protected final void closeEverything() throws Exception {
        Exception first = null;
        while (!resources.isEmpty()) {
            try {
                resources.pop().close();
            } catch (Exception e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    // ---- reads and writes

    @Test
    void writeThenReadReturnsTheWrittenBytesAndTouchesNothingElse() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        byte[] expected = readBytes(memory, 0, 0, (int) REGION_LENGTH);
        long[][] offsetsAndLengths = {
            {RegionHeaderDescriptor.ROOT_AREA_OFFSET, 1},
            {RegionHeaderDescriptor.ROOT_AREA_OFFSET + 1, 7},
            {CHUNK_LENGTH, 8},
            {CHUNK_LENGTH + 8, 16},
            {CHUNK_LENGTH + 3, 13},
            {2L * CHUNK_LENGTH - 100, 200},
            {3L * CHUNK_LENGTH, CHUNK_LENGTH},
            {4L * CHUNK_LENGTH + 5, 3L * CHUNK_LENGTH},
            {REGION_LENGTH - 24, 24},
            {REGION_LENGTH - 1, 1},
        };
        int seed = 1;
        for (long[] range : offsetsAndLengths) {
            int offset = (int) range[0];
            int length = (int) range[1];
            byte[] bytes = pattern(length, seed++);
            memory.write(GlobalAddress.of(0, offset), new UnsafeBuffer(bytes), 0, length);
            System.arraycopy(bytes, 0, expected, offset, length);
            assertArrayEquals(bytes, readBytes(memory, 0, offset, length), "read back [" + offset + ", +" + length + ")");
        }
        assertArrayEquals(expected, readBytes(memory, 0, 0, (int) REGION_LENGTH), "whole region after every write");
    }

    @Test
    void readAndWriteHonourTheBufferOffsets() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        byte[] source = pattern(64, 7);
        memory.write(GlobalAddress.of(0, CHUNK_LENGTH), new UnsafeBuffer(source), 10, 30);

        UnsafeBuffer dst = new UnsafeBuffer(new byte[50]);
        memory.read(GlobalAddress.of(0, CHUNK_LENGTH), dst, 5, 30);

        byte[] expected = new byte[50];
        System.arraycopy(source, 10, expected, 5, 30);
        assertArrayEquals(expected, dst.byteArray());
    }

    @Test
    void readSpanningAChunkBoundaryReturnsTheBytesOfBothChunks() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        byte[] tail = pattern(40, 11);
        byte[] head = pattern(60, 12);
        memory.write(GlobalAddress.of(0, 2L * CHUNK_LENGTH - tail.length), new UnsafeBuffer(tail), 0, tail.length);
        memory.write(GlobalAddress.of(0, 2L * CHUNK_LENGTH), new UnsafeBuffer(head), 0, head.length);

        byte[] spanning = readBytes(memory, 0, 2L * CHUNK_LENGTH - tail.length, tail.length + head.length);

        byte[] expected = new byte[tail.length + head.length];
        System.arraycopy(tail, 0, expected, 0, tail.length);
        System.arraycopy(head, 0, expected, tail.length, head.length);
        assertArrayEquals(expected, spanning);
    }

    @Test
    void alignedEightAndSixteenByteReadsReturnWholeWords() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long base = GlobalAddress.of(0, CHUNK_LENGTH);
        long[] words = {0x0102030405060708L, 0x1112131415161718L, 0x2122232425262728L, 0xF1F2F3F4F5F6F7F8L};
        for (int i = 0; i < words.length; i++) {
            writeLong(memory, base + 8L * i, words[i]);
        }

        for (int i = 0; i < words.length; i++) {
            assertEquals(words[i], readLong(memory, base + 8L * i), "8-byte read of word " + i);
        }
        UnsafeBuffer pair = new UnsafeBuffer(new byte[16]);
        memory.read(base + 8, pair, 0, 16);
        assertEquals(words[1], pair.getLong(0), "16-byte read at an 8-aligned offset, first word");
        assertEquals(words[2], pair.getLong(8), "16-byte read at an 8-aligned offset, second word");
        memory.read(base + 16, pair, 0, 16);
        assertEquals(words[2], pair.getLong(0), "16-byte read at a 16-aligned offset, first word");
        assertEquals(words[3], pair.getLong(8), "16-byte read at a 16-aligned offset, second word");
        assertEquals(0x1516171801020304L, readLong(memory, base + 4), "8-byte read straddling two words");
    }

    @Test
    void freshRegionHasAFormattedHeaderAndZeroesEverywhereElse() {
        Fabric fabric = fabric();
        ExportedRegion exported = export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);

        assertEquals(REGION_LENGTH, exported.region().length());
        assertEquals(RegionHeaderDescriptor.MAGIC, readLong(memory, GlobalAddress.of(0, RegionHeaderDescriptor.MAGIC_OFFSET)));
        assertEquals(REGION_LENGTH, readLong(memory, GlobalAddress.of(0, RegionHeaderDescriptor.REGION_LENGTH_OFFSET)));
        assertEquals(CHUNK_LENGTH, readLong(memory, GlobalAddress.of(0, RegionHeaderDescriptor.CHUNK_LENGTH_OFFSET)));
        assertEquals(1, readLong(memory, GlobalAddress.of(0, RegionHeaderDescriptor.NEXT_CHUNK_OFFSET)));
        assertNotEquals(0, readLong(memory, GlobalAddress.of(0, RegionHeaderDescriptor.INCARNATION_OFFSET)),
                "a fresh region draws an incarnation");
        int rest = (int) REGION_LENGTH - RegionHeaderDescriptor.INCARNATION_OFFSET - Long.BYTES;
        assertArrayEquals(new byte[rest], readBytes(memory, 0, RegionHeaderDescriptor.INCARNATION_OFFSET + Long.BYTES, rest));
    }

    @Test
    void reexportAfterCloseStartsFromAZeroedRegion() {
        Fabric fabric = fabric();
        ExportedRegion first = fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);
        try (RemoteMemory memory = fabric.connect(0)) {
            memory.write(GlobalAddress.of(0, CHUNK_LENGTH), new UnsafeBuffer(pattern(CHUNK_LENGTH, 3)), 0, CHUNK_LENGTH);
            memory.chunkAllocator().allocateChunk(0);
        }
        first.close();

        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);

        assertArrayEquals(new byte[CHUNK_LENGTH], readBytes(memory, 0, CHUNK_LENGTH, CHUNK_LENGTH));
        assertEquals(GlobalAddress.of(0, CHUNK_LENGTH), memory.chunkAllocator().allocateChunk(0));
    }

    @Test
    void eachServerKeepsItsOwnBytes() {
        Fabric fabric = fabric();
        ExportedRegion server0 = export(fabric, 0);
        ExportedRegion server1 = export(fabric, 1);
        RemoteMemory memory = connect(fabric, 0, 1);

        writeLong(memory, GlobalAddress.of(0, CHUNK_LENGTH), 100);
        writeLong(memory, GlobalAddress.of(1, CHUNK_LENGTH), 200);
        byte[] bytes = pattern(300, 5);
        memory.write(GlobalAddress.of(1, 2L * CHUNK_LENGTH + 1), new UnsafeBuffer(bytes), 0, bytes.length);

        assertEquals(100, readLong(memory, GlobalAddress.of(0, CHUNK_LENGTH)));
        assertEquals(200, readLong(memory, GlobalAddress.of(1, CHUNK_LENGTH)));
        assertArrayEquals(bytes, readBytes(memory, 1, 2L * CHUNK_LENGTH + 1, bytes.length));
        assertArrayEquals(new byte[bytes.length], readBytes(memory, 0, 2L * CHUNK_LENGTH + 1, bytes.length));
        assertEquals(100, server0.region().getLongVolatile(CHUNK_LENGTH));
        assertEquals(200, server1.region().getLongVolatile(CHUNK_LENGTH));
    }

    @Test
    void memoryServerIdsAreTheConnectedOnesAscending() {
        Fabric fabric = fabric();
        export(fabric, 0);
        export(fabric, 2);
        export(fabric, 5);

        assertArrayEquals(new int[] {0, 2, 5}, connect(fabric, 5, 0, 2).memoryServerIds());
        assertArrayEquals(new int[] {2}, connect(fabric, 2, 2).memoryServerIds(), "a repeated id connects once");
    }

    @Test
    void clientsAndTheExporterOfARegionSeeEachOthersWrites() {
        Fabric fabric = fabric();
        ExportedRegion exported = export(fabric, 0);
        RemoteMemory writer = connect(fabric, 0);
        RemoteMemory reader = connect(fabric, 0);
        byte[] bytes = pattern(100, 9);

        writer.write(GlobalAddress.of(0, CHUNK_LENGTH), new UnsafeBuffer(bytes), 0, bytes.length);
        assertArrayEquals(bytes, readBytes(reader, 0, CHUNK_LENGTH, bytes.length), "another client");
        UnsafeBuffer seenByExporter = new UnsafeBuffer(new byte[bytes.length]);
        exported.region().getBytes(CHUNK_LENGTH, seenByExporter, 0, bytes.length);
        assertArrayEquals(bytes, seenByExporter.byteArray(), "the exporter");

        exported.region().putLongVolatile(2L * CHUNK_LENGTH, 42);
        assertEquals(42, readLong(writer, GlobalAddress.of(0, 2L * CHUNK_LENGTH)), "a client, after the exporter wrote");
    }

    @Test
    void closingOneClientLeavesTheOthersWorking() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory survivor = connect(fabric, 0);
        RemoteMemory closed = fabric.connect(0);
        writeLong(closed, GlobalAddress.of(0, CHUNK_LENGTH), 77);

        closed.close();

        assertEquals(77, readLong(survivor, GlobalAddress.of(0, CHUNK_LENGTH)));
        assertEquals(77, survivor.compareAndSwap(GlobalAddress.of(0, CHUNK_LENGTH), 77, 78));
    }

    // ---- atomics

    @Test
    void compareAndSwapThatMatchesStoresTheDesiredValueAndReturnsTheExpectedOne() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long word = GlobalAddress.of(0, CHUNK_LENGTH + 8);
        writeLong(memory, word, 10);

        assertEquals(10, memory.compareAndSwap(word, 10, -3));

        assertEquals(-3, readLong(memory, word));
    }

    @Test
    void compareAndSwapThatMissesReturnsTheCurrentValueAndStoresNothing() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long word = GlobalAddress.of(0, CHUNK_LENGTH + 8);
        writeLong(memory, word, 10);

        assertEquals(10, memory.compareAndSwap(word, 11, 99));

        assertEquals(10, readLong(memory, word));
        assertEquals(0, readLong(memory, word - 8), "word before");
        assertEquals(0, readLong(memory, word + 8), "word after");
    }

    @Test
    void fetchAndAddReturnsThePreviousValueAndAddsTheDelta() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long word = GlobalAddress.of(0, CHUNK_LENGTH);

        assertEquals(0, memory.fetchAndAdd(word, 5));
        assertEquals(5, memory.fetchAndAdd(word, -2));
        assertEquals(3, readLong(memory, word));

        writeLong(memory, word, Long.MAX_VALUE);
        assertEquals(Long.MAX_VALUE, memory.fetchAndAdd(word, 1));
        assertEquals(Long.MIN_VALUE, readLong(memory, word), "wraps like a 64-bit two's complement add");
    }

    @Test
    void concurrentCompareAndSwapIncrementsLoseNoUpdate() throws Exception {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long counter = GlobalAddress.of(0, CHUNK_LENGTH);
        int threads = 4;
        int increments = 20_000;

        inParallel(threads, t -> {
            UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
            long last = Long.MIN_VALUE;
            for (int i = 0; i < increments; i++) {
                while (true) {
                    memory.read(counter, word, 0, Long.BYTES);
                    long old = word.getLong(0);
                    assertTrue(old >= last, "counter went back from " + last + " to " + old);
                    last = old;
                    if (memory.compareAndSwap(counter, old, old + 1) == old) {
                        break;
                    }
                }
            }
        });

        assertEquals((long) threads * increments, readLong(memory, counter));
    }

    @Test
    void concurrentFetchAndAddHandsOutEveryPreviousValueOnce() throws Exception {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long counter = GlobalAddress.of(0, CHUNK_LENGTH);
        int threads = 4;
        int increments = 20_000;
        long[][] previous = new long[threads][increments];

        inParallel(threads, t -> {
            for (int i = 0; i < increments; i++) {
                previous[t][i] = memory.fetchAndAdd(counter, 1);
            }
        });

        int total = threads * increments;
        assertEquals(total, readLong(memory, counter));
        BitSet seen = new BitSet(total);
        for (long[] values : previous) {
            for (long value : values) {
                assertTrue(value >= 0 && value < total, "previous value " + value + " out of range");
                assertFalse(seen.get((int) value), "previous value " + value + " returned twice");
                seen.set((int) value);
            }
        }
        assertEquals(total, seen.cardinality());
    }

    // ---- helpers

    /** Bytes of a recognisable pattern: none is zero, and different seeds differ. */
    protected static byte[] pattern(int length, int seed) {
        byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++) {
            bytes[i] = (byte) ((i * 31 + seed * 17) % 255 + 1);
        }
        return bytes;
    }

    protected static byte[] readBytes(RemoteMemory memory, int serverId, long offset, int length) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[length]);
        memory.read(GlobalAddress.of(serverId, offset), buffer, 0, length);
        return buffer.byteArray();
    }

    protected static long readLong(RemoteMemory memory, long address) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        memory.read(address, buffer, 0, Long.BYTES);
        return buffer.getLong(0);
    }

    protected static void writeLong(RemoteMemory memory, long address, long value) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        buffer.putLong(0, value);
        memory.write(address, buffer, 0, Long.BYTES);
    }

    /** A task of one thread of {@link #inParallel}; {@code thread} numbers the threads from 0. */
    @FunctionalInterface
    protected interface ThreadBody {
        void run(int thread) throws Exception;
    }

    /**
     * Runs {@code body} on {@code threads} new threads that start together, waits for all of them, and
     * rethrows their failures (assertion errors included) as one.
     */
    protected static void inParallel(int threads, ThreadBody body) throws InterruptedException {
        CyclicBarrier start = new CyclicBarrier(threads);
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        Thread[] running = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int thread = t;
            running[t] = new Thread(() -> {
                try {
                    start.await();
                    body.run(thread);
                } catch (Throwable e) {
                    failures.add(e);
                }
            }, "contract-" + t);
            running[t].start();
        }
        for (Thread thread : running) {
            thread.join(THREAD_TIMEOUT_MS);
            if (thread.isAlive()) {
                fail(thread.getName() + " still running after " + THREAD_TIMEOUT_MS + " ms");
            }
        }
        if (!failures.isEmpty()) {
            AssertionError error = new AssertionError(failures.size() + " of " + threads + " threads failed", failures.get(0));
            failures.subList(1, failures.size()).forEach(error::addSuppressed);
            throw error;
        }
    }
}
