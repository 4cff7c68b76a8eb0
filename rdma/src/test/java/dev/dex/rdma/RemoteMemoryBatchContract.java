package dev.dex.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.BitSet;
import java.util.Random;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

/**
 * What every transport promises of {@link VerbBatch batches} of verbs ({@link RemoteMemory#start}): each verb does what
 * it does alone, checked against a model of the region; a bad verb fails alone; the batch is ordered after the verbs
 * before it; atomics of many threads' batches lose nothing; each verb is counted; latency is paid once per batch where
 * the transport keeps verbs in flight together.
 */
public abstract class RemoteMemoryBatchContract extends RemoteMemoryVerbContract {
    private static final int SLOT = 64;
    private static final int SLOTS = (int) ((REGION_LENGTH - CHUNK_LENGTH) / SLOT);

    /** Whether the transport keeps a batch's verbs in flight together (pays injected latency once per batch). */
    protected boolean pipelinesBatches() {
        return true;
    }

    /**
     * Rounds of random batches (reads, writes, compare-and-swaps that match or miss, fetch-and-adds, each on a slot of
     * its own within the batch), every outcome checked against a model, then the whole region.
     */
    @Test
    void batchesOfMixedVerbsDoWhatEachVerbDoesAlone() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        byte[] model = new byte[(int) REGION_LENGTH];
        UnsafeBuffer modelView = new UnsafeBuffer(model);
        Random random = new Random(42);
        VerbBatch batch = new VerbBatch(4);
        UnsafeBuffer buffers = new UnsafeBuffer(new byte[64 * SLOT]);
        long reads = 0;
        long writes = 0;
        long atomics = 0;
        long bytes = 0;
        for (int round = 0; round < 60; round++) {
            batch.clear();
            int n = 1 + random.nextInt(40);
            BitSet used = new BitSet(SLOTS);
            long[] expectedValues = new long[n];
            byte[][] expectedReads = new byte[n][];
            for (int i = 0; i < n; i++) {
                int slot = random.nextInt(SLOTS);
                while (used.get(slot)) {
                    slot = (slot + 1) % SLOTS;
                }
                used.set(slot);
                int offset = CHUNK_LENGTH + slot * SLOT;
                long address = GlobalAddress.of(0, offset);
                long word = modelView.getLong(offset, java.nio.ByteOrder.LITTLE_ENDIAN);
                switch (random.nextInt(4)) {
                    case 0 -> {
                        int length = 8 + random.nextInt(SLOT - 8);
                        expectedReads[i] = java.util.Arrays.copyOfRange(model, offset, offset + length);
                        assertEquals(i, batch.read(address, buffers, i * SLOT, length));
                        reads++;
                        bytes += length;
                    }
                    case 1 -> {
                        int length = 8 + random.nextInt(SLOT - 8);
                        for (int b = 0; b < length; b++) {
                            byte value = (byte) random.nextInt();
                            buffers.putByte(i * SLOT + b, value);
                            model[offset + b] = value;
                        }
                        batch.write(address, buffers, i * SLOT, length);
                        writes++;
                        bytes += length;
                    }
                    case 2 -> {
                        boolean match = random.nextBoolean();
                        long desired = random.nextLong();
                        batch.compareAndSwap(address, match ? word : word + 1, desired);
                        expectedValues[i] = word;
                        if (match) {
                            modelView.putLong(offset, desired, java.nio.ByteOrder.LITTLE_ENDIAN);
                        }
                        atomics++;
                        bytes += 8;
                    }
                    default -> {
                        long delta = random.nextInt(1000) - 500;
                        batch.fetchAndAdd(address, delta);
                        expectedValues[i] = word;
                        modelView.putLong(offset, word + delta, java.nio.ByteOrder.LITTLE_ENDIAN);
                        atomics++;
                        bytes += 8;
                    }
                }
            }
            memory.submit(batch);
            assertEquals(n, batch.size());
            batch.throwIfFailed();
            for (int i = 0; i < n; i++) {
                if (batch.op(i) == VerbBatch.READ) {
                    byte[] got = new byte[expectedReads[i].length];
                    buffers.getBytes(i * SLOT, got);
                    assertArrayEquals(expectedReads[i], got, "round " + round + ", read " + i);
                } else if (batch.op(i) != VerbBatch.WRITE) {
                    assertEquals(expectedValues[i], batch.value(i), "round " + round + ", atomic " + i);
                }
            }
        }
        byte[] region = new byte[(int) (REGION_LENGTH - CHUNK_LENGTH)];
        memory.read(GlobalAddress.of(0, CHUNK_LENGTH), new UnsafeBuffer(region), 0, region.length);
        assertArrayEquals(java.util.Arrays.copyOfRange(model, CHUNK_LENGTH, model.length), region, "the region is the model");
        VerbSnapshot counted = memory.counters().snapshot();
        assertEquals(new VerbSnapshot(reads + 1, writes, atomics, 0, bytes + region.length), counted,
                "each verb of a batch counts as it would alone");
    }

    @Test
    void aBatchComesAfterTheVerbsBeforeItAndBeforeTheVerbsAfterIt() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
        VerbBatch batch = new VerbBatch();
        for (int i = 0; i < 50; i++) {
            long address = GlobalAddress.of(0, CHUNK_LENGTH + (i % 8) * 8L);
            writeLong(memory, address, i);
            batch.clear();
            int read = batch.read(address, word, 0, 8);
            int add = batch.fetchAndAdd(GlobalAddress.of(0, CHUNK_LENGTH + 512), 1);
            memory.submit(batch);
            assertNull(batch.failure(read));
            assertEquals(i, word.getLong(0), "the batch's read sees the write before it");
            assertEquals(i, batch.value(add));
            batch.clear();
            UnsafeBuffer value = new UnsafeBuffer(new byte[8]);
            value.putLong(0, -i);
            batch.write(address, value, 0, 8);
            memory.submit(batch);
            assertEquals(-i, memory.readLong(address), "a read after the batch sees its write");
        }
    }

    /** Bad verbs fail with the exception they throw alone, each in its own slot; the others complete. */
    @Test
    void aBadVerbFailsAloneAndTheOthersComplete() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        writeLong(memory, GlobalAddress.of(0, CHUNK_LENGTH), 7);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[64]);
        VerbBatch batch = new VerbBatch();
        int outside = batch.read(GlobalAddress.of(0, REGION_LENGTH - 4), buffer, 0, 8);
        int good = batch.read(GlobalAddress.of(0, CHUNK_LENGTH), buffer, 8, 8);
        int misaligned = batch.compareAndSwap(GlobalAddress.of(0, CHUNK_LENGTH + 4), 0, 1);
        int unconnected = batch.fetchAndAdd(GlobalAddress.of(3, CHUNK_LENGTH), 1);
        int added = batch.fetchAndAdd(GlobalAddress.of(0, CHUNK_LENGTH + 8), 5);
        int tooSmall = batch.read(GlobalAddress.of(0, CHUNK_LENGTH), new UnsafeBuffer(new byte[4]), 0, 8);
        memory.submit(batch);

        assertInstanceOf(IllegalArgumentException.class, batch.failure(outside));
        assertInstanceOf(IllegalArgumentException.class, batch.failure(misaligned));
        assertInstanceOf(IllegalArgumentException.class, batch.failure(unconnected));
        assertThrows(IllegalArgumentException.class, () -> batch.value(misaligned));
        assertNull(batch.failure(good));
        assertEquals(7, buffer.getLong(8));
        assertEquals(0, batch.value(added));
        assertEquals(5, memory.readLong(GlobalAddress.of(0, CHUNK_LENGTH + 8)));
        assertInstanceOf(IllegalArgumentException.class, batch.firstFailure());
        assertTrue(batch.failure(tooSmall) instanceof IndexOutOfBoundsException || batch.failure(tooSmall) instanceof IllegalArgumentException,
                "a buffer too small for its read fails that read alone: " + batch.failure(tooSmall));
        assertThrows(IllegalStateException.class, () -> memory.start(batch), "a batch is started once, then cleared");
        assertThrows(IllegalStateException.class, () -> batch.read(GlobalAddress.of(0, CHUNK_LENGTH), buffer, 0, 8),
                "a started batch takes no verb until cleared");
    }

    /** Threads whose batches all add to one counter: every previous value is handed out exactly once. */
    @Test
    void fetchAndAddsInManyThreadsBatchesHandOutEveryValueOnce() throws Exception {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long counter = GlobalAddress.of(0, CHUNK_LENGTH);
        int threads = 4;
        int batches = 150;
        int perBatch = 8;
        BitSet seen = new BitSet();
        inParallel(threads, t -> {
            VerbBatch batch = new VerbBatch(perBatch);
            long[] mine = new long[batches * perBatch];
            for (int b = 0; b < batches; b++) {
                batch.clear();
                for (int i = 0; i < perBatch; i++) {
                    batch.fetchAndAdd(counter, 1);
                }
                memory.submit(batch);
                for (int i = 0; i < perBatch; i++) {
                    mine[b * perBatch + i] = batch.value(i);
                }
            }
            synchronized (seen) {
                for (long value : mine) {
                    assertTrue(value >= 0 && value < (long) threads * batches * perBatch, "value " + value);
                    assertTrue(!seen.get((int) value), "value " + value + " handed out twice");
                    seen.set((int) value);
                }
            }
        });
        assertEquals(threads * batches * perBatch, seen.cardinality());
        assertEquals(threads * batches * perBatch, memory.readLong(counter));
    }

    /** Reads and writes of zero bytes complete and count, as alone, also in a batch that holds nothing else. */
    @Test
    void zeroByteReadsAndWritesCompleteAndCount() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        VerbSnapshot before = memory.counters().snapshot();
        VerbBatch batch = new VerbBatch();
        int read = batch.read(GlobalAddress.of(0, CHUNK_LENGTH), new UnsafeBuffer(new byte[8]), 0, 0);
        int write = batch.write(GlobalAddress.of(0, CHUNK_LENGTH), new UnsafeBuffer(new byte[8]), 0, 0);
        memory.submit(batch);

        assertNull(batch.failure(read));
        assertNull(batch.failure(write));
        VerbSnapshot counted = memory.counters().snapshot().minus(before);
        assertEquals(1, counted.reads());
        assertEquals(1, counted.writes());
    }

    /** An empty batch completes at once; awaiting twice, or without a start, changes nothing. */
    @Test
    void anEmptyOrAwaitedBatchIsHarmless() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        VerbBatch batch = new VerbBatch();
        memory.submit(batch);
        batch.await();
        assertEquals(0, batch.size());
        assertNull(batch.firstFailure());
        batch.clear();
        batch.fetchAndAdd(GlobalAddress.of(0, CHUNK_LENGTH), 3);
        memory.submit(batch);
        batch.await();
        assertEquals(3, memory.readLong(GlobalAddress.of(0, CHUNK_LENGTH)), "awaited twice, applied once");
    }

    /**
     * Where the transport keeps a batch's verbs in flight together, a batch of 32 reads pays the injected latency about
     * once, not 32 times: it takes less than half of what 32 single reads take.
     */
    @Test
    void aPipelinedBatchPaysTheLatencyOnce() {
        org.junit.jupiter.api.Assumptions.assumeTrue(pipelinesBatches(),
                "this transport runs a batch's verbs one after the other (RemoteMemory's default)");
        long latency = 2_000_000;
        Fabric fabric = fabric(latency);
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[32 * 8]);
        VerbBatch batch = new VerbBatch();
        for (int i = 0; i < 32; i++) {
            batch.read(GlobalAddress.of(0, CHUNK_LENGTH + i * 8L), buffer, i * 8, 8);
        }
        long start = System.nanoTime();
        memory.submit(batch);
        long took = System.nanoTime() - start;
        batch.throwIfFailed();
        assertTrue(took < 32 * latency / 2, "32 reads in one batch took " + took / 1_000_000 + " ms at 2 ms of latency each");
    }
}
