package dev.dex.rdma.replica;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.params.ParameterizedTest;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * The two races of the compute-side write path, made wide on purpose: a copy whose read and write of a piece are 50 µs
 * apart while clients write the same pieces, and mirrors of one word by two clients that arrive in the wrong order. Each
 * replica here is a {@code local} region of a fabric of its own, so that the test builds the views by hand.
 */
class CopyAndMirrorRaceTest {
    private static final int SERVER = 0;
    private static final int CHUNK = 4096;
    private static final long REGION = 1L << 20;
    private static final long FIRST = 2L * CHUNK; // the words the writers use start here
    private static final int WRITERS = 2;

    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    /** A region of its own for server 0 and a plain connection to it. */
    private RemoteMemory replica() {
        LocalFabric fabric = new LocalFabric();
        open.add(fabric);
        fabric.export(SERVER, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(SERVER);
        open.add(memory);
        return memory;
    }

    private static ReplicatedRemoteMemory client(RemoteMemory primary, RemoteMemory backup, ReplicaSet.State state,
                                                 List<String> failures) {
        ReplicaSet set = new ReplicaSet(1, new ReplicaSet.Replica("primary", primary, ReplicaSet.State.COMPLETE),
                List.of(new ReplicaSet.Replica("backup", backup, state)));
        long[] lengths = {REGION};
        long[] chunks = {CHUNK};
        return new ReplicatedRemoteMemory(Map.of(SERVER, set), lengths, chunks, Duration.ofSeconds(1),
                (server, view, name, cause) -> failures.add(name + ": " + cause.getMessage()), () -> { });
    }

    @Test
    void aCopyUnderWritesLeavesNoWriteBehind() throws Exception {
        RemoteMemory primary = replica();
        RemoteMemory added = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        // Every word past FIRST is written once, by one writer, in an order of its own, while the copy runs.
        int words = (int) ((REGION - FIRST) / 8);
        AtomicBoolean copying = new AtomicBoolean(true);
        List<Thread> writers = new ArrayList<>();
        long[] written = new long[WRITERS];
        for (int w = 0; w < WRITERS; w++) {
            int writer = w;
            ReplicatedRemoteMemory client = client(primary, added, ReplicaSet.State.COPYING, failures);
            Thread thread = new Thread(() -> {
                UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
                java.util.SplittableRandom random = new java.util.SplittableRandom(writer);
                int mine = words / WRITERS;
                int[] order = new int[mine];
                for (int i = 0; i < mine; i++) {
                    order[i] = i;
                }
                for (int i = mine - 1; i > 0; i--) {
                    int j = random.nextInt(i + 1);
                    int t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
                for (int i = 0; i < mine && copying.get(); i++) {
                    int index = order[i] * WRITERS + writer;
                    word.putLong(0, index + 1L);
                    client.write(GlobalAddress.of(SERVER, FIRST + 8L * index), word, 0, 8);
                    written[writer]++;
                    if ((i & 15) == 0) {
                        LockSupport.parkNanos(5_000);
                    }
                }
            });
            writers.add(thread);
            thread.start();
        }
        RegionCopier copier = new RegionCopier(slowReads(primary), added, SERVER, 1024, 0, Duration.ofSeconds(10));
        copier.copy(REGION, (bytes, total) -> { });
        copying.set(false);
        for (Thread thread : writers) {
            thread.join();
        }
        assertTrue(failures.isEmpty(), failures.toString());
        UnsafeBuffer p = new UnsafeBuffer(new byte[(int) REGION]);
        UnsafeBuffer b = new UnsafeBuffer(new byte[(int) REGION]);
        primary.read(GlobalAddress.of(SERVER, 0), p, 0, (int) REGION);
        added.read(GlobalAddress.of(SERVER, 0), b, 0, (int) REGION);
        long differ = 0;
        for (int i = 0; i < REGION; i += 8) {
            if (p.getLong(i) != b.getLong(i)) {
                differ++;
            }
        }
        long total = written[0] + written[1];
        assertTrue(total > 10_000, "the writers wrote " + total + " words during the copy");
        assertEquals(0, differ, differ + " words differ between the primary and the copy after " + total + " writes during it ("
                + copier.retries() + " pieces copied again)");
        assertTrue(copier.retries() > 0, "the writers changed pieces under the copy");
    }

    @Test
    void mirrorsThatArriveOutOfOrderLeaveTheBackupAtThePrimarysWord() throws Exception {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        long word = GlobalAddress.of(SERVER, FIRST);
        // Client A's mirrors reach the backup 2 ms late; client B's at once. Each adds 1, 50 times, at the same time.
        ReplicatedRemoteMemory a = client(primary, slowAtomics(backup), ReplicaSet.State.COMPLETE, failures);
        ReplicatedRemoteMemory b = client(primary, backup, ReplicaSet.State.COMPLETE, failures);
        Thread slow = new Thread(() -> {
            for (int i = 0; i < 50; i++) {
                a.fetchAndAdd(word, 1);
            }
        });
        slow.start();
        for (int i = 0; i < 50; i++) {
            b.fetchAndAdd(word, 1);
            LockSupport.parkNanos(200_000);
        }
        slow.join();
        assertTrue(failures.isEmpty(), failures.toString());
        assertEquals(100, primary.readLong(word));
        assertEquals(100, backup.readLong(word), "the backup holds the primary's word after mirrors in any order");
    }

    @Test
    void aBackupThatFailsAChangeIsReportedAndTheChangeFailsNamingIt() {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        AtomicBoolean broken = new AtomicBoolean();
        RemoteMemory failing = new ForwardingRemoteMemory(backup) {
            @Override
            public void write(long address, DirectBuffer src, int srcOffset, int length) {
                if (broken.get()) {
                    throw new FabricException("connection to the backup lost");
                }
                super.write(address, src, srcOffset, length);
            }

            @Override
            public void close() {
            }
        };
        ReplicatedRemoteMemory client = client(primary, failing, ReplicaSet.State.COMPLETE, failures);
        UnsafeBuffer value = new UnsafeBuffer(new byte[16]); // two words: a plain write (one word is converged instead)
        value.putLong(0, 7);
        long address = GlobalAddress.of(SERVER, FIRST);
        client.write(address, value, 0, 16);
        assertEquals(7, backup.readLong(address));

        broken.set(true);
        value.putLong(0, 8);
        FabricException e = assertThrows(FabricException.class, () -> client.write(address, value, 0, 16));
        assertTrue(e.getMessage().startsWith("memory server 0's backup backup failed a write in view 1: the change is on the primary"
                + " but not on every replica, so it does not count"), e.getMessage());
        assertEquals(List.of("backup: connection to the backup lost"), failures);
        assertEquals(7, backup.readLong(address), "the backup kept the last change that counted");
    }

    /**
     * Known race 1 of docs/replication.md, forced: A releases a lock word, and its release reaches the backup only after B
     * took the lock at the primary and converged it onto the backup. Written blindly, the late 0 would leave the backup
     * showing the lock free while B holds it, and a failover would promote that backup. Converged, it leaves B's tag.
     */
    @Test
    void aReleaseThatReachesTheBackupLateDoesNotFreeTheNextHoldersLock() throws Exception {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        long lock = GlobalAddress.of(SERVER, FIRST);
        long tagA = 11;
        long tagB = 22;
        java.util.concurrent.CountDownLatch releaseAtPrimary = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch bConverged = new java.util.concurrent.CountDownLatch(1);
        AtomicBoolean holdBack = new AtomicBoolean();
        // A's backup: once armed, its first verb on the backup waits until B's acquire is converged there.
        RemoteMemory late = new ForwardingRemoteMemory(backup) {
            private void waitForB() {
                if (holdBack.compareAndSet(true, false)) {
                    releaseAtPrimary.countDown();
                    try {
                        assertTrue(bConverged.await(10, java.util.concurrent.TimeUnit.SECONDS));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }

            @Override
            public void write(long address, DirectBuffer src, int srcOffset, int length) {
                waitForB();
                super.write(address, src, srcOffset, length);
            }

            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                waitForB();
                return super.compareAndSwap(address, expected, desired);
            }

            @Override
            public void close() {
            }
        };
        ReplicatedRemoteMemory a = client(primary, late, ReplicaSet.State.COMPLETE, failures);
        ReplicatedRemoteMemory b = client(primary, backup, ReplicaSet.State.COMPLETE, failures);
        assertEquals(0, a.compareAndSwap(lock, 0, tagA), "A takes the lock");
        assertEquals(tagA, backup.readLong(lock), "A's acquire is on the backup");
        holdBack.set(true);
        UnsafeBuffer zero = new UnsafeBuffer(new byte[8]);
        Thread release = new Thread(() -> a.write(lock, zero, 0, 8)); // RemoteNodes.unlock: a word's write of 0
        release.start();
        assertTrue(releaseAtPrimary.await(10, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(0, primary.readLong(lock), "A's release reached the primary");
        assertEquals(0, b.compareAndSwap(lock, 0, tagB), "B takes the lock at the primary");
        assertEquals(tagB, backup.readLong(lock), "B's acquire was converged onto the backup");
        bConverged.countDown();
        release.join(10_000);
        assertTrue(failures.isEmpty(), failures.toString());
        assertEquals(tagB, primary.readLong(lock));
        assertEquals(tagB, backup.readLong(lock), "a backup promoted now shows the lock held by B, who holds it");
    }

    /**
     * Known race 2 of docs/replication.md, forced: A's release of a lock stalls between its read of the primary and its
     * swap on the backup. Meanwhile B takes the lock and gives it back, and A (another session of the same tag) takes it
     * again, so the backup's word comes back to the value the stalled swap expects. Then the primary dies before the
     * stalled release could look at it again. Unordered, the swap lands and leaves the backup showing the lock free while
     * A holds it; with the backup's {@link WordOrder}, B's and A's convergences wait for the stalled one and land after it.
     */
    @Test
    void aStalledConvergenceCannotMoveTheBackupBackWhenAValueComesBack() throws Exception {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        WordOrder order = new WordOrder();
        List<String> failures = new CopyOnWriteArrayList<>();
        long lock = GlobalAddress.of(SERVER, FIRST);
        long tagA = 11;
        long tagB = 22;
        java.util.concurrent.CountDownLatch stalled = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch resume = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicInteger swaps = new java.util.concurrent.atomic.AtomicInteger();
        AtomicBoolean armed = new AtomicBoolean();
        AtomicBoolean primaryDead = new AtomicBoolean();
        // The stalled release's connections: its second swap on the backup waits; once it goes on, the primary is dead.
        RemoteMemory stallingBackup = new ForwardingRemoteMemory(backup) {
            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                if (armed.get() && swaps.incrementAndGet() == 2) {
                    stalled.countDown();
                    try {
                        assertTrue(resume.await(10, java.util.concurrent.TimeUnit.SECONDS));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    primaryDead.set(true);
                }
                return super.compareAndSwap(address, expected, desired);
            }

            @Override
            public void close() {
            }
        };
        RemoteMemory dyingPrimary = new ForwardingRemoteMemory(primary) {
            @Override
            public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
                if (primaryDead.get()) {
                    throw new FabricException("the primary died");
                }
                super.read(address, dst, dstOffset, length);
            }

            @Override
            public void close() {
            }
        };
        ReplicatedRemoteMemory a = ordered(dyingPrimary, stallingBackup, order, failures);
        ReplicatedRemoteMemory b = ordered(primary, backup, order, failures);
        ReplicatedRemoteMemory aAgain = ordered(primary, backup, order, failures);
        assertEquals(0, a.compareAndSwap(lock, 0, tagA), "A takes the lock");
        armed.set(true);
        UnsafeBuffer zero = new UnsafeBuffer(new byte[8]);
        Thread release = new Thread(() -> {
            try {
                a.write(lock, zero, 0, 8);
            } catch (FabricException primaryGone) {
                // The unordered rule reads the primary again after its swap, and finds it dead: unknown outcome.
            }
        });
        release.start();
        assertTrue(stalled.await(10, java.util.concurrent.TimeUnit.SECONDS), "A's release stalls before its swap on the backup");
        assertEquals(0, primary.readLong(lock), "A's release took effect at the primary");
        long[] heldBy = new long[1];
        Thread others = new Thread(() -> {
            assertEquals(0, b.compareAndSwap(lock, 0, tagB), "B takes the lock");
            b.write(lock, zero, 0, 8);
            heldBy[0] = aAgain.compareAndSwap(lock, 0, tagA) == 0 ? tagA : -1;
        });
        others.start();
        others.join(300); // unordered, B's turn and A's new acquire are acknowledged by now; ordered, they wait
        resume.countDown();
        release.join(10_000);
        others.join(10_000);
        assertEquals(tagA, heldBy[0], "A took the lock again, and that acquire was acknowledged");
        assertEquals(tagA, primary.readLong(lock));
        assertEquals(tagA, backup.readLong(lock), "the primary is dead: the backup promoted now must show A's lock, which A holds");
        assertTrue(failures.isEmpty(), "no backup failed: " + failures);
    }

    @Test
    void aPrimaryThatFailsDuringAConvergenceIsNotReportedAsTheBackupFailing() {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        RemoteMemory readsFail = new ForwardingRemoteMemory(primary) {
            @Override
            public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
                throw new FabricException("the primary died");
            }

            @Override
            public void close() {
            }
        };
        long word = GlobalAddress.of(SERVER, FIRST);
        for (WordOrder order : new WordOrder[] {null, new WordOrder()}) {
            ReplicatedRemoteMemory client = ordered(readsFail, backup, order, failures);
            FabricException e = assertThrows(FabricException.class, () -> client.fetchAndAdd(word, 1));
            assertEquals("the primary died", e.getMessage(), "the primary's failure, with its outcome unknown");
        }
        assertTrue(failures.isEmpty(), "the backup did nothing wrong, so it is not reported: " + failures);
    }

    /**
     * A change a backup failed counts only in a newer view every replica of which holds it. When the next view is instead
     * a failover to the backup that failed it, the change fails (outcome unknown) at once, not after the failover wait.
     */
    @Test
    void aChangeABackupFailedFailsWhenTheNextViewPromotesThatBackup() {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        ReplicaSet.Replica p = new ReplicaSet.Replica("primary", primary, ReplicaSet.State.COMPLETE);
        ReplicatedRemoteMemory client = patient(new ReplicaSet(1, p,
                List.of(new ReplicaSet.Replica("backup", dead(backup), ReplicaSet.State.COMPLETE))), failures, Duration.ofSeconds(30));
        installLater(client, new ReplicaSet(2, new ReplicaSet.Replica("backup", backup, ReplicaSet.State.COMPLETE), List.of()));
        UnsafeBuffer value = new UnsafeBuffer(new byte[16]);
        long start = System.nanoTime();
        FabricException e = assertThrows(FabricException.class, () -> client.write(GlobalAddress.of(SERVER, FIRST), value, 0, 16));
        assertTrue(e.getMessage().contains("backup backup failed a write in view 1"), e.getMessage());
        assertTrue(System.nanoTime() - start < 10_000_000_000L, "it failed when the failover came, not after the 30 s wait");
        assertEquals(List.of("backup"), failures, "the backup was reported");
    }

    /** A backup that refuses every write and swap, as a dead one does. */
    private static RemoteMemory dead(RemoteMemory backup) {
        return new ForwardingRemoteMemory(backup) {
            @Override
            public void write(long address, DirectBuffer src, int srcOffset, int length) {
                throw new FabricException("the backup died");
            }

            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                throw new FabricException("the backup died");
            }

            @Override
            public void submit(dev.dex.rdma.VerbBatch batch) {
                batch.runEach(this);
            }

            @Override
            public void close() {
            }
        };
    }

    /** A client of one server in {@code view} that waits up to 5 s for a newer view, reporting failed backups by name. */
    private static ReplicatedRemoteMemory patient(ReplicaSet view, List<String> failures) {
        return patient(view, failures, Duration.ofSeconds(5));
    }

    private static ReplicatedRemoteMemory patient(ReplicaSet view, List<String> failures, Duration failoverWait) {
        return new ReplicatedRemoteMemory(Map.of(SERVER, view), new long[] {REGION}, new long[] {CHUNK}, Duration.ofSeconds(1),
                failoverWait, (server, v, name, cause) -> failures.add(name), () -> { });
    }

    private static void installLater(ReplicatedRemoteMemory client, ReplicaSet next) {
        Thread later = new Thread(() -> {
            LockSupport.parkNanos(100_000_000L);
            client.install(SERVER, next);
        });
        later.start();
    }

    /**
     * Three replicas, one backup dead: a batch's writes still reach the other backup, so that when the next view leaves
     * the dead one out, the writes count on every replica it has; the dead backup is reported once for the batch.
     */
    @Test
    void aBatchThatOneOfTwoBackupsFailedReachesTheOtherAndCountsInTheViewWithoutIt() {
        RemoteMemory primary = replica();
        RemoteMemory first = replica();
        RemoteMemory second = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        ReplicaSet.Replica p = new ReplicaSet.Replica("primary", primary, ReplicaSet.State.COMPLETE);
        ReplicaSet.Replica b2 = new ReplicaSet.Replica("b2", second, ReplicaSet.State.COMPLETE);
        ReplicatedRemoteMemory client = patient(new ReplicaSet(1, p,
                List.of(new ReplicaSet.Replica("b1", dead(first), ReplicaSet.State.COMPLETE), b2)), failures);
        installLater(client, new ReplicaSet(2, p, List.of(b2)));
        UnsafeBuffer pages = new UnsafeBuffer(new byte[512]);
        pages.setMemory(0, 512, (byte) 9);
        dev.dex.rdma.VerbBatch batch = new dev.dex.rdma.VerbBatch(2);
        batch.write(GlobalAddress.of(SERVER, FIRST), pages, 0, 256);
        batch.write(GlobalAddress.of(SERVER, FIRST + 256), pages, 256, 256);
        client.submit(batch);
        assertEquals(null, batch.firstFailure(), "both writes count in view 2");
        assertEquals(0x0909090909090909L, second.readLong(GlobalAddress.of(SERVER, FIRST)), "the live backup has the first page");
        assertEquals(0x0909090909090909L, second.readLong(GlobalAddress.of(SERVER, FIRST + 256)), "and the second");
        assertEquals(List.of("b1"), failures, "one report of the dead backup for the batch");
    }

    /**
     * A change a backup failed counts only when every view since its own was seen: a view that went by unseen may have
     * had a primary without it, from which a later one was copied. The client then cannot tell, and the change fails.
     */
    @Test
    void aChangeABackupFailedFailsWhenAViewWentByUnseen() {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        ReplicaSet.Replica p = new ReplicaSet.Replica("primary", primary, ReplicaSet.State.COMPLETE);
        ReplicatedRemoteMemory client = patient(new ReplicaSet(1, p,
                List.of(new ReplicaSet.Replica("backup", dead(backup), ReplicaSet.State.COMPLETE))), failures);
        installLater(client, new ReplicaSet(3, p, List.of())); // view 2 never reached this client
        UnsafeBuffer value = new UnsafeBuffer(new byte[16]);
        long start = System.nanoTime();
        FabricException e = assertThrows(FabricException.class, () -> client.write(GlobalAddress.of(SERVER, FIRST), value, 0, 16));
        assertTrue(e.getMessage().contains("failed a write in view 1"), e.getMessage());
        assertTrue(System.nanoTime() - start < 4_000_000_000L, "it failed when view 3 came, not after the 5 s wait");
    }

    /**
     * A replica is added while a release is converged: the primary's gate moves to the new view between the release and
     * its convergence's read of the primary. The convergence goes on in the new view, which keeps the primary, and the
     * release counts; before, it failed with an unknown outcome and the backup kept the lock held.
     */
    @ParameterizedTest(name = "the next view installed: {0}")
    @ValueSource(longs = {2, 3})
    void aConvergenceGoesOnWhenTheViewChangesButKeepsThePrimary(long nextView) {
        RemoteMemory primaryRegion = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        ViewGate gate = new ViewGate(SERVER, "primary", 1);
        AtomicBoolean moveOnRead = new AtomicBoolean();
        ReplicatedRemoteMemory[] client = new ReplicatedRemoteMemory[1];
        ReplicaSet.Replica b = new ReplicaSet.Replica("backup", backup, ReplicaSet.State.COMPLETE, new WordOrder());
        RemoteMemory primaryInView1 = new ForwardingRemoteMemory(new GatedRemoteMemory(primaryRegion, gate, 1)) {
            @Override
            public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
                if (moveOnRead.getAndSet(false)) {
                    gate.advance(nextView); // a replica is added: the coordinator moves the primary, then the clients
                    client[0].install(SERVER, new ReplicaSet(nextView, new ReplicaSet.Replica("primary",
                            new GatedRemoteMemory(primaryRegion, gate, nextView), ReplicaSet.State.COMPLETE), List.of(b)));
                }
                super.read(address, dst, dstOffset, length);
            }

            @Override
            public void close() {
            }
        };
        client[0] = patient(new ReplicaSet(1, new ReplicaSet.Replica("primary", primaryInView1, ReplicaSet.State.COMPLETE),
                List.of(b)), failures);
        long lock = GlobalAddress.of(SERVER, FIRST);
        assertEquals(0, client[0].compareAndSwap(lock, 0, 11));
        moveOnRead.set(true);
        UnsafeBuffer zero = new UnsafeBuffer(new byte[8]);
        if (nextView == 3) {
            // View 2 never reached this client: another replica may have been primary in it, and this one copied from
            // it since. The release's outcome is unknown.
            assertThrows(StaleViewException.class, () -> client[0].write(lock, zero, 0, 8));
            return;
        }
        client[0].write(lock, zero, 0, 8);
        assertEquals(0, primaryRegion.readLong(lock));
        assertEquals(0, backup.readLong(lock), "the release reached the backup in the new view");
        assertTrue(failures.isEmpty(), failures.toString());
    }

    /** A replica that joins after a change a backup failed gets it by its copy: the change counts in its view. */
    @Test
    void aChangeABackupFailedCountsInAViewWithAReplicaAddedAfterIt() {
        RemoteMemory primary = replica();
        RemoteMemory fresh = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        ReplicaSet.Replica p = new ReplicaSet.Replica("primary", primary, ReplicaSet.State.COMPLETE);
        ReplicatedRemoteMemory client = patient(new ReplicaSet(1, p,
                List.of(new ReplicaSet.Replica("dead", dead(replica()), ReplicaSet.State.COMPLETE))), failures);
        installLater(client, new ReplicaSet(2, p, List.of(new ReplicaSet.Replica("new", fresh, ReplicaSet.State.COPYING))));
        UnsafeBuffer value = new UnsafeBuffer(new byte[16]);
        client.write(GlobalAddress.of(SERVER, FIRST), value, 0, 16);
        assertEquals(2, client.view(SERVER).view(), "it counted in view 2, whose new replica is copied after it");
    }

    /**
     * Ordered convergences install what they read at the primary, not their own change: A adds at the primary and stalls
     * before its convergence; B adds after it and converges first. A's turn, after B's, must leave the backup at B's sum.
     */
    @Test
    void anOrderedConvergenceThatComesLateInstallsThePrimarysWordNotItsOwn() throws Exception {
        RemoteMemory primary = replica();
        RemoteMemory backup = replica();
        List<String> failures = new CopyOnWriteArrayList<>();
        WordOrder order = new WordOrder();
        java.util.concurrent.CountDownLatch added = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch goOn = new java.util.concurrent.CountDownLatch(1);
        RemoteMemory stallAfterAdd = new ForwardingRemoteMemory(primary) {
            @Override
            public long fetchAndAdd(long address, long delta) {
                long previous = super.fetchAndAdd(address, delta);
                added.countDown();
                try {
                    assertTrue(goOn.await(10, java.util.concurrent.TimeUnit.SECONDS));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return previous;
            }

            @Override
            public void close() {
            }
        };
        ReplicatedRemoteMemory a = ordered(stallAfterAdd, backup, order, failures);
        ReplicatedRemoteMemory b = ordered(primary, backup, order, failures);
        long counter = GlobalAddress.of(SERVER, FIRST);
        java.util.concurrent.atomic.AtomicReference<Object> slowResult = new java.util.concurrent.atomic.AtomicReference<>();
        Thread slow = new Thread(() -> {
            try {
                slowResult.set(a.fetchAndAdd(counter, 1));
            } catch (Throwable t) {
                slowResult.set(t);
            }
        });
        slow.start();
        assertTrue(added.await(10, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(1, b.fetchAndAdd(counter, 1), "B adds after A at the primary");
        assertEquals(2, backup.readLong(counter), "B's convergence brought the backup to 2");
        goOn.countDown();
        slow.join(10_000);
        assertFalse(slow.isAlive());
        assertEquals(0L, slowResult.get(), "A's add returned, converged");
        assertEquals(2, primary.readLong(counter));
        assertEquals(2, backup.readLong(counter), "A's late turn did not move the backup back to A's own sum");
        assertTrue(failures.isEmpty(), failures.toString());
    }

    private static ReplicatedRemoteMemory ordered(RemoteMemory primary, RemoteMemory backup, WordOrder order, List<String> failures) {
        ReplicaSet set = new ReplicaSet(1, new ReplicaSet.Replica("primary", primary, ReplicaSet.State.COMPLETE),
                List.of(new ReplicaSet.Replica("backup", backup, ReplicaSet.State.COMPLETE, order)));
        return new ReplicatedRemoteMemory(Map.of(SERVER, set), new long[] {REGION}, new long[] {CHUNK}, Duration.ofSeconds(1),
                (server, view, name, cause) -> failures.add(name + ": " + cause.getMessage()), () -> { });
    }

    @Test
    void aReplicaRefusesAVerbOfAnOlderViewAndTakesNoEffect() {
        RemoteMemory region = replica();
        ViewGate gate = new ViewGate(SERVER, "r0", 3);
        GatedRemoteMemory old = new GatedRemoteMemory(region, gate, 2);
        GatedRemoteMemory current = new GatedRemoteMemory(region, gate, 3);
        long address = GlobalAddress.of(SERVER, FIRST);
        StaleViewException e = assertThrows(StaleViewException.class, () -> old.compareAndSwap(address, 0, 5));
        assertEquals("memory server 0's replica r0 is in view 3 and refuses a verb of view 2: the group changed; install its newer"
                + " view and send the change again", e.getMessage());
        assertEquals(0, region.readLong(address), "the refused verb took no effect");
        assertEquals(0, current.compareAndSwap(address, 0, 5));
        gate.advance(4);
        assertThrows(StaleViewException.class, () -> current.readLong(address));
        assertThrows(IllegalArgumentException.class, () -> gate.advance(3), "a view never goes back");
        gate.retire("the replica's memory node died");
        assertEquals("the replica's memory node died",
                assertThrows(FabricException.class, () -> new GatedRemoteMemory(region, gate, 9).readLong(address)).getMessage());
    }

    /** The copy's reads of the primary take 50 µs more: the window in which a write may slip between read and write. */
    private static RemoteMemory slowReads(RemoteMemory memory) {
        return new ForwardingRemoteMemory(memory) {
            @Override
            public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
                super.read(address, dst, dstOffset, length);
                LockSupport.parkNanos(50_000);
            }

            @Override
            public void close() {
            }
        };
    }

    /** Atomics reach the backup 2 ms late. */
    private static RemoteMemory slowAtomics(RemoteMemory memory) {
        return new ForwardingRemoteMemory(memory) {
            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                LockSupport.parkNanos(2_000_000);
                return super.compareAndSwap(address, expected, desired);
            }

            @Override
            public void close() {
            }
        };
    }
}
