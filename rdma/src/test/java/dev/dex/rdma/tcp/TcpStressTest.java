package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * Many threads issue reads, writes and compare-and-swaps through one client, each on a slot of its own that it
 * checks against its own model, while a proxy cuts every connection again and again. Every verb either completes
 * with the right result or fails with {@link FabricException} (a write or CAS that failed may or may not have
 * taken effect, and the model allows both); none hangs, none returns bytes that were never written, and the
 * client keeps working after each cut by reconnecting.
 */
class TcpStressTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final int THREADS = 6;
    private static final int SLOT = 1024;
    private static final long RUN_MILLIS = 3_000;
    private static final Duration VERB_TIMEOUT = Duration.ofSeconds(5);

    @Test
    void verbsUnderConnectionCutsCompleteRightOrFailClearlyAndNeverHang() throws Exception {
        try (TcpFabric memorySide = new TcpFabric(); TcpFabric computeSide = new TcpFabric(
                TcpSettings.DEFAULTS.withVerbTimeout(VERB_TIMEOUT), 0)) {
            ExportedRegion region = memorySide.export(0, 4L * CHUNK + (long) THREADS * 2 * SLOT, CHUNK);
            try (ChaosProxy proxy = new ChaosProxy(region.endpoint());
                 RemoteMemory memory = computeSide.connect(Map.of(0, proxy.endpoint()))) {
                AtomicBoolean running = new AtomicBoolean(true);
                AtomicLong completed = new AtomicLong();
                AtomicLong failed = new AtomicLong();
                ExecutorService threads = Executors.newFixedThreadPool(THREADS);
                List<Future<?>> workers = new ArrayList<>();
                for (int t = 0; t < THREADS; t++) {
                    int thread = t;
                    workers.add(threads.submit(() -> {
                        work(memory, thread, running, completed, failed);
                        return null;
                    }));
                }
                long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RUN_MILLIS);
                int cuts = 0;
                SplittableRandom random = new SplittableRandom(7);
                while (System.nanoTime() < end) {
                    Thread.sleep(20 + random.nextInt(60));
                    proxy.cutAll();
                    cuts++;
                }
                running.set(false);
                threads.shutdown();
                for (Future<?> worker : workers) {
                    worker.get(VERB_TIMEOUT.toSeconds() * 3, TimeUnit.SECONDS);
                }
                assertTrue(cuts >= 10, "the proxy cut the connections " + cuts + " times");
                assertTrue(failed.get() > 0, "cuts failed some verbs: " + failed.get());
                assertTrue(completed.get() > 10 * failed.get(), completed.get() + " verbs completed, " + failed.get() + " failed");

                // After the storm, a fresh verb on every thread's connection works.
                UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
                memory.read(GlobalAddress.of(0, CHUNK), word, 0, 8);
                assertEquals(region.region().getLongVolatile(CHUNK), word.getLong(0));
            }
        }
    }

    /** One thread's verbs on its slot: random bytes in the first half, a CAS counter at the start of the second. */
    private static void work(RemoteMemory memory, int thread, AtomicBoolean running, AtomicLong completed, AtomicLong failed) {
        SplittableRandom random = new SplittableRandom(thread);
        long slot = GlobalAddress.of(0, CHUNK + (long) thread * 2 * SLOT);
        long counter = slot + SLOT;
        byte[] model = new byte[SLOT];
        byte[] uncertain = null;
        long count = 0;
        boolean countUncertain = false;
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[SLOT]);
        while (running.get()) {
            long started = System.nanoTime();
            try {
                switch (random.nextInt(3)) {
                    case 0 -> {
                        buffer.setMemory(0, SLOT, (byte) 0);
                        memory.read(slot, buffer, 0, SLOT);
                        byte[] seen = Arrays.copyOf(buffer.byteArray(), SLOT);
                        if (uncertain != null && Arrays.equals(seen, uncertain)) {
                            model = uncertain;
                        } else {
                            assertArrayEquals(model, seen, "thread " + thread + " read bytes it never wrote last");
                        }
                        uncertain = null;
                    }
                    case 1 -> {
                        byte[] next = new byte[SLOT];
                        random.nextBytes(next);
                        uncertain = next;
                        memory.write(slot, new UnsafeBuffer(next), 0, SLOT);
                        model = next;
                        uncertain = null;
                    }
                    default -> {
                        long found = memory.compareAndSwap(counter, count, count + 1);
                        if (countUncertain && found == count + 1) {
                            count++;
                            found = memory.compareAndSwap(counter, count, count + 1);
                        }
                        assertEquals(count, found, "thread " + thread + "'s counter");
                        count++;
                        countUncertain = false;
                    }
                }
                completed.incrementAndGet();
            } catch (FabricException cut) {
                failed.incrementAndGet();
                countUncertain = true;
            }
            long took = System.nanoTime() - started;
            if (took > VERB_TIMEOUT.toNanos() + TimeUnit.SECONDS.toNanos(2)) {
                fail("a verb of thread " + thread + " took " + took / 1_000_000 + " ms");
            }
        }
    }
}
