package dev.dex.rdma.replica;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * Clients of a replicated server write, lock and count against a model while its primary dies, a replica is added and
 * copied under their writes, and the primary dies again (so the copied replica serves). Each client is one thread with
 * a connection of its own, as compute nodes are; every failed verb is retried, as the engine does. Afterwards:
 * <ul>
 *   <li>every word holds its last acknowledged write, or a later one whose outcome its writer did not learn;</li>
 *   <li>a counter changed only under a lock counts every critical section exactly once, and no two clients ever held
 *       the lock at once (a holder keeps it across both failovers);</li>
 *   <li>a fetch-and-add counter lies between its acknowledged and its attempted adds;</li>
 *   <li>every replica holds the same bytes.</li>
 * </ul>
 */
class ReplicatedFailoverModelTest {
    private static final int SERVER = 0;
    private static final int CHUNK = 4096;
    private static final long REGION = 4L << 20;
    private static final int CLIENTS = 3;
    private static final int SLOTS = 512; // per client, one every 2 KiB of chunks 2..: the copy meets them everywhere
    private static final long LOCK = GlobalAddress.of(SERVER, CHUNK);
    private static final long COUNTER = GlobalAddress.of(SERVER, CHUNK + 8);
    private static final long ADDS = GlobalAddress.of(SERVER, CHUNK + 16);

    private static long slot(int client, int slot) {
        return GlobalAddress.of(SERVER, 2L * CHUNK + (long) slot * 2048 * CLIENTS / 2 + client * 8L);
    }

    @Test
    void nothingAcknowledgedIsLostAndNoLockIsSharedAcrossTwoFailoversAndACopy() throws Exception {
        try (LocalFabric fabric = new LocalFabric(0, Region.DEFAULT_SEGMENT_SHIFT, 2)) {
            fabric.export(SERVER, REGION, CHUNK);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicInteger inside = new AtomicInteger();
            AtomicReference<String> violation = new AtomicReference<>();
            AtomicLong sections = new AtomicLong();
            AtomicLong addsAcked = new AtomicLong();
            AtomicLong addsTried = new AtomicLong();
            long[][] acked = new long[CLIENTS][SLOTS];
            long[][] tried = new long[CLIENTS][SLOTS];
            AtomicLong retries = new AtomicLong();
            List<Thread> threads = new ArrayList<>();
            CountDownLatch running = new CountDownLatch(CLIENTS);
            List<RemoteMemory> clients = new ArrayList<>();
            for (int c = 0; c < CLIENTS; c++) {
                clients.add(fabric.connect(SERVER));
            }
            for (int c = 0; c < CLIENTS; c++) {
                int client = c;
                RemoteMemory memory = clients.get(c);
                Thread thread = new Thread(() -> {
                    UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
                    long tag = client + 1;
                    long seq = 0;
                    running.countDown();
                    try {
                        while (!stop.get()) {
                            // Writes to this client's own slots.
                            for (int i = 0; i < 8; i++) {
                                int s = (int) (seq % SLOTS);
                                long value = ++seq;
                                tried[client][s] = value;
                                word.putLong(0, value);
                                if (retry(retries, () -> memory.write(slot(client, s), word, 0, 8))) {
                                    acked[client][s] = value;
                                }
                            }
                            // A critical section under the shared lock.
                            if (lock(memory, tag, retries)) {
                                if (inside.incrementAndGet() != 1) {
                                    violation.compareAndSet(null, "two clients held the lock at once");
                                }
                                UnsafeBuffer count = new UnsafeBuffer(new byte[8]);
                                while (!retry(retries, () -> memory.read(COUNTER, count, 0, 8))) {
                                    Thread.onSpinWait();
                                }
                                count.putLong(0, count.getLong(0) + 1);
                                while (!retry(retries, () -> memory.write(COUNTER, count, 0, 8))) {
                                    Thread.onSpinWait();
                                }
                                sections.incrementAndGet();
                                inside.decrementAndGet();
                                unlock(memory, tag, retries);
                            }
                            addsTried.incrementAndGet();
                            if (retry(retries, () -> memory.fetchAndAdd(ADDS, 1))) {
                                addsAcked.incrementAndGet();
                            }
                        }
                    } catch (RuntimeException | Error e) {
                        violation.compareAndSet(null, "client " + client + " failed: " + e);
                    }
                }, "replicated-client-" + c);
                threads.add(thread);
                thread.start();
            }
            running.await();
            Thread.sleep(150);
            fabric.killPrimary(SERVER);
            Thread.sleep(150);
            AtomicLong copied = new AtomicLong();
            fabric.addReplica(SERVER, 0, (bytes, total) -> copied.set(bytes));
            assertEquals(REGION, copied.get(), "the copy reported every byte");
            Thread.sleep(150);
            fabric.killPrimary(SERVER); // the copied replica is the only one left, and primary
            Thread.sleep(150);
            stop.set(true);
            for (Thread thread : threads) {
                thread.join(TimeUnit.SECONDS.toMillis(30));
                assertTrue(!thread.isAlive(), thread.getName() + " is stuck");
            }
            assertEquals(null, violation.get());

            String group = fabric.describeGroup(SERVER);
            assertTrue(group.startsWith("view 5: primary server-0-replica-2"), "the copied replica serves: " + group);
            RemoteMemory check = clients.get(0);
            UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
            for (int c = 0; c < CLIENTS; c++) {
                for (int s = 0; s < SLOTS; s++) {
                    check.read(slot(c, s), word, 0, 8);
                    long value = word.getLong(0);
                    assertTrue(value >= acked[c][s] && value <= tried[c][s], "client " + c + " slot " + s + " holds " + value
                            + ", acknowledged " + acked[c][s] + ", last tried " + tried[c][s]);
                }
            }
            check.read(COUNTER, word, 0, 8);
            assertEquals(sections.get(), word.getLong(0), "the locked counter counts every critical section once");
            assertTrue(sections.get() > 0, "some critical section ran");
            check.read(ADDS, word, 0, 8);
            long adds = word.getLong(0);
            assertTrue(adds >= addsAcked.get() && adds <= addsTried.get(), adds + " adds, " + addsAcked + " acknowledged, "
                    + addsTried + " tried");
            check.read(LOCK, word, 0, 8);
            assertEquals(0, word.getLong(0), "the lock is free at the end");
            assertTrue(retries.get() > 0, "the failovers failed some verbs, which were sent again");
            System.out.printf("replicated model: %d critical sections, %d adds, %d verbs sent again; %s%n", sections.get(), adds,
                    retries.get(), group);
            for (RemoteMemory client : clients) {
                client.close();
            }
        }
    }

