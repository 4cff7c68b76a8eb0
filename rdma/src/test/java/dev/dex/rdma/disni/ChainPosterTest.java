package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.FabricException;

/**
 * {@link ChainPoster}, the rounds and chains of a batch on RDMA connections, against a device model: each server is a
 * byte array, a post copies between it and the round's staging slices and completes each request from another thread
 * (or fails, or holds a completion back, as a test asks). Checked: what lands and what is read, the shape of every
 * round and chain, credits, and each failure on its own request.
 */
class ChainPosterTest {
    private static final int MAX_TRANSFER = 4096;
    private static final int SERVER_BYTES = 1 << 21;
    private static final long TIMEOUT = TimeUnit.SECONDS.toNanos(10);

    private final ExecutorService completer = Executors.newSingleThreadExecutor(r -> {
        Thread thread = new Thread(r, "test-completions");
        thread.setDaemon(true);
        return thread;
    });

    @AfterEach
    void stop() {
        completer.shutdownNow();
    }

    /** The device: servers of bytes, connections with credits, posts recorded, completions from another thread. */
    private final class Device extends ChainPoster {
        final byte[][] servers;
        final FakeConnection[] connections;
        final List<int[]> chains = java.util.Collections.synchronizedList(new ArrayList<>()); // {server, read?1:0, k}
        final AtomicInteger posts = new AtomicInteger();
        /** Per post, in order: whether it throws; a status to complete a request with; requests never completed. */
        volatile IOException failNextPost;
        volatile int failStatusOfRemote = -1;
        volatile long holdBackRemote = -1;
        /** When set, each thread's first post waits here, and every completion comes that much later. */
        volatile java.util.concurrent.CyclicBarrier firstPosts;
        volatile long completionDelayMillis;
        final ThreadLocal<Boolean> passed = ThreadLocal.withInitial(() -> false);

        Device(int servers, int queueDepth, long timeoutNanos) {
            super(MAX_TRANSFER, queueDepth, DisniOneSidedVerbs.MAX_CHAIN, timeoutNanos, 1_000);
            this.servers = new byte[servers][SERVER_BYTES];
            this.connections = new FakeConnection[servers];
            for (int i = 0; i < servers; i++) {
                connections[i] = new FakeConnection(queueDepth);
            }
        }

        @Override
        protected Connection connection(int serverId) {
            return serverId >= 0 && serverId < connections.length ? connections[serverId] : null;
        }

        @Override
        protected void post(Round round, WorkList work, Connection connection, int serverId, boolean read, long first, int k)
                throws IOException {
            posts.incrementAndGet();
            chains.add(new int[] {serverId, read ? 1 : 0, k});
            if (firstPosts != null && !passed.get()) {
                passed.set(true);
                try {
                    firstPosts.await(5, TimeUnit.SECONDS);
                } catch (Exception e) {
                    throw new AssertionError("the other thread did not post", e);
                }
            }
            long delay = completionDelayMillis;
            IOException failure = failNextPost;
            if (failure != null) {
                failNextPost = null;
                // As a post that failed at its second work request: the first is in flight.
                k = Math.min(1, k);
            }
            UnsafeBuffer staging = round.staging();
            byte[] memory = servers[serverId];
            for (int c = 0; c < k; c++) {
                int e = round.chain[c];
                int r = round.request[e];
                assertEquals(serverId, work.serverId(r));
                assertEquals(read, work.isRead(r));
                int remote = (int) work.remoteAddress(r);
                long wrId = first + e;
                int status = remote == failStatusOfRemote ? 12 : 0;
                if (remote == holdBackRemote) {
                    continue;
                }
                int slice = round.at[e];
                int length = work.length(r);
                completer.execute(() -> {
                    if (delay > 0) {
                        try {
                            Thread.sleep(delay);
                        } catch (InterruptedException stopped) {
                            return;
                        }
                    }
                    if (status == 0) {
                        if (read) {
                            staging.putBytes(slice, memory, remote, length);
                        } else {
                            staging.getBytes(slice, memory, remote, length);
                        }
                    }
                    round.slot.complete(wrId, status);
                });
            }
            if (failure != null) {
                throw failure;
            }
        }
    }

    private static final class FakeConnection implements ChainPoster.Connection {
        final Semaphore credits;
        volatile String failure;

        FakeConnection(int queueDepth) {
            this.credits = new Semaphore(queueDepth);
        }

        @Override
        public Semaphore credits() {
            return credits;
        }

        @Override
        public String failure() {
            return failure;
        }

