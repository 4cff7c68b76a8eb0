package dev.dex.rdma.replica;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.local.LocalFabric;

/**
 * How {@link ReplicatedRemoteMemory} reads under a {@link ReadLease} (docs/replication.md, "Read leases"), with a lease
 * the test holds and drops by hand: a read waits for the lease, runs again when the lease ran out while it was in
 * flight (it may have been served after a newer view's first change), moves to a newer view that comes meanwhile, and
 * fails clearly when neither comes.
 */
class ReadLeaseTest {
    private static final int SERVER = 0;
    private static final int CHUNK = 4096;
    private static final long REGION = 1L << 20;
    private static final long PAGE = GlobalAddress.of(SERVER, 2L * CHUNK);

    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    /** A lease the test holds or drops; counts the renewals asked. */
    private static final class HandLease implements ReadLease {
        volatile boolean held;
        volatile boolean closed;
        final AtomicInteger asked = new AtomicInteger();

        @Override
        public boolean held() {
            return held && !closed;
        }

        @Override
        public void renewSoon() {
            asked.incrementAndGet();
        }

        @Override
        public long patienceNanos() {
            return TimeUnit.MILLISECONDS.toNanos(200);
        }

        @Override
        public String why() {
            return "backup b refused: injected";
        }

        @Override
        public void close() {
            closed = true;
        }
    }