    @Test
    void everyReplicaHoldsTheSameBytesAfterConcurrentChangesAndACopy() throws Exception {
        try (LocalFabric fabric = new LocalFabric(0, Region.DEFAULT_SEGMENT_SHIFT, 2)) {
            fabric.export(SERVER, REGION, CHUNK);
            AtomicBoolean stop = new AtomicBoolean();
            List<Thread> threads = new ArrayList<>();
            List<RemoteMemory> clients = new ArrayList<>();
            for (int c = 0; c < CLIENTS; c++) {
                RemoteMemory memory = fabric.connect(SERVER);
                clients.add(memory);
                int client = c;
                Thread thread = new Thread(() -> {
                    UnsafeBuffer page = new UnsafeBuffer(new byte[1024]);
                    java.util.SplittableRandom random = new java.util.SplittableRandom(client);
                    while (!stop.get()) {
                        try {
                            int s = random.nextInt(SLOTS);
                            page.setMemory(0, 1024, (byte) random.nextInt());
                            memory.write(slot(client, s) & ~7L, page, 0, 8);
                            memory.fetchAndAdd(ADDS, 1);
                            memory.chunkAllocator().chunkLength(SERVER);
                        } catch (FabricException retried) {
                            Thread.onSpinWait();
                        }
                    }
                });
                threads.add(thread);
                thread.start();
            }
            Thread.sleep(100);
            fabric.addReplica(SERVER, 0, (bytes, total) -> { });
            Thread.sleep(100);
            stop.set(true);
            for (Thread thread : threads) {
                thread.join();
            }
            List<Region> regions = fabric.replicaRegions(SERVER);
            assertEquals(3, regions.size(), fabric.describeGroup(SERVER));
            byte[] primary = bytes(regions.get(0));
            for (int r = 1; r < regions.size(); r++) {
                assertArrayEquals(primary, bytes(regions.get(r)), "replica " + r + " differs from the primary");
            }
            clients.forEach(RemoteMemory::close);
        }
    }

    static byte[] bytes(Region region) {
        byte[] bytes = new byte[(int) region.length()];
        region.getBytes(0, new UnsafeBuffer(bytes), 0, bytes.length);
        return bytes;
    }

    /** Runs {@code verb}; true when it completed, false when it failed in the fabric (counted, to be sent again). */
    private static boolean retry(AtomicLong retries, Runnable verb) {
        try {
            verb.run();
            return true;
        } catch (FabricException e) {
            retries.incrementAndGet();
            return false;
        }
    }

    /** Takes the lock or finds it held by another; an acquire of unknown outcome is released (as the engine's pending unlock). */
    private static boolean lock(RemoteMemory memory, long tag, AtomicLong retries) {
        try {
            return memory.compareAndSwap(LOCK, 0, tag) == 0;
        } catch (FabricException unknown) {
            retries.incrementAndGet();
            unlock(memory, tag, retries);
            return false;
        }
    }

    /** Releases the lock if this client holds it, sending the release again until its outcome is known. */
    private static void unlock(RemoteMemory memory, long tag, AtomicLong retries) {
        while (true) {
            try {
                memory.compareAndSwap(LOCK, tag, 0);
                return;
            } catch (FabricException unknown) {
                retries.incrementAndGet();
                Thread.onSpinWait();
            }
        }
    }
}
