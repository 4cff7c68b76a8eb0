package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

/** The load a compute node measures per partition: counts, and rates over complete windows, also under concurrent adds. */
class PartitionLoadTest {
    private static final long SECOND = 1_000_000_000L;

    @Test
    void aPartitionsRateIsItsOperationsOverTheLastCompleteWindow() {
        PartitionLoad load = new PartitionLoad(4, Duration.ofSeconds(10), 0);
        load.add(1, 50);
        load.add(3, 20);
        assertFalse(load.roll(10 * SECOND - 1), "the window is not complete yet");
        assertTrue(Double.isNaN(load.rate(1)), "no rate before the first window closed");
        assertEquals(PartitionLoad.Measured.NONE, load.last(List.of(1)), "nor a window");
        assertTrue(load.roll(10 * SECOND));
        assertEquals(5.0, load.rate(1), 1e-9);
        assertEquals(2.0, load.rate(3), 1e-9);
        assertEquals(0.0, load.rate(0), 1e-9);
        load.add(1, 30);
        assertFalse(load.roll(15 * SECOND), "the next window opened at 10 s");
        assertEquals(5.0, load.rate(1), 1e-9, "the last complete window's rate stays until the next closes");
        // A window closed late (a slow tick) spreads its operations over the time it really lasted.
        assertTrue(load.roll(25 * SECOND));
        assertEquals(2.0, load.rate(1), 1e-9);
        assertEquals(0.0, load.rate(3), 1e-9, "no operation in this window");
        assertEquals(80, load.operations(1), "the count goes on over windows");
        assertEquals(Duration.ofSeconds(10), load.window());
        assertEquals(new PartitionLoad.Measured(List.of(2.0, 0.0), 15.0), load.last(List.of(1, 3)),
                "the rates of the partitions asked for, in their order, over the 15 s the window lasted");
    }

    private static long total(PartitionLoad load) {
        long total = 0;
        for (int p = 0; p < load.partitions(); p++) {
            total += load.operations(p);
        }
        return total;
    }

    @Test
    void badSizesAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new PartitionLoad(0, Duration.ofSeconds(1), 0));
        IllegalArgumentException zero = assertThrows(IllegalArgumentException.class,
                () -> new PartitionLoad(4, Duration.ZERO, 0));
        assertTrue(zero.getMessage().contains("dex.compute.load-window"), zero.getMessage());
    }

    /**
     * Workers add from four threads while one thread rolls 200 windows of one second (its own clock), then they stop
     * and a last window closes: every operation counts in exactly one window, so the windows' rates times their length
     * add up, per partition, to what the workers added, and so does the count.
     */
    @Test
    void concurrentAddsCountInExactlyOneWindowEach() throws Exception {
        int partitions = 16;
        int threads = 4;
        PartitionLoad load = new PartitionLoad(partitions, Duration.ofSeconds(1), 0);
        long[][] added = new long[threads][partitions];
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch started = new CountDownLatch(threads);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            long[] mine = added[t];
            Thread worker = new Thread(() -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                started.countDown();
                while (!stop.get()) {
                    int p = random.nextInt(partitions);
                    int count = 1 + random.nextInt(64);
                    load.add(p, count);
                    mine[p] += count;
                }
            }, "load-adder-" + t);
            workers.add(worker);
            worker.start();
        }
        assertTrue(started.await(10, TimeUnit.SECONDS));
        double[] seen = new double[partitions];
        long now = 0;
        for (int w = 0; w < 200; w++) {
            // Each window takes some adds: the rolls interleave with the workers.
            long before = total(load);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (total(load) == before && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertTrue(total(load) > before, "the workers add while windows roll");
            now += SECOND;
            assertTrue(load.roll(now));
            for (int p = 0; p < partitions; p++) {
                seen[p] += load.rate(p);
            }
        }
        stop.set(true);
        for (Thread worker : workers) {
            worker.join(TimeUnit.SECONDS.toMillis(30));
            assertFalse(worker.isAlive(), worker.getName() + " stopped");
        }
        now += SECOND;
        assertTrue(load.roll(now), "the last window takes what came after the previous roll");
        for (int p = 0; p < partitions; p++) {
            seen[p] += load.rate(p);
        }
        for (int p = 0; p < partitions; p++) {
            long expected = 0;
            for (long[] mine : added) {
                expected += mine[p];
            }
            assertEquals(expected, load.operations(p), "partition " + p + "'s count");
            assertEquals(expected, seen[p], 1e-6, "partition " + p + "'s operations over its windows");
        }
    }
}