    /** A region of its own for server 0 holding {@code word} at {@link #PAGE}, and a plain connection to it. */
    private RemoteMemory replica(long word) {
        LocalFabric fabric = new LocalFabric();
        open.add(fabric);
        fabric.export(SERVER, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(SERVER);
        open.add(memory);
        put(memory, word);
        return memory;
    }

    private static void put(RemoteMemory memory, long word) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[8]);
        buffer.putLong(0, word);
        memory.write(PAGE, buffer, 0, 8);
    }

    private ReplicatedRemoteMemory client(ReplicaSet set, Duration failoverWait) {
        ReplicatedRemoteMemory client = new ReplicatedRemoteMemory(Map.of(SERVER, set), new long[] {REGION}, new long[] {CHUNK},
                Duration.ofSeconds(1), failoverWait, (server, view, name, cause) -> { }, () -> { });
        open.add(client);
        return client;
    }

    private static ReplicaSet set(long view, RemoteMemory primary, RemoteMemory backup, ReadLease lease) {
        return new ReplicaSet(view, new ReplicaSet.Replica("p" + view, primary, ReplicaSet.State.COMPLETE),
                List.of(new ReplicaSet.Replica("b" + view, backup, ReplicaSet.State.COMPLETE)), lease);
    }

    /** {@code inner}, whose reads run {@code during} once, inside the first read, and count every read. */
    private static RemoteMemory counting(RemoteMemory inner, AtomicInteger reads, Runnable during) {
        return new dev.dex.rdma.ForwardingRemoteMemory(inner) {
            @Override
            public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
                super.read(address, dst, dstOffset, length);
                if (reads.incrementAndGet() == 1) {
                    during.run();
                }
            }

            @Override
            public void start(VerbBatch batch) {
                batch.runEach(this); // through the read above
            }
        };
    }

    @Test
    void aReadWaitsForItsLeaseAndRunsOnceItIsHeld() throws Exception {
        HandLease lease = new HandLease();
        ReplicatedRemoteMemory client = client(set(1, replica(11), replica(11), lease), Duration.ofSeconds(5));

        CompletableFuture<Long> read = CompletableFuture.supplyAsync(() -> client.readLong(PAGE));
        TimeUnit.MILLISECONDS.sleep(100);
        assertTrue(!read.isDone(), "no read without the lease");
        assertTrue(lease.asked.get() > 0, "the read asked the backups for the lease");
        lease.held = true;

        assertEquals(11L, read.get(5, TimeUnit.SECONDS));
    }

    @Test
    void aReadWhoseLeaseRanOutWhileInFlightRunsAgain() {
        HandLease lease = new HandLease();
        lease.held = true;
        AtomicInteger reads = new AtomicInteger();
        RemoteMemory primary = replica(21);
        // The lease runs out while the first read is in flight, and is held again at once.
        RemoteMemory watched = counting(primary, reads, () -> {
            lease.held = false;
            put(primary, 22); // what a newer view's change would look like to the second read
            CompletableFuture.runAsync(() -> lease.held = true, CompletableFuture.delayedExecutor(20, TimeUnit.MILLISECONDS));
        });
        ReplicatedRemoteMemory client = client(set(1, watched, replica(21), lease), Duration.ofSeconds(5));

        assertEquals(22L, client.readLong(PAGE), "the read served after the lease ran out did not count");
        assertEquals(2, reads.get());
    }

    @Test
    void aBatchReadWhoseLeaseRanOutWhileInFlightRunsAgain() {
        HandLease lease = new HandLease();
        lease.held = true;
        AtomicInteger reads = new AtomicInteger();
        RemoteMemory primary = replica(31);
        RemoteMemory watched = counting(primary, reads, () -> {
            lease.held = false;
            put(primary, 32);
            CompletableFuture.runAsync(() -> lease.held = true, CompletableFuture.delayedExecutor(20, TimeUnit.MILLISECONDS));
        });
        ReplicatedRemoteMemory client = client(set(1, watched, replica(31), lease), Duration.ofSeconds(5));
        UnsafeBuffer into = new UnsafeBuffer(new byte[16]);
        VerbBatch batch = new VerbBatch(2);
        batch.read(PAGE, into, 0, 8);
        batch.read(PAGE + 8, into, 8, 8);

        client.submit(batch);

        assertNull(batch.firstFailure());
        assertEquals(32L, into.getLong(0), "the batch's read served after the lease ran out did not count");
        assertTrue(reads.get() >= 3, "both reads ran again: " + reads.get());
    }

    /** A swap that changed nothing is a read of the primary: one whose lease ran out while in flight runs again. */
    @Test
    void aSwapThatChangedNothingWhileItsLeaseRanOutRunsAgain() {
        HandLease lease = new HandLease();
        lease.held = true;
        AtomicInteger swaps = new AtomicInteger();
        RemoteMemory primary = replica(61);
        RemoteMemory watched = new dev.dex.rdma.ForwardingRemoteMemory(primary) {
            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                long found = super.compareAndSwap(address, expected, desired);
                if (swaps.incrementAndGet() == 1) {
                    lease.held = false;
                    put(primary, 62);
                    CompletableFuture.runAsync(() -> lease.held = true, CompletableFuture.delayedExecutor(20, TimeUnit.MILLISECONDS));
                }
                return found;
            }
        };
        ReplicatedRemoteMemory client = client(set(1, watched, replica(61), lease), Duration.ofSeconds(5));

        assertEquals(62L, client.compareAndSwap(PAGE, 0, 5), "the word found after the lease ran out did not count");
        assertEquals(2, swaps.get());
    }

    @Test
    void aReadWithoutLeaseMovesToANewerViewThatComes() throws Exception {
        HandLease old = new HandLease();
        ReplicatedRemoteMemory client = client(set(1, replica(41), replica(41), old), Duration.ofSeconds(5));
        HandLease next = new HandLease();
        next.held = true;
        RemoteMemory newPrimary = replica(42);

        CompletableFuture<Long> read = CompletableFuture.supplyAsync(() -> client.readLong(PAGE));
        TimeUnit.MILLISECONDS.sleep(50);
        assertTrue(client.install(SERVER, set(2, newPrimary, replica(42), next)));

        assertEquals(42L, read.get(5, TimeUnit.SECONDS), "read on the new view's primary");
        assertTrue(old.closed, "the replaced view's lease stops renewing");
    }

    @Test
    void aReadWithoutLeaseAndWithoutNewerViewFailsClearly() {
        HandLease lease = new HandLease();
        ReplicatedRemoteMemory client = client(set(1, replica(51), replica(51), lease), Duration.ofMillis(100));
        long start = System.nanoTime();

        LeaseLapsedException failed = assertThrows(LeaseLapsedException.class, () -> client.readLong(PAGE));

        assertTrue(failed.getMessage().contains("no read lease (backup b refused: injected)"), failed.getMessage());
        assertTrue(failed.getMessage().contains("view 1"), failed.getMessage());
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(200), "it waited the lease's patience, above the failover wait");
        UnsafeBuffer into = new UnsafeBuffer(new byte[8]);
        VerbBatch batch = new VerbBatch(1);
        batch.read(PAGE, into, 0, 8);
        client.submit(batch);
        assertTrue(batch.firstFailure() instanceof LeaseLapsedException, String.valueOf(batch.firstFailure()));
        assertTrue(client.readsFailingSinceNanos(SERVER) - start >= 0, "the compute node can tell its reads keep failing");
        assertTrue(client.readsFailingSinceNanos(SERVER) != 0);

        lease.held = true;
        assertEquals(51L, client.readLong(PAGE));
        assertEquals(0L, client.readsFailingSinceNanos(SERVER), "a read under the lease ends the failing time");
    }
}