        @Override
        public void breakWith(String reason) {
            if (failure == null) {
                failure = reason;
            }
        }
    }

    private static final class TestRound extends ChainPoster.Round {
        UnsafeBuffer staging = new UnsafeBuffer(new byte[MAX_TRANSFER]);
        int retired;

        TestRound() {
            super(new CompletionSlot(0));
        }

        @Override
        UnsafeBuffer staging() {
            return staging;
        }

        @Override
        void retireStaging() {
            retired++;
            staging = new UnsafeBuffer(new byte[MAX_TRANSFER]);
        }
    }

    /**
     * 300 random requests (reads and writes of 1 to 256 bytes, one in ten up to 4 KiB, on three servers, each on bytes of its own) against a
     * model: every write lands, every read returns what the server held, every chain is of one server and opcode and
     * at most 16 long, and every credit is back.
     */
    @Test
    void randomRequestsLandAndReadBackInChainsOfOneServerAndOpcode() {
        Device device = new Device(3, 64, TIMEOUT);
        SplittableRandom random = new SplittableRandom(5);
        WorkList work = new WorkList();
        List<byte[]> expected = new ArrayList<>();
        List<UnsafeBuffer> buffers = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            int server = random.nextInt(3);
            int length = 1 + random.nextInt(random.nextInt(10) == 0 ? MAX_TRANSFER : 256);
            int remote = i * MAX_TRANSFER;
            byte[] bytes = new byte[length];
            random.nextBytes(bytes);
            if (random.nextBoolean()) {
                System.arraycopy(bytes, 0, device.servers[server], remote, length);
                UnsafeBuffer into = new UnsafeBuffer(new byte[length + 3]);
                work.read(i, server, remote, 7, into, 3, length);
                buffers.add(into);
            } else {
                work.write(i, server, remote, 7, new UnsafeBuffer(bytes), 0, length);
                buffers.add(null);
            }
            expected.add(bytes);
        }

        assertTimeoutPreemptively(Duration.ofSeconds(20), () -> device.postAll(new TestRound(), work, () -> false));

