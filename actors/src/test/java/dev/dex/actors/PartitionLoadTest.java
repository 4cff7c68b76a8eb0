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
        assertTrue(load.rates(List.of(1)).isEmpty() && load.measuredWindowSeconds() == 0, "nor a window");
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
        assertEquals(10.0, load.measuredWindowSeconds(), 0.0);
        assertEquals(List.of(2.0, 0.0), load.rates(List.of(1, 3)), "the rates of the partitions asked for, in their order");
    }

    @Test
    void badSizesAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new PartitionLoad(0, Duration.ofSeconds(1), 0));
        IllegalArgumentException zero = assertThrows(IllegalArgumentException.class,
                () -> new PartitionLoad(4, Duration.ZERO, 0));
        assertTrue(zero.getMessage().contains("dex.compute.load-window"), zero.getMessage());
    }

    /**
     * Workers add from four threads while one thread rolls windows of one second (its own clock): every operation
     * counts in exactly one window, so the windows' rates times their length add up, per partition, to what the
     * workers added, and so does the count.
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
                for (int i = 0; i < 200_000 && !stop.get(); i++) {
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
        int windows = 0;
        while (workers.stream().anyMatch(Thread::isAlive)) {
            now += SECOND;
            assertTrue(load.roll(now));
            windows++;
            for (int p = 0; p < partitions; p++) {
                seen[p] += load.rate(p);
            }
        }
        for (Thread worker : workers) {
            worker.join(TimeUnit.SECONDS.toMillis(30));
        }
        now += SECOND;
        assertTrue(load.roll(now), "the last window takes what came after the previous roll");
        for (int p = 0; p < partitions; p++) {
            seen[p] += load.rate(p);
        }
        assertTrue(windows > 1, "the adds spread over several windows: " + windows);
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
