package dev.dex.rdma.local;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.replica.ReplicaEndpoints;
import dev.dex.rdma.replica.ReplicaGoneException;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;

/**
 * Replicas of one memory server exported by separate memory nodes on one {@code local} fabric, as the cluster runs them
 * (docs/replication.md, "The compute-side write path"): the parts the coordinator gives them, the primary's copy to a
 * backup under writes, the backup's view of its primary's death, and a compute node's verbs across the failover.
 */
class LocalReplicaRegionTest {
    private static final long REGION = 1L << 20;
    private static final int CHUNK = 4096;
    private static final long DATA = GlobalAddress.of(0, 2L * CHUNK);

    @Test
    void aBackupIsCopiedUnderWritesAndTakesOverWhenItsPrimaryDies() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            // 1 MiB at 8 MiB/s: the copy takes an eighth of a second, so the writer runs during it even on a loaded host
            // (at the default rate it took a millisecond, and a writer not scheduled meanwhile failed the test).
            fabric.copyRate(8L << 20);
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            primary.becomePrimary(1);
            List<String> failures = new CopyOnWriteArrayList<>();
            ReplicatedRemoteMemory client = fabric.connectGroups(Map.of(0, new ReplicaEndpoints(1, primary.endpoint(), List.of())),
                    (server, view, replica, cause) -> failures.add(replica));
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong written = new AtomicLong();
            Thread writer = new Thread(() -> {
                UnsafeBuffer words = new UnsafeBuffer(new byte[16]); // two words: a plain write (one word is converged)
                for (long i = 0; !stop.get(); i++) {
                    words.putLong(0, i + 1);
                    words.putLong(8, -(i + 1));
                    client.write(DATA + 16 * (i % 10_000), words, 0, 16);
                    written.incrementAndGet();
                }
            });
            writer.start();
            Thread.sleep(20);

            backup.becomeBackup(2);
            assertFalse(backup.complete(), "a backup that joins holds nothing yet");
            client.install(0, fabric.replicaSet(0, new ReplicaEndpoints(2, primary.endpoint(), List.of(backup.endpoint()))));
            long beforeCopy = written.get();
            primary.installView(2, List.of(backup.endpoint()));
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!backup.complete() && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertTrue(backup.complete(), "the copy finished");
            long afterCopy = written.get();
            assertEquals(0, backup.copyLeft());
            Thread.sleep(20);
            stop.set(true);
            writer.join();
            assertTrue(afterCopy > beforeCopy, "writes ran while the copy did: " + beforeCopy + " before it, " + afterCopy + " after");
            assertArrayEquals(bytes(primary), bytes(backup), "the backup holds every byte of the primary after a copy under writes");
            assertNull(backup.primaryLost());
            assertEquals(Map.of(), primary.lostBackups());
            assertTrue(failures.isEmpty(), failures.toString());

