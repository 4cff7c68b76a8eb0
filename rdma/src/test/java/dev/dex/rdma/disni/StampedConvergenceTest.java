package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongPredicate;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.ReplicaSet;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.replica.StampedWords;
import dev.dex.rdma.testing.TestResources;

/**
 * Race 2 of docs/replication.md on {@code disni}, where a group's clients share no process: the primary's memory node
 * stamps every change of a word, and a backup stores a converged word only if its stamp is later than the last
 * ({@link ViewAtomics}, "Stamps"). So convergences may land on a backup in any order, and a stalled one never moves
 * the backup's word back when the word's value has come back meanwhile (a lock word: a tag, 0, the same tag).
 *
 * <p>Two replicas, each a region of its own memory-side fabric, over the production control fabric and one
 * {@link InJvmRdmaTransport} standing for the network (as {@link ReplicatedDisniTest}). Each client's connection to
 * the backup can be made to stall before a convergence leaves it.
 */
class StampedConvergenceTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final int SERVER = 2;
    private static final long LOCKS = GlobalAddress.of(SERVER, CHUNK);

    @AutoClose
    private final TestResources resources = new TestResources();
    private final DeviceModel model = new DeviceModel();
    private final DisniFabric[] memorySide = new DisniFabric[2];
    private final ExportedRegion[] replicas = new ExportedRegion[2];
    private final DisniFabric computeSide;
    private final List<String> backupFailures = new CopyOnWriteArrayList<>();

    StampedConvergenceTest() {
        for (int r = 0; r < 2; r++) {
            memorySide[r] = resources.closeAfter(model.fabric());
            replicas[r] = resources.closeAfter(memorySide[r].export(SERVER, 16L * CHUNK, CHUNK));
        }
        memorySide[0].advanceView(SERVER, 1);
        memorySide[1].stampsFrom(SERVER, 1); // as the backup's replica does when it becomes one
        memorySide[1].advanceView(SERVER, 1);
        computeSide = resources.closeAfter(model.fabric());
    }

    /** A client of view 1 whose convergences onto the backup first pass {@code beforeConvergence} (which may stall). */
    private ReplicatedRemoteMemory client(long clientId, LongPredicate beforeConvergence) {
        ReplicaSet set = set(1, clientId, beforeConvergence);
        long[] regionLengths = new long[SERVER + 1];
        long[] chunkLengths = new long[SERVER + 1];
        regionLengths[SERVER] = 16L * CHUNK;
        chunkLengths[SERVER] = CHUNK;
        return resources.closeAfter(new ReplicatedRemoteMemory(Map.of(SERVER, set), regionLengths, chunkLengths,
                ReplicatedRemoteMemory.DEFAULT_MIRROR_TIMEOUT, Duration.ofSeconds(5),
                (server, view, replica, cause) -> backupFailures.add(replica + ": " + cause.getMessage()), () -> { }));
    }

    /** The two replicas in {@code view} as client {@code clientId} reaches them, its backup's convergences through a hook. */
    private ReplicaSet set(long view, long clientId, LongPredicate beforeConvergence) {
        RemoteMemory primary = computeSide.connect(Map.of(SERVER, replicas[0].endpoint()), clientId, view);
        RemoteMemory backup = new StallingBackup(computeSide.connect(Map.of(SERVER, replicas[1].endpoint()), clientId, view),
                beforeConvergence);
        return new ReplicaSet(view, new ReplicaSet.Replica(replicas[0].endpoint(), primary, ReplicaSet.State.COMPLETE),
                List.of(new ReplicaSet.Replica(replicas[1].endpoint(), backup, ReplicaSet.State.COMPLETE)));
    }

    /**
     * A view change that keeps the primary comes between a change at the primary and its convergence: the backup was
     * added again in view 2 (its copy carries what the primary held when view 2 began). The convergence, refused in
     * view 1, is sent again in view 2, where the backup takes the stamp as its copy's; the swap returns, and nothing is
     * reported. Without the resend the swap would fail with its outcome unknown.
     */
    @Test
    void aConvergenceRefusedByAViewThatKeptThePrimaryGoesOnInIt() {
        AtomicInteger convergences = new AtomicInteger();
        AtomicInteger inViewTwo = new AtomicInteger();
        ReplicatedRemoteMemory[] client = new ReplicatedRemoteMemory[1];
        client[0] = client(0xC, value -> {
            if (convergences.incrementAndGet() == 1) { // between the swap at the primary and its convergence
                memorySide[0].advanceView(SERVER, 2);
                memorySide[1].stampsFrom(SERVER, 2);
                memorySide[1].advanceView(SERVER, 2);
                assertTrue(client[0].install(SERVER, set(2, 0xC, next -> inViewTwo.incrementAndGet() > 0)));
            }
            return true;
        });

        assertEquals(0, client[0].compareAndSwap(LOCKS, 0, 7), "the swap ran once, at the primary");
        assertEquals(7, word(0, LOCKS));
        assertEquals(1, convergences.get(), "its convergence was sent in view 1, and refused there");
        assertEquals(1, inViewTwo.get(), "and sent again in view 2");
        assertEquals(List.of(), backupFailures);
    }

    /** A connection to the backup whose stamped convergences first pass a hook; everything else goes straight through. */
    private static final class StallingBackup extends ForwardingRemoteMemory implements StampedWords {
        private final StampedWords stamped;
        private final LongPredicate hook;

        StallingBackup(RemoteMemory backup, LongPredicate hook) {
            super(backup);
            this.stamped = (StampedWords) backup;
            this.hook = hook;
        }

        @Override
        public long compareAndSwap(long address, long expected, long desired, long[] stamp) {
            return stamped.compareAndSwap(address, expected, desired, stamp);
        }

        @Override
        public long fetchAndAdd(long address, long delta, long[] stamp) {
            return stamped.fetchAndAdd(address, delta, stamp);
        }

        @Override
        public void writeWord(long address, long value, long[] stamp) {
            stamped.writeWord(address, value, stamp);
        }

        @Override
        public boolean setIfNewer(long address, long value, long stampView, long stampSeq) {
            hook.test(value);
            return stamped.setIfNewer(address, value, stampView, stampSeq);
        }
    }

    private long word(int replica, long address) {
        return replicas[replica].region().getLongVolatile(GlobalAddress.offset(address));
    }

    private static void await(CountDownLatch latch) {
        try {
            assertTrue(latch.await(10, TimeUnit.SECONDS), "a stalled convergence is let go within 10 s");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /**
     * Forced: A's release of a lock stalls on its way to the backup. Meanwhile B takes the lock and gives it back, and A
     * takes it again: the word at the primary has come back to A's tag, and those three changes reach the backup
     * without waiting for the stalled one. Then the stalled release lands. Its stamp is older than A's new acquire's, so
     * the backup keeps A's tag, which A holds: a failover now promotes a backup that shows the lock held, by A.
     */
    @Test
    void aStalledReleaseCannotFreeTheLockOnTheBackupOnceItIsTakenAgain() throws Exception {
        long tagA = 11;
        long tagB = 22;
        CountDownLatch stalled = new CountDownLatch(1);
        CountDownLatch resume = new CountDownLatch(1);
        AtomicInteger convergences = new AtomicInteger();
        ReplicatedRemoteMemory a = client(0xA, value -> {
            if (convergences.incrementAndGet() == 2) { // the first is A's acquire, the second its release
                stalled.countDown();
                await(resume);
            }
            return true;
        });
        ReplicatedRemoteMemory b = client(0xB, value -> true);
        ReplicatedRemoteMemory aAgain = client(0xA2, value -> true);
        assertEquals(0, a.compareAndSwap(LOCKS, 0, tagA), "A takes the lock");
        UnsafeBuffer zero = new UnsafeBuffer(new byte[Long.BYTES]);
        Thread release = new Thread(() -> a.write(LOCKS, zero, 0, Long.BYTES), "A's release");
        release.start();
        await(stalled);
        assertEquals(0, word(0, LOCKS), "A's release took effect at the primary");
        assertEquals(tagA, word(1, LOCKS), "and is stalled before the backup");

        assertEquals(0, b.compareAndSwap(LOCKS, 0, tagB), "B takes the lock");
        b.write(LOCKS, zero, 0, Long.BYTES);
        assertEquals(0, aAgain.compareAndSwap(LOCKS, 0, tagA), "A takes it again, acknowledged without the stalled release");
        assertEquals(tagA, word(1, LOCKS));
        resume.countDown();
        release.join(10_000);

        assertEquals(tagA, word(0, LOCKS));
        assertEquals(tagA, word(1, LOCKS), "the stalled release landed last, and the backup still shows A's lock, which A holds");
        assertEquals(List.of(), backupFailures);
    }

    /**
     * Stress against a model: four clients take, hold and release four lock words and add to a counter, each client's
     * convergences onto the backup stalling at random. Invariants: while a client holds a lock, nobody else can change
     * the word at the primary, so the backup must show its tag from the acquire's acknowledgement to its release (a
     * stalled older convergence landing meanwhile would show otherwise); at rest every backup word equals the primary's,
     * and the counter equals the number of acknowledged adds.
     */
    @Test
    void stalledConvergencesInAnyOrderNeverMoveABackupWordBack() throws Exception {
        int clients = 4;
        int words = 4;
        long counter = LOCKS + 8L * words;
        AtomicLong adds = new AtomicLong();
        List<String> violations = new CopyOnWriteArrayList<>();
        AtomicInteger held = new AtomicInteger();
        Thread[] threads = new Thread[clients];
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1_500);
        for (int c = 0; c < clients; c++) {
            long tag = 100 + c;
            ReplicatedRemoteMemory memory = client(0x100 + c, value -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                if (random.nextInt(4) == 0) {
                    java.util.concurrent.locks.LockSupport.parkNanos(random.nextLong(50_000, 2_000_000));
                }
                return true;
            });
            threads[c] = new Thread(() -> {
                UnsafeBuffer zero = new UnsafeBuffer(new byte[Long.BYTES]);
                ThreadLocalRandom random = ThreadLocalRandom.current();
                while (System.nanoTime() < deadline) {
                    long lock = LOCKS + 8L * random.nextInt(words);
                    if (memory.compareAndSwap(lock, 0, tag) != 0) {
                        if (random.nextBoolean()) {
                            memory.fetchAndAdd(counter, 1);
                            adds.incrementAndGet();
                        }
                        continue;
                    }
                    held.incrementAndGet();
                    check(lock, tag, "right after the acquire", violations);
                    java.util.concurrent.locks.LockSupport.parkNanos(random.nextLong(1_000, 500_000));
                    check(lock, tag, "at the end of the hold", violations);
                    memory.write(lock, zero, 0, Long.BYTES);
                }
            }, "client-" + c);
        }
        for (Thread thread : threads) {
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join(30_000);
        }
        assertTrue(held.get() > 50, "the clients took the locks often enough to race: " + held.get());
        assertTrue(violations.isEmpty(), violations.size() + " times a client holding a lock found another word on the backup,"
                + " e.g. " + violations.subList(0, Math.min(5, violations.size())));
        for (int w = 0; w < words; w++) {
            assertEquals(0, word(0, LOCKS + 8L * w), "every lock is free at the primary");
            assertEquals(0, word(1, LOCKS + 8L * w), "and at the backup");
        }
        assertEquals(adds.get(), word(0, counter), "every acknowledged add is at the primary");
        assertEquals(adds.get(), word(1, counter), "and at the backup");
        assertEquals(List.of(), backupFailures);
    }

    private void check(long lock, long tag, String when, List<String> violations) {
        long onBackup = word(1, lock);
        if (onBackup != tag) {
            violations.add(String.format("%s of %s by %d: the backup shows %d", when, GlobalAddress.toString(lock), tag, onBackup));
        }
    }
}
