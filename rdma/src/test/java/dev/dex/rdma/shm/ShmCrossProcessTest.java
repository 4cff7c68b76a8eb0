package dev.dex.rdma.shm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * Two JVMs share one {@code shm} region: this one exports it and connects, a child ({@link ShmCasWorker})
 * connects by file name alone. Everything the child does goes through its own mapping while the exporter
 * does nothing, so what this JVM observes proves the verbs one-sided and the atomics atomic across
 * processes.
 */
class ShmCrossProcessTest {
    private static final int CHUNK_LENGTH = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION_LENGTH = 4L * CHUNK_LENGTH;
    private static final int CHILD_INCREMENTS = 200_000;
    private static final int PARENT_INCREMENTS = 200_000;
    private static final long TIMEOUT_NS = TimeUnit.SECONDS.toNanos(30);

    @TempDir(factory = ShmTempDirFactory.class)
    Path directory;

    @Test
    void casIncrementsOfTwoProcessesOnOneWordAllLandAndNeverGoBackwards() throws Exception {
        Path log = Path.of(System.getProperty("basedir", System.getProperty("user.dir")), "target", "shm-cas-worker.log");
        Files.createDirectories(log.getParent());
        try (ShmFabric fabric = new ShmFabric(directory);
                ExportedRegion exported = fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);
                RemoteMemory memory = fabric.connect(0)) {
            long area = memory.chunkAllocator().allocateChunk(0);
            long counter = area + ShmCasWorker.COUNTER_OFFSET;
            Process child = new ProcessBuilder(
                    Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Xmx64m", "-XX:+UseSerialGC",
                    "-cp", System.getProperty("java.class.path"),
                    ShmCasWorker.class.getName(),
                    directory.toString(), "0", Long.toString(GlobalAddress.offset(area)), Integer.toString(CHILD_INCREMENTS))
                    .redirectErrorStream(true)
                    .redirectOutput(log.toFile())
                    .start();
            try {
                awaitWord(memory, area + ShmCasWorker.READY_OFFSET, child, log);

                byte[] expected = new byte[ShmCasWorker.PATTERN_LENGTH];
                for (int i = 0; i < expected.length; i++) {
                    expected[i] = ShmCasWorker.patternByte(i);
                }
                UnsafeBuffer pattern = new UnsafeBuffer(new byte[ShmCasWorker.PATTERN_LENGTH]);
                memory.read(area + ShmCasWorker.PATTERN_OFFSET, pattern, 0, ShmCasWorker.PATTERN_LENGTH);
                assertArrayEquals(expected, pattern.byteArray(), () -> "pattern the child wrote\n" + read(log));

                writeLong(memory, area + ShmCasWorker.GO_OFFSET, 1);
                UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
                long last = 0;
                for (int i = 0; i < PARENT_INCREMENTS; i++) {
                    while (true) {
                        memory.read(counter, word, 0, Long.BYTES);
                        long old = word.getLong(0);
                        last = checkNotBelow(last, old, log);
                        long found = memory.compareAndSwap(counter, old, old + 1);
                        if (found == old) {
                            break;
                        }
                        last = checkNotBelow(last, found, log);
                    }
                }
                long total = (long) CHILD_INCREMENTS + PARENT_INCREMENTS;
                long deadline = System.nanoTime() + TIMEOUT_NS;
                while (child.isAlive() && last < total && System.nanoTime() < deadline) {
                    memory.read(counter, word, 0, Long.BYTES);
                    last = checkNotBelow(last, word.getLong(0), log);
                }

                assertTrue(child.waitFor(TIMEOUT_NS, TimeUnit.NANOSECONDS), () -> "child still running\n" + read(log));
                assertEquals(0, child.exitValue(), () -> "child exit code\n" + read(log));
                assertEquals(total, readLong(memory, counter), () -> "counter through this JVM's client\n" + read(log));
                assertEquals(total, exported.region().getLongVolatile(GlobalAddress.offset(counter)),
                        () -> "counter through the exporter's mapping\n" + read(log));
            } finally {
                child.destroyForcibly();
                child.waitFor(TIMEOUT_NS, TimeUnit.NANOSECONDS);
            }
        }
    }

    private static void awaitWord(RemoteMemory memory, long address, Process child, Path log) throws InterruptedException {
        long deadline = System.nanoTime() + TIMEOUT_NS;
        while (readLong(memory, address) == 0) {
            if (!child.isAlive()) {
                fail("child exited with " + child.exitValue() + " before raising its flag\n" + read(log));
            }
            if (System.nanoTime() > deadline) {
                fail("child raised no flag within " + TIMEOUT_NS / 1_000_000 + " ms\n" + read(log));
            }
            Thread.sleep(1);
        }
    }

    private static long checkNotBelow(long last, long value, Path log) {
        if (value < last) {
            fail("counter went back from " + last + " to " + value + "\n" + read(log));
        }
        return value;
    }

    private static long readLong(RemoteMemory memory, long address) {
        UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
        memory.read(address, word, 0, Long.BYTES);
        return word.getLong(0);
    }

    private static void writeLong(RemoteMemory memory, long address, long value) {
        UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
        word.putLong(0, value);
        memory.write(address, word, 0, Long.BYTES);
    }

    private static String read(Path log) {
        try {
            return "child output (" + log + "):\n" + Files.readString(log, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "child output unreadable at " + log + ": " + e;
        }
    }
}