            assertTrue(fabric.killReplica(primary.endpoint()));
            assertTrue(primary.gone());
            assertEquals("memory server 0's primary replica " + primary.endpoint() + " is gone", backup.primaryLost());
            backup.becomePrimary(3);
            client.install(0, fabric.replicaSet(0, new ReplicaEndpoints(3, backup.endpoint(), List.of())));
            assertEquals(written.get(), read(client, DATA + 16 * ((written.get() - 1) % 10_000)), "the last write is on the new primary");
            assertFalse(fabric.killReplica("no-such-replica"));
            client.close();
        }
    }

    @Test
    void aPrimaryReportsItsBackupsThatAreGone() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion first = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion second = fabric.exportReplica(0, REGION, CHUNK);
            primary.becomePrimary(1);
            first.becomeBackup(2);
            second.becomeBackup(2);
            primary.installView(2, List.of(first.endpoint(), second.endpoint()));
            assertEquals(Map.of(), primary.lostBackups());
            fabric.killReplica(second.endpoint());
            assertEquals(Map.of(second.endpoint(), "memory server 0's backup replica " + second.endpoint() + " is gone"),
                    primary.lostBackups());
            assertEquals(Map.of(), first.lostBackups(), "only a primary reports backups");
            while (!first.complete()) {
                Thread.sleep(5);
            }
            primary.installView(3, List.of(first.endpoint()));
            assertEquals(Map.of(), primary.lostBackups(), "a view without it reports nothing");
        }
    }

    @Test
    void aDeposedPrimaryThatStillRunsRefusesTheOldViewAndACopyCutByANewViewStartsAgain() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.failoverWait(java.time.Duration.ZERO);
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            primary.becomePrimary(1);
            backup.becomeBackup(2);
            fabric.copyRate(4L << 20); // 1 MiB at 4 MiB/s: a quarter of a second
            primary.installView(2, List.of(backup.endpoint()));
            Thread.sleep(50);
            assertFalse(backup.complete(), "the copy is under way");
            fabric.copyRate(0);
            primary.installView(3, List.of(backup.endpoint())); // a new view cuts it: it starts again in view 3
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!backup.complete() && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertTrue(backup.complete(), "the copy started again in the new view and finished");
            assertEquals(3, backup.view(), "a backup reports the view its primary moved it to");

            ReplicatedRemoteMemory stale = fabric.connectGroups(Map.of(0, new ReplicaEndpoints(3, primary.endpoint(),
                    List.of(backup.endpoint()))), (server, view, replica, cause) -> { });
            backup.becomePrimary(4); // the old primary is alive, but the coordinator found it gone
            assertFalse(primary.gone());
            assertEquals(LocalReplicaRegion.Role.SOLE, primary.role(), "deposed: no part until it rejoins as a backup");
            assertFalse(primary.complete(), "it is copied again when it rejoins");
            assertThrows(dev.dex.rdma.replica.StaleViewException.class, () -> read(stale, DATA),
                    "a compute node that missed the failover reads nothing from the deposed primary");
            stale.close();
        }
    }

    @Test
    void aWriteTheDeadPrimaryRefusedRunsInTheNextView() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.failoverWait(java.time.Duration.ofSeconds(5));
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            ReplicatedRemoteMemory client = groupOfTwo(fabric, primary, backup);
            fabric.killReplica(primary.endpoint());
            later(() -> failOverTo(fabric, backup, client));
            UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
            word.putLong(0, 77);
            client.write(DATA, word, 0, 8);
            assertEquals(77, backup.region().getLongVolatile(GlobalAddress.offset(DATA)), "the write ran on the new primary");
            client.close();
        }
    }

    @Test
    void aBatchTheDeadPrimaryRefusedRunsInTheNextView() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.failoverWait(java.time.Duration.ofSeconds(5));
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            ReplicatedRemoteMemory client = groupOfTwo(fabric, primary, backup);
            UnsafeBuffer before = new UnsafeBuffer(new byte[64]);
            before.setMemory(0, 64, (byte) 5);
            client.write(DATA + 1024, before, 0, 64);
            fabric.killReplica(primary.endpoint());
            later(() -> failOverTo(fabric, backup, client));
            // A flush's batch of page writes and a read, as the engine sends them: pipelined, not one by one.
            UnsafeBuffer pages = new UnsafeBuffer(new byte[2 * 256]);
            pages.setMemory(0, 256, (byte) 1);
            pages.setMemory(256, 256, (byte) 2);
            UnsafeBuffer readBack = new UnsafeBuffer(new byte[64]);
            dev.dex.rdma.VerbBatch batch = new dev.dex.rdma.VerbBatch(3);
            batch.write(DATA, pages, 0, 256);
            batch.write(DATA + 256, pages, 256, 256);
            batch.read(DATA + 1024, readBack, 0, 64);
            long start = System.nanoTime();
            client.submit(batch);
            assertNull(batch.firstFailure(), "every verb the dead primary refused ran in the next view");
            assertTrue(System.nanoTime() - start >= 90_000_000L, "the batch waited for the new view");
            assertEquals(5, readBack.getByte(63), "the read was answered by the new primary");
            assertEquals(0x0101010101010101L, backup.region().getLongVolatile(GlobalAddress.offset(DATA)));
            assertEquals(0x0202020202020202L, backup.region().getLongVolatile(GlobalAddress.offset(DATA) + 256));

            fabric.failoverWait(java.time.Duration.ofMillis(200));
            ReplicatedRemoteMemory brief = fabric.connectGroups(Map.of(0, new ReplicaEndpoints(3, backup.endpoint(), List.of())),
                    (server, view, replica, cause) -> { });
            fabric.killReplica(backup.endpoint());
            dev.dex.rdma.VerbBatch lost = new dev.dex.rdma.VerbBatch(2);
            lost.write(DATA, pages, 0, 256);
            lost.write(DATA + 256, pages, 256, 256);
            brief.submit(lost);
            assertTrue(lost.failure(0) instanceof ReplicaGoneException, String.valueOf(lost.failure(0)));
            assertTrue(lost.failure(1) instanceof ReplicaGoneException, "no newer view came: each verb fails with its refusal");
            client.close();
            brief.close();
        }
    }

    /**
     * A backup dies: each change after that is on the primary but not on every replica, so it waits for the coordinator's
     * view without the dead backup, and counts there; no change fails, and nothing is sent twice.
     */
    @Test
    void aChangeADeadBackupFailedCountsOnceAViewLeavesItOut() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.failoverWait(java.time.Duration.ofSeconds(5));
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            ReplicatedRemoteMemory client = groupOfTwo(fabric, primary, backup);
            fabric.killReplica(backup.endpoint());
            Thread coordinator = later(() -> dropBackups(fabric, primary, client));
            long start = System.nanoTime();
            UnsafeBuffer two = new UnsafeBuffer(new byte[16]);
            two.putLong(0, 5);
            two.putLong(8, 6);
            client.write(DATA, two, 0, 16); // a plain write
            assertTrue(System.nanoTime() - start >= 90_000_000L, "it waited for the view without the dead backup");
            assertEquals(0, client.fetchAndAdd(DATA + 16, 7), "an atomic after it runs in the new view");
            assertEquals(7, primary.region().getLongVolatile(GlobalAddress.offset(DATA) + 16));
            coordinator.join();
            assertEquals(5, primary.region().getLongVolatile(GlobalAddress.offset(DATA)));
            assertEquals(6, primary.region().getLongVolatile(GlobalAddress.offset(DATA) + 8));
            assertEquals(3, client.view(0).view());
            client.close();
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"a swap", "a batch of writes"})
    void anAtomicOrABatchADeadBackupFailedCountsOnceAViewLeavesItOut(String change) throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.failoverWait(java.time.Duration.ofSeconds(5));
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            ReplicatedRemoteMemory client = groupOfTwo(fabric, primary, backup);
            fabric.killReplica(backup.endpoint());
            Thread coordinator = later(() -> dropBackups(fabric, primary, client));
            long start = System.nanoTime();
            if (change.equals("a swap")) {
                assertEquals(0, client.compareAndSwap(DATA, 0, 42), "the swap ran once, at the primary, and counts in view 3");
                assertEquals(42, primary.region().getLongVolatile(GlobalAddress.offset(DATA)));
            } else {
                UnsafeBuffer pages = new UnsafeBuffer(new byte[512]);
                pages.setMemory(0, 512, (byte) 3);
                dev.dex.rdma.VerbBatch batch = new dev.dex.rdma.VerbBatch(2);
                batch.write(DATA + 1024, pages, 0, 256);
                batch.write(DATA + 2048, pages, 256, 256);
                client.submit(batch);
                assertNull(batch.firstFailure(), "both pages count in view 3");
                assertEquals(0x0303030303030303L, primary.region().getLongVolatile(GlobalAddress.offset(DATA) + 2048));
            }
            assertTrue(System.nanoTime() - start >= 90_000_000L, "it waited for the view without the dead backup");
            coordinator.join();
            client.close();
        }
    }

    /**
     * A copy that stalled past its replica's drop and return must not complete the replica: it was made before the
     * changes of the views the replica was out of.
     */
    @Test
    void aCopyFromBeforeTheBackupWasAddedAgainDoesNotCompleteIt() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            groupOfTwo(fabric, primary, backup).close(); // copied in view 2
            primary.installView(3, List.of()); // dropped
            backup.becomeBackup(4); // added again: it must be copied again
            assertFalse(backup.complete());
            backup.copied(2); // the end of a copy of view 2 that stalled all this while
            assertFalse(backup.complete(), "a copy from before it was added again completes nothing");
            backup.copied(4);
            assertTrue(backup.complete(), "a copy of the view it was added in does");
        }
    }

    /**
     * A backup dropped while it still runs says complete; added again, it must be copied again, even when the primary's
     * new view reaches it before (or without) its own step to become a backup: it missed the changes made without it.
     */
    @Test
    void aBackupDroppedAndAddedAgainIsCopiedAgain() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            groupOfTwo(fabric, primary, backup).close(); // copied in view 2
            primary.installView(3, List.of()); // dropped: it still runs, and still says complete
            try (ReplicatedRemoteMemory alone = fabric.connectGroups(Map.of(0, new ReplicaEndpoints(3, primary.endpoint(), List.of())),
                    (server, view, replica, cause) -> { })) {
                UnsafeBuffer value = new UnsafeBuffer(new byte[16]);
                value.putLong(0, 4242);
                alone.write(DATA, value, 0, 16); // a change it misses
            }
            primary.installView(4, List.of(backup.endpoint())); // added again; its own step to become a backup is late
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!backup.complete() && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertTrue(backup.complete());
            assertEquals(4242, backup.region().getLongVolatile(GlobalAddress.offset(DATA)), "copied again, with the change it missed");
            backup.becomeBackup(4); // the late step changes nothing now
            assertTrue(backup.complete());
        }
    }

    /** Runs {@code change} 100 ms from now on a thread of its own, as a coordinator's next view would come. */
    private static Thread later(Runnable change) {
        Thread thread = new Thread(() -> {
            LockSupportSleep.millis(100);
            change.run();
        });
        thread.start();
        return thread;
    }

    /** The coordinator's failover to {@code backup} in view 3, and the compute node's install of it. */
    private static void failOverTo(LocalFabric fabric, LocalReplicaRegion backup, ReplicatedRemoteMemory client) {
        backup.becomePrimary(3);
        client.install(0, fabric.replicaSet(0, new ReplicaEndpoints(3, backup.endpoint(), List.of())));
    }

    /** The coordinator's view 3 of {@code primary} alone, and the compute node's install of it. */
    private static void dropBackups(LocalFabric fabric, LocalReplicaRegion primary, ReplicatedRemoteMemory client) {
        primary.installView(3, List.of());
        client.install(0, fabric.replicaSet(0, new ReplicaEndpoints(3, primary.endpoint(), List.of())));
    }

    /** Sleeps without a checked exception (a helper thread's pause). */
    private static final class LockSupportSleep {
        static void millis(long ms) {
            java.util.concurrent.locks.LockSupport.parkNanos(ms * 1_000_000L);
        }
    }

    @Test
    void aBackupWhoseCopyIsNotDoneCannotBecomePrimary() {
        try (LocalFabric fabric = new LocalFabric()) {
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            backup.becomeBackup(2);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> backup.becomePrimary(3));
            assertEquals("memory server 0's replica " + backup.endpoint() + " is a backup whose copy is not done: it cannot become primary",
                    e.getMessage());
            assertEquals(LocalReplicaRegion.Role.BACKUP, backup.role());
            assertThrows(IllegalStateException.class, () -> backup.installView(3, List.of()), "only a primary installs views");
        }
    }

    @Test
    void aVerbOnADeadPrimaryWaitsForTheNewViewAndRunsThere() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.failoverWait(java.time.Duration.ofSeconds(5));
            LocalReplicaRegion primary = fabric.exportReplica(0, REGION, CHUNK);
            LocalReplicaRegion backup = fabric.exportReplica(0, REGION, CHUNK);
            ReplicatedRemoteMemory client = groupOfTwo(fabric, primary, backup);
            fabric.killReplica(primary.endpoint());
            Thread failover = later(() -> failOverTo(fabric, backup, client));
            long start = System.nanoTime();
            assertEquals(0, client.compareAndSwap(DATA, 0, 42), "the swap the dead primary refused ran on the new one");
            assertTrue(System.nanoTime() - start >= 90_000_000L, "it waited for the new view");
            failover.join();
            assertEquals(42, read(client, DATA));
            assertEquals(42, backup.region().getLongVolatile(GlobalAddress.offset(DATA)));

            fabric.failoverWait(java.time.Duration.ZERO);
            ReplicatedRemoteMemory impatient = fabric.connectGroups(Map.of(0, new ReplicaEndpoints(3, backup.endpoint(), List.of())),
                    (server, view, replica, cause) -> { });
            fabric.killReplica(backup.endpoint());
            assertThrows(ReplicaGoneException.class, () -> impatient.readLong(DATA), "without a failover wait it fails at once");
            client.close();
            impatient.close();
        }
    }

    /** {@code primary} of view 1, then {@code backup} copied in view 2, and a compute node's client of view 2. */
    private static ReplicatedRemoteMemory groupOfTwo(LocalFabric fabric, LocalReplicaRegion primary, LocalReplicaRegion backup)
            throws InterruptedException {
        primary.becomePrimary(1);
        backup.becomeBackup(2);
        primary.installView(2, List.of(backup.endpoint()));
        while (!backup.complete()) {
            Thread.sleep(5);
        }
        return fabric.connectGroups(Map.of(0, new ReplicaEndpoints(2, primary.endpoint(), List.of(backup.endpoint()))),
                (server, view, replica, cause) -> { });
    }

    private static long read(ReplicatedRemoteMemory memory, long address) {
        return memory.readLong(address);
    }

    private static byte[] bytes(LocalReplicaRegion replica) {
        byte[] bytes = new byte[(int) REGION];
        replica.region().getBytes(0, new UnsafeBuffer(bytes), 0, bytes.length);
        return bytes;
    }
}
