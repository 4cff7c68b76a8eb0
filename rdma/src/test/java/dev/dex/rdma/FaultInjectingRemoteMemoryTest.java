package dev.dex.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.FaultPlan.Kind;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.testing.TestResources;

/** Which verbs a {@link FaultInjectingRemoteMemory} fails, whether they took effect, and its switch, on two local regions. */
class FaultInjectingRemoteMemoryTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    /** Words the tests write, past the region header. */
    private static final long FIRST_WORD = CHUNK;

    @AutoClose
    final TestResources resources = new TestResources();
    private RemoteMemory plain;

    @BeforeEach
    void twoMemoryServers() {
        LocalFabric fabric = resources.closeAfter(new LocalFabric());
        resources.closeAfter(fabric.export(0, 16L * CHUNK, CHUNK));
        resources.closeAfter(fabric.export(1, 16L * CHUNK, CHUNK));
        plain = resources.closeAfter(fabric.connect(0, 1));
    }

    private static long word(int server, int i) {
        return GlobalAddress.of(server, FIRST_WORD + 8L * i);
    }

    private static void writeLong(RemoteMemory memory, long address, long value) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        buffer.putLong(0, value, java.nio.ByteOrder.LITTLE_ENDIAN);
        memory.write(address, buffer, 0, Long.BYTES);
    }

    private FaultInjectingRemoteMemory inject(FaultPlan plan) {
        return new FaultInjectingRemoteMemory(plain, plan);
    }

    /**
     * A batch through the injector meets the same faults as single verbs (its verbs run through the injector's own, one
     * after the other): the chosen writes fail with the injected error and the batch's other verbs complete.
     */
    @Test
    void aBatchsVerbsMeetTheFaultsOfSingleVerbs() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withRate(1).withKinds(Kind.WRITE).withServer(1).withApplyFirst(0));
        writeLong(plain, word(0, 1), 11);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[16]);
        buffer.putLong(8, 42);
        VerbBatch batch = new VerbBatch();
        int read = batch.read(word(0, 1), buffer, 0, 8);
        int failing = batch.write(word(1, 1), buffer, 8, 8);
        int passing = batch.write(word(0, 2), buffer, 8, 8);
        int added = batch.fetchAndAdd(word(1, 3), 2);
        memory.submit(batch);

        assertEquals(11, buffer.getLong(0));
        assertTrue(batch.failure(failing) instanceof FabricException failure && failure.getMessage().contains("fault injected"),
                String.valueOf(batch.failure(failing)));
        assertEquals(0, plain.readLong(word(1, 1)), "the failed write was not applied");
        assertEquals(null, batch.failure(passing));
        assertEquals(42, plain.readLong(word(0, 2)));
        assertEquals(0, batch.value(added));
        assertEquals(null, batch.failure(read));
        assertEquals(1, memory.injected(Kind.WRITE));
    }

    @Test
    void theNthMatchingVerbFailsAndNoOther() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withNthVerb(5).withKinds(Kind.WRITE).withApplyFirst(0));
        List<Integer> failed = new ArrayList<>();
        for (int i = 1; i <= 10; i++) {
            memory.readLong(word(0, i)); // reads do not match, so they do not count
            try {
                writeLong(memory, word(0, i), 100 + i);
            } catch (FabricException e) {
                failed.add(i);
            }
        }
        assertEquals(List.of(5), failed);
        for (int i = 1; i <= 10; i++) {
            assertEquals(i == 5 ? 0 : 100 + i, plain.readLong(word(0, i)), "word " + i);
        }
        assertEquals(1, memory.injected(Kind.WRITE));
        assertEquals(1, memory.injected());
        assertEquals(0, memory.appliedBeforeFailing());
    }

    @Test
    void aBurstFailsTheNextMatchingVerbsOfTheThreadToo() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withNthVerb(3).withKinds(Kind.WRITE).withApplyFirst(0)
                .withBurst(3));
        List<Integer> failed = new ArrayList<>();
        for (int i = 1; i <= 10; i++) {
            try {
                writeLong(memory, word(0, i), 100 + i);
            } catch (FabricException e) {
                failed.add(i);
            }
        }
        assertEquals(List.of(3, 4, 5), failed, "the 3rd write and the two after it");
        assertEquals(3, memory.injected());
        assertThrows(IllegalArgumentException.class, () -> FaultPlan.none().withBurst(0));
    }

    @Test
    void theNthVerbFailsExactlyOnceAcrossThreads() throws Exception {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withNthVerb(3_000).withKinds(Kind.FAA));
        int threads = 4;
        int perThread = 1_000;
        AtomicLong failures = new AtomicLong();
        CyclicBarrier start = new CyclicBarrier(threads);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                done.add(pool.submit(() -> {
                    start.await();
                    for (int i = 0; i < perThread; i++) {
                        try {
                            memory.fetchAndAdd(word(1, 0), 1);
                        } catch (FabricException e) {
                            failures.incrementAndGet();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(30, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(1, failures.get());
        assertEquals(threads * perThread - 1, plain.readLong(word(1, 0)), "the failed fetch-and-add did not take effect");
        assertEquals(1, memory.injected(Kind.FAA));
    }

    @Test
    void onlyTheChosenKindsFail() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withRate(1).withKinds(Kind.WRITE));
        writeLong(plain, word(0, 0), 7);
        assertEquals(7, memory.readLong(word(0, 0)));
        assertEquals(7, memory.compareAndSwap(word(0, 0), 7, 8));
        assertEquals(8, memory.fetchAndAdd(word(0, 0), 1));
        assertThrows(FabricException.class, () -> writeLong(memory, word(0, 0), 1));
        assertEquals(1, memory.injected(Kind.WRITE));
        assertEquals(0, memory.injected(Kind.READ) + memory.injected(Kind.CAS) + memory.injected(Kind.FAA));
    }

    @Test
    void onlyTheChosenServersVerbsFail() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withRate(1).withServer(1));
        writeLong(memory, word(0, 0), 11);
        assertEquals(11, memory.readLong(word(0, 0)));
        assertEquals(11, memory.compareAndSwap(word(0, 0), 11, 12));
        assertThrows(FabricException.class, () -> memory.readLong(word(1, 0)));
        assertThrows(FabricException.class, () -> memory.fetchAndAdd(word(1, 0), 1));
        assertEquals(2, memory.injected());
    }

    @Test
    void aRateFailsAboutThatShareOfVerbsAndRepeatsWithItsSeed() {
        FaultPlan plan = FaultPlan.none().withRate(0.1).withKinds(Kind.READ).withSeed(42);
        long first = failedReads(inject(plan), 20_000);
        long again = failedReads(inject(plan), 20_000);
        long otherSeed = failedReads(inject(plan.withSeed(43)), 20_000);
        // Binomial(20000, 0.1): mean 2000, standard deviation 42; 1700..2300 is more than 7 deviations.
        assertTrue(first > 1_700 && first < 2_300, "failures " + first);
        assertEquals(first, again, "the same seed draws the same faults");
        assertTrue(otherSeed > 1_700 && otherSeed < 2_300, "failures " + otherSeed);
    }

    private static long failedReads(FaultInjectingRemoteMemory memory, int reads) {
        long failed = 0;
        for (int i = 0; i < reads; i++) {
            try {
                memory.readLong(word(0, i % 64));
            } catch (FabricException e) {
                failed++;
            }
        }
        assertEquals(failed, memory.injected(Kind.READ));
        return failed;
    }

    @Test
    void aWriteOrSwapAppliedFirstHasTakenEffectWhenItFails() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withRate(1).withKinds(Kind.WRITE, Kind.CAS).withApplyFirst(1));
        FabricException e = assertThrows(FabricException.class, () -> writeLong(memory, word(0, 1), 42));
        assertEquals(42, plain.readLong(word(0, 1)), "the write took effect, only its answer was lost");
        assertThrows(FabricException.class, () -> memory.compareAndSwap(word(0, 1), 42, 43));
        assertEquals(43, plain.readLong(word(0, 1)), "the swap took effect, only its answer was lost");
        assertEquals(2, memory.appliedBeforeFailing());
        assertSame(FabricException.class, e.getClass(), "what the real fabric throws, no subclass");
        assertTrue(e.getMessage().contains("memory server 0 did not answer a WRITE"), e.getMessage());
        assertTrue(e.getMessage().endsWith("the verb may or may not have taken effect"), e.getMessage());
    }

    @Test
    void aVerbThatFailsFirstHasNoEffect() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withRate(1).withApplyFirst(0));
        writeLong(plain, word(0, 2), 5);
        assertThrows(FabricException.class, () -> writeLong(memory, word(0, 2), 6));
        assertThrows(FabricException.class, () -> memory.compareAndSwap(word(0, 2), 5, 6));
        assertThrows(FabricException.class, () -> memory.fetchAndAdd(word(0, 2), 1));
        assertEquals(5, plain.readLong(word(0, 2)));
        assertEquals(0, memory.appliedBeforeFailing());
    }

    @Test
    void aFetchAndAddIsNeverAppliedBeforeFailing() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withRate(1).withKinds(Kind.FAA).withApplyFirst(1));
        assertThrows(FabricException.class, () -> memory.fetchAndAdd(word(0, 3), 1));
        assertEquals(0, plain.readLong(word(0, 3)));
        assertEquals(0, memory.appliedBeforeFailing());
    }

    @Test
    void switchedOffNothingFailsAndTheNthVerbIsNotCounted() {
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withNthVerb(2).withKinds(Kind.READ));
        memory.enabled(false);
        for (int i = 0; i < 5; i++) {
            memory.readLong(word(0, 0));
        }
        assertEquals(0, memory.injected());
        memory.enabled(true);
        memory.readLong(word(0, 0));
        assertThrows(FabricException.class, () -> memory.readLong(word(0, 0)), "the second read since the switch went on");
        memory.readLong(word(0, 0));
        assertEquals(1, memory.injected());
    }

    @Test
    void aMatchingVerbWaitsItsDelay() {
        long delay = TimeUnit.MILLISECONDS.toNanos(20);
        FaultInjectingRemoteMemory memory = inject(FaultPlan.none().withKinds(Kind.READ).withDelayNanos(delay));
        long start = System.nanoTime();
        memory.readLong(word(0, 0));
        assertTrue(System.nanoTime() - start >= delay, "a delayed read returns after its delay");
        assertEquals(0, memory.injected(), "a delay alone fails nothing");
    }
}