        for (int i = 0; i < work.size(); i++) {
            assertNull(work.failure(i), "request " + i);
            byte[] bytes = expected.get(i);
            byte[] seen = new byte[bytes.length];
            if (work.isRead(i)) {
                buffers.get(i).getBytes(3, seen);
            } else {
                System.arraycopy(device.servers[work.serverId(i)], (int) work.remoteAddress(i), seen, 0, bytes.length);
            }
            assertArrayEquals(bytes, seen, (work.isRead(i) ? "read " : "write ") + i);
        }
        assertTrue(device.chains.stream().allMatch(chain -> chain[2] <= DisniOneSidedVerbs.MAX_CHAIN));
        assertEquals(work.size(), posted(device), "every request posted once");
        assertTrue(device.posts.get() < work.size() / 2, "requests went in chains: " + device.posts.get() + " posts");
        for (FakeConnection connection : device.connections) {
            assertEquals(64, connection.credits.availablePermits(), "every credit back");
            assertNull(connection.failure);
        }
    }

    /** With a send queue of 4, chains are at most 4 long, and 40 requests to one server all complete. */
    @Test
    void chainsAreNoLongerThanTheSendQueue() {
        Device device = new Device(1, 4, TIMEOUT);
        WorkList work = writes(0, 40, 64);

        assertTimeoutPreemptively(Duration.ofSeconds(20), () -> device.postAll(new TestRound(), work, () -> false));

        for (int i = 0; i < work.size(); i++) {
            assertNull(work.failure(i));
        }
        assertTrue(device.chains.stream().allMatch(chain -> chain[2] <= 4), "chains of at most the queue depth");
        assertEquals(40, posted(device), "every request posted once, those carried to a later chain too");
        assertEquals(4, device.connections[0].credits.availablePermits());
    }

    /**
     * Two threads, each with rounds of 64 requests to the same server whose send queue holds 64, post their first
     * chains together and get their completions 2 ms late, so that both hold credits while they post the rest: neither
     * waits for credits while it holds some, so neither waits out the verb timeout (10 s) for the other. (Where a thread
     * waits for a whole chain's credits while it holds some, both wait, and the test fails by its 20 s limit.)
     */
    @Test
    void twoThreadsFillingOneSendQueueDoNotWaitForEachOther() throws Exception {
        Device device = new Device(1, 64, TIMEOUT);
        device.firstPosts = new java.util.concurrent.CyclicBarrier(2);
        device.completionDelayMillis = 2;
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            List<Future<WorkList>> done = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int base = t * 64;
                done.add(threads.submit(() -> {
                    WorkList work = writes(base, 64, 64);
                    for (int round = 0; round < 10; round++) {
                        device.postAll(new TestRound(), work, () -> false);
                    }
                    return work;
                }));
            }
            for (Future<WorkList> future : done) {
                WorkList work = future.get(20, TimeUnit.SECONDS);
                for (int i = 0; i < work.size(); i++) {
                    assertNull(work.failure(i), "request " + i);
                }
            }
        } finally {
            threads.shutdownNow();
        }
        assertEquals(64, device.connections[0].credits.availablePermits());
        assertEquals(2 * 10 * 64, posted(device));
    }

    /**
     * A chain takes the credits that are free instead of waiting for all it wants: with 60 of 64 taken elsewhere for
     * 50 ms, 16 requests go in shorter chains and all complete, none waiting out the timeout.
     */
    @Test
    void aChainTakesTheCreditsThatAreFree() throws Exception {
        Device device = new Device(1, 64, TIMEOUT);
        Semaphore credits = device.connections[0].credits;
        credits.acquire(60);
        Thread giveBack = new Thread(() -> {
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                return;
            }
            credits.release(60);
        });
        giveBack.start();
        WorkList work = writes(0, 16, 64);

        assertTimeoutPreemptively(Duration.ofSeconds(5), () -> device.postAll(new TestRound(), work, () -> false));

        giveBack.join();
        for (int i = 0; i < work.size(); i++) {
            assertNull(work.failure(i));
        }
        assertEquals(16, posted(device));
        assertTrue(device.chains.get(0)[2] <= 4, "the first chain took the 4 free credits, not 16: " + device.chains.get(0)[2]);
        assertEquals(64, credits.availablePermits());
    }

    /** A write whose source cannot be copied fails alone; the others of its chain are posted and complete. */
    @Test
    void aWriteThatCannotBeCopiedFailsAloneInItsChain() {
        Device device = new Device(1, 64, TIMEOUT);
        WorkList work = new WorkList();
        work.write(0, 0, 0, 7, new UnsafeBuffer(new byte[] {1, 2, 3, 4, 5, 6, 7, 8}), 0, 8);
        work.write(1, 0, 64, 7, new UnsafeBuffer(new byte[4]), 0, 8); // 8 bytes from a buffer of 4
        work.write(2, 0, 128, 7, new UnsafeBuffer(new byte[] {9, 9, 9, 9, 9, 9, 9, 9}), 0, 8);

        device.postAll(new TestRound(), work, () -> false);

        assertNull(work.failure(0));
        assertTrue(work.failure(1) instanceof IndexOutOfBoundsException, String.valueOf(work.failure(1)));
        assertNull(work.failure(2));
        assertEquals(8, device.servers[0][7]);
        assertEquals(9, device.servers[0][135]);
        assertEquals(2, posted(device));
        assertEquals(64, device.connections[0].credits.availablePermits());
        assertNull(device.connections[0].failure, "a bad source breaks no connection");
    }

    /** An error status fails its request alone and breaks its connection; later requests there fail at once. */
    @Test
    void anErrorStatusFailsItsRequestAndBreaksItsConnection() {
        Device device = new Device(2, 64, TIMEOUT);
        device.failStatusOfRemote = 2 * 64;
        WorkList work = new WorkList();
        for (int i = 0; i < 4; i++) {
            work.write(i, i % 2, i * 64L, 7, new UnsafeBuffer(new byte[8]), 0, 8);
        }

        device.postAll(new TestRound(), work, () -> false);

        assertTrue(work.failure(2) instanceof FabricException failed && failed.getMessage().contains("completed with"),
                String.valueOf(work.failure(2)));
        assertNull(work.failure(0), "posted in the same chain, completed");
        assertNull(work.failure(1));
        assertNull(work.failure(3));
        assertTrue(device.connections[0].failure.contains("completed with"));
        WorkList later = writes(0, 1, 8);
        device.postAll(new TestRound(), later, () -> false);
        assertTrue(later.failure(0).getMessage().contains("the connection is broken since"), later.failure(0).getMessage());
        assertEquals(64, device.connections[0].credits.availablePermits());
    }

    /**
     * A request whose completion never comes fails after the verb timeout; its credit stays taken (it may still
     * complete), the staging buffer is given up, and the round's other requests completed.
     */
    @Test
    void aRequestThatNeverCompletesTimesOutKeepsItsCreditAndRetiresTheStaging() {
        Device device = new Device(1, 64, TimeUnit.MILLISECONDS.toNanos(500));
        device.holdBackRemote = 64;
        WorkList work = writes(0, 3, 64);
        TestRound round = new TestRound();

        device.postAll(round, work, () -> false);

        assertTrue(work.failure(1).getMessage().contains("did not complete within 500 ms"), work.failure(1).getMessage());
        assertNull(work.failure(0));
        assertNull(work.failure(2));
        assertEquals(1, round.retired, "the staging buffer was given up");
        assertEquals(63, device.connections[0].credits.availablePermits(), "the request that may still complete keeps its credit");
        assertTrue(device.connections[0].failure.contains("did not complete"));
    }

    /**
     * A post that fails may have sent part of its chain: its requests fail, the connection is broken, and the part
     * that was in flight is awaited before its slices or credits are reused; the rest of the chain times out holding
     * its credits, so the staging buffer is given up.
     */
    @Test
    void aFailedPostFailsItsChainAndAwaitsWhatMayBeInFlight() {
        Device device = new Device(2, 64, TimeUnit.MILLISECONDS.toNanos(500));
        device.failNextPost = new IOException("ibv_post_send failed: ENOMEM");
        WorkList work = new WorkList();
        for (int i = 0; i < 3; i++) {
            work.write(i, 0, i * 64L, 7, new UnsafeBuffer(new byte[8]), 0, 8);
        }
        work.write(3, 1, 0, 7, new UnsafeBuffer(new byte[] {1, 2, 3, 4, 5, 6, 7, 8}), 0, 8);
        TestRound round = new TestRound();

        device.postAll(round, work, () -> false);

        for (int i = 0; i < 3; i++) {
            assertTrue(work.failure(i).getMessage().contains("could not be posted"), String.valueOf(work.failure(i)));
        }
        assertNull(work.failure(3), "another server's chain of the same round");
        assertEquals(8, device.servers[1][7]);
        assertTrue(device.connections[0].failure.startsWith("a post failed"));
        assertEquals(62, device.connections[0].credits.availablePermits(), "the first of the chain completed and gave its credit back");
        assertEquals(1, round.retired);
    }

    /** A bad length and an unconnected server fail their own requests; the others complete. */
    @Test
    void aBadLengthOrAnUnconnectedServerFailsItsRequestAlone() {
        Device device = new Device(1, 64, TIMEOUT);
        WorkList work = new WorkList();
        work.write(0, 0, 0, 7, new UnsafeBuffer(new byte[2 * MAX_TRANSFER]), 0, MAX_TRANSFER + 1);
        work.write(1, 5, 0, 7, new UnsafeBuffer(new byte[8]), 0, 8);
        work.write(2, 0, 64, 7, new UnsafeBuffer(new byte[8]), 0, 8);

        device.postAll(new TestRound(), work, () -> false);

        assertTrue(work.failure(0) instanceof IllegalArgumentException && work.failure(0).getMessage().contains("one RDMA transfer"));
        assertTrue(work.failure(1) instanceof IllegalArgumentException && work.failure(1).getMessage().contains("not connected"));
        assertNull(work.failure(2));
        assertEquals(64, device.connections[0].credits.availablePermits());
    }

    /** Closed after the third round: what is left fails as closed, and nothing more is posted. */
    @Test
    void aCloseBetweenRoundsFailsTheRest() {
        Device device = new Device(1, 64, TIMEOUT);
        WorkList work = writes(0, 200, MAX_TRANSFER); // one request per round: the staging buffer holds one

        device.postAll(new TestRound(), work, () -> device.posts.get() >= 3);

        for (int i = 0; i < 3; i++) {
            assertNull(work.failure(i));
        }
        for (int i = 3; i < work.size(); i++) {
            assertTrue(work.failure(i) instanceof IllegalStateException, "request " + i);
        }
        assertEquals(3, device.posts.get());
    }

    private static int posted(Device device) {
        synchronized (device.chains) {
            return device.chains.stream().mapToInt(chain -> chain[2]).sum();
        }
    }

    /** {@code count} writes of {@code length} bytes to server 0, from remote address {@code base * length} on. */
    private static WorkList writes(int base, int count, int length) {
        WorkList work = new WorkList();
        for (int i = 0; i < count; i++) {
            work.write(i, 0, (long) (base + i) * length % (SERVER_BYTES - length), 7, new UnsafeBuffer(new byte[length]), 0, length);
        }
        return work;
    }
}
