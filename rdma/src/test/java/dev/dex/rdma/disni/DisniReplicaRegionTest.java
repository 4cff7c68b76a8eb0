package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.GroupReplica;
import dev.dex.rdma.replica.ReplicaEndpoints;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.replica.StaleViewException;
import dev.dex.rdma.tcp.ReplicaSettings;
import dev.dex.rdma.testing.TestResources;

/**
 * The memory nodes' side of a {@code disni} replica group (docs/replication.md): three replicas of one server, each
 * exported by a memory-side fabric of its own with the production control fabric ({@code tcp} on loopback) and one
 * {@link InJvmRdmaTransport} standing for the network, given their parts as the cluster's coordinator gives them. The
 * replicas learn of each other only from their messages: beats, copy progress and depositions.
 */
class DisniReplicaRegionTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION = 256L * CHUNK; // 1 MiB: a copy of a second at 1 MiB/s
    private static final int SERVER = 3;
    private static final long CLIENT = 0xD15C0L;
    /** Beats every 25 ms, a primary suspected after 200 ms of silence; the slowest copy rate allowed. */
    private static final ReplicaSettings TIMING = new ReplicaSettings(Duration.ofMillis(100), 1L << 20,
            ReplicaSettings.DEFAULTS.copyChunk(), Duration.ofMillis(200), Duration.ofSeconds(5));

    @AutoClose
    private final TestResources resources = new TestResources();
    private final DeviceModel model = new DeviceModel();
    private final InJvmRdmaTransport network = model.network();
    private final DisniFabric[] memorySide = new DisniFabric[3];
    private final DisniReplicaRegion[] replicas = new DisniReplicaRegion[3];
    private final DisniFabric computeSide;

    DisniReplicaRegionTest() {
        for (int r = 0; r < replicas.length; r++) {
            memorySide[r] = resources.closeAfter(model.fabric());
            memorySide[r].replication(TIMING);
            replicas[r] = resources.closeAfter(memorySide[r].exportReplica(SERVER, REGION, CHUNK));
        }
        computeSide = resources.closeAfter(model.fabric());
    }

    private static long page(int index) {
        return GlobalAddress.of(SERVER, 2L * CHUNK + (long) index * 1024);
    }

    private static UnsafeBuffer image(long seed) {
        UnsafeBuffer page = new UnsafeBuffer(new byte[1024]);
        for (int i = 0; i < 1024; i += Long.BYTES) {
            page.putLong(i, seed * 1_000 + i);
        }
        return page;
    }

    private ReplicatedRemoteMemory connect(long view, int primary, int... backups) {
        return resources.closeAfter(computeSide.connectGroups(Map.of(SERVER, endpoints(view, primary, backups)), CLIENT,
                Duration.ofSeconds(5), (server, inView, replica, cause) -> { }));
    }

    private ReplicaEndpoints endpoints(long view, int primary, int... backups) {
        return new ReplicaEndpoints(view, replicas[primary].endpoint(),
                java.util.Arrays.stream(backups).mapToObj(b -> replicas[b].endpoint()).toList());
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 10 s: " + what);
            }
            TimeUnit.MILLISECONDS.sleep(10);
        }
    }

    /** In 300 ms: replica 1 becomes primary of view 3, and {@code memory} installs that view. */
    private CompletableFuture<Void> failOverToReplicaOneLater(ReplicatedRemoteMemory memory) {
        return CompletableFuture.runAsync(() -> {
            try {
                TimeUnit.MILLISECONDS.sleep(300);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            replicas[1].becomePrimary(3);
            memory.install(SERVER, computeSide.replicaSet(SERVER, endpoints(3, 1), CLIENT));
        });
    }

    private void assertSameBytes(int a, int b) {
        for (long offset = 0; offset < REGION; offset += Long.BYTES) {
            long x = replicas[a].region().getLongVolatile(offset);
            long y = replicas[b].region().getLongVolatile(offset);
            if (x != y) {
                throw new AssertionError("replicas " + a + " and " + b + " differ at offset " + offset + ": " + x + " vs " + y);
            }
        }
    }

    /** Replica 0 primary of view 1; replica 1 added as a backup in view 2 and copied while a client writes. */
    private ReplicatedRemoteMemory primaryWithBackupCopiedUnderWrites() throws Exception {
        replicas[0].becomePrimary(1);
        ReplicatedRemoteMemory memory = connect(1, 0);
        for (int i = 0; i < 64; i++) {
            memory.write(page(i), image(i), 0, 1024);
        }

        replicas[1].becomeBackup(2);
        assertFalse(replicas[1].complete());
        assertEquals(REGION, replicas[1].copyLeft());
        replicas[0].installView(2, List.of(replicas[1].endpoint()));
        assertTrue(memory.install(SERVER, computeSide.replicaSet(SERVER, endpoints(2, 0, 1), CLIENT)));
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong written = new AtomicLong();
        CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> {
            for (long n = 100; !stop.get(); n++) {
                memory.write(page((int) (n % 64)), image(n), 0, 1024);
                written.incrementAndGet();
            }
        });
        await("the copy reports progress", () -> replicas[1].copyLeft() < REGION && replicas[1].copyLeft() > 0);
        await("the backup is complete", replicas[1]::complete);
        stop.set(true);
        writer.get(10, TimeUnit.SECONDS);
        assertTrue(written.get() > 10, "writes ran during the copy: " + written.get());
        assertEquals(0, replicas[1].copyLeft());
        return memory;
    }

    @Test
    void aBackupAddedUnderWritesIsCopiedAndHoldsEveryByteOfItsPrimary() throws Exception {
        primaryWithBackupCopiedUnderWrites();

        assertSameBytes(0, 1);
        assertEquals(GroupReplica.Role.BACKUP, replicas[1].role());
        assertEquals(2, replicas[1].view());
        assertNull(replicas[1].primaryLost(), "its primary beats");
        assertEquals(Map.of(), replicas[0].lostBackups(), "its backup answers");
    }

    /**
     * A replica that becomes a backup takes the stamps of older views as its copy's ({@link ViewAtomics}, "Stamps"), and
     * one asked again in its view (its first answer failed) keeps the stamps it stored since: a stalled convergence
     * older than one stored is still not stored.
     */
    @Test
    void aBackupTakesOlderViewsStampsAsItsCopysAndKeepsItsBookWhenAskedAgain() {
        long word = GlobalAddress.of(SERVER, CHUNK);
        replicas[1].becomeBackup(2);
        dev.dex.rdma.replica.StampedWords backup = (dev.dex.rdma.replica.StampedWords) resources.closeAfter(
                computeSide.connect(Map.of(SERVER, replicas[1].endpoint()), CLIENT, 2));

        assertFalse(backup.setIfNewer(word, 9, 1, 50), "a change of view 1: the copy carries it");
        assertTrue(backup.setIfNewer(word, 5, 2, 7), "a change of view 2");
        replicas[1].becomeBackup(2);
        assertFalse(backup.setIfNewer(word, 4, 2, 6), "an older change of view 2, stalled, after the backup was asked again");
        assertEquals(5, replicas[1].region().getLongVolatile(GlobalAddress.offset(word)));
    }

    @Test
    void aClientOfTheViewBeforeTheBackupIsRefusedByThePrimary() throws Exception {
        replicas[0].becomePrimary(1);
        RemoteMemory old = resources.closeAfter(computeSide.connect(Map.of(SERVER, replicas[0].endpoint()), CLIENT, 1));
        replicas[1].becomeBackup(2);
        replicas[0].installView(2, List.of(replicas[1].endpoint()));

        assertThrows(StaleViewException.class, () -> old.write(page(0), image(9), 0, 1024),
                "no change reaches the primary without the new backup");
        assertEquals(0, replicas[0].region().getLongVolatile(GlobalAddress.offset(page(0))));
    }

    @Test
    void aBackupWhosePrimaryStopsReportsItLostAndCanTakeOver() throws Exception {
        ReplicatedRemoteMemory memory = primaryWithBackupCopiedUnderWrites();
        TimeUnit.MILLISECONDS.sleep(300);
        assertNull(replicas[1].primaryLost(), "a primary that beats is not lost");

        replicas[0].close();
        await("the backup reports its primary lost", () -> replicas[1].primaryLost() != null);
        assertTrue(replicas[1].primaryLost().contains(replicas[0].endpoint()), replicas[1].primaryLost());

        replicas[1].becomePrimary(3);
        assertTrue(memory.install(SERVER, computeSide.replicaSet(SERVER, endpoints(3, 1), CLIENT)));
        memory.write(page(5), image(555), 0, 1024);
        assertEquals(555_000L, replicas[1].region().getLongVolatile(GlobalAddress.offset(page(5))));
        assertNull(replicas[1].primaryLost(), "a primary suspects nobody above it");
    }

    /**
     * The primary's host dies: its keys are gone, so a READ fails with the access error, and neither the fence nor the
     * view can be asked (its control fabric is gone too): a failure of unknown cause. A pipelined batch's read goes again
     * in the next view as a single read does, because it changed nothing; the engine's scans and read-ahead use batches.
     */
    @Test
    void aBatchReadThatTheDeadPrimaryFailedRunsInTheNextView() throws Exception {
        ReplicatedRemoteMemory memory = primaryWithBackupCopiedUnderWrites();
        memory.write(page(3), image(333), 0, 1024);
        replicas[0].close(); // its keys revoked and its control region gone: as its host's death looks from here

        CompletableFuture<Void> failover = failOverToReplicaOneLater(memory);
        UnsafeBuffer readBack = new UnsafeBuffer(new byte[1024]);
        dev.dex.rdma.VerbBatch batch = new dev.dex.rdma.VerbBatch(2);
        batch.read(page(3), readBack, 0, 512);
        batch.read(page(3) + 512, readBack, 512, 512);
        memory.submit(batch);
        failover.get(10, TimeUnit.SECONDS);

        assertNull(batch.firstFailure(), "the reads ran again on the new primary");
        for (int i = 0; i < 1024; i += Long.BYTES) {
            assertEquals(333_000L + i, readBack.getLong(i), "at " + i);
        }
    }

    /**
     * A write the dead primary failed has an unknown outcome: a plain one fails (it may have landed, and another client
     * may have changed its bytes since), but an owned one (a redo-log append: bytes only this client writes) waits for
     * the next view and runs again there, as over {@code tcp}.
     */
    @Test
    void anOwnedWriteTheDeadPrimaryFailedRunsInTheNextViewAndAPlainOneFails() throws Exception {
        ReplicatedRemoteMemory memory = primaryWithBackupCopiedUnderWrites();
        replicas[0].close();

        assertThrows(dev.dex.rdma.FabricException.class, () -> memory.write(page(4), image(4), 0, 1024));

        CompletableFuture<Void> failover = failOverToReplicaOneLater(memory);
        dev.dex.rdma.OwnedWrites.write(memory, page(4), image(444), 0, 1024);
        failover.get(10, TimeUnit.SECONDS);

        assertEquals(444_000L, replicas[1].region().getLongVolatile(GlobalAddress.offset(page(4))), "written in view 3");
    }

    @Test
    void aPromotionDeposesTheReplacedPrimaryWhileItStillRuns() throws Exception {
        primaryWithBackupCopiedUnderWrites();
        RemoteMemory stale = resources.closeAfter(computeSide.connect(Map.of(SERVER, replicas[0].endpoint()), CLIENT, 2));
        long before = stale.readLong(page(1));

        replicas[1].becomePrimary(3);

        await("the replaced primary moves to view 3", () -> replicas[0].view() == 3);
        assertEquals(GroupReplica.Role.SOLE, replicas[0].role());
        assertFalse(replicas[0].complete(), "it may miss the new view's changes: copied again when it rejoins");
        assertThrows(StaleViewException.class, () -> stale.readLong(page(1)), "a client that missed the failover reads nothing there");
        assertThrows(StaleViewException.class, () -> stale.write(page(1), image(1), 0, 1024));
        assertEquals(before, replicas[0].region().getLongVolatile(GlobalAddress.offset(page(1))));
        assertThrows(IllegalStateException.class, () -> replicas[0].installView(4, List.of()), "no longer primary");
    }

    /**
     * The replaced primary misses its deposition (its successor's messages do not reach it); its own next beat to the
     * successor is answered by a primary of a newer view, and it deposes itself. Otherwise it would serve its old view
     * for good: the coordinator never adds a node that reports itself primary.
     */
    @Test
    void aReplacedPrimaryThatMissedItsDepositionLearnsItFromItsNextBeat() throws Exception {
        primaryWithBackupCopiedUnderWrites();
        replicas[1].cutOff = true;

        replicas[1].becomePrimary(3);

        await("the replaced primary moves to view 3", () -> replicas[0].view() == 3);
        assertEquals(GroupReplica.Role.SOLE, replicas[0].role());
        assertFalse(replicas[0].complete());
    }

    /**
     * An advance that fails (a key the device would not deregister) leaves the replica without a part, so that the
     * coordinator asks it again. A backup to be promoted keeps its completeness and takes the part when asked again.
     */
    @Test
    void aPromotionWhoseAdvanceFailedCanBeAskedAgain() throws Exception {
        primaryWithBackupCopiedUnderWrites(); // the client holds keys of view 2 at both replicas
        // This thread's: a deregistration of the finished copy's keys on another thread must not take it.
        network.failNextDeregistration(new IllegalStateException("injected: the device would not deregister"), Thread.currentThread());

        assertThrows(IllegalStateException.class, () -> replicas[1].becomePrimary(3));

        assertEquals(List.of(GroupReplica.Role.SOLE, true), List.of(replicas[1].role(), replicas[1].complete()));
        replicas[1].becomePrimary(3);
        assertEquals(List.of(GroupReplica.Role.PRIMARY, 3L), List.of(replicas[1].role(), replicas[1].view()));
    }

    /**
     * A complete backup dropped while it runs is not told, and still says complete. Added again, its advance fails: it
     * is incomplete at once, never a backup of the map that says complete from before (which a failover could promote,
     * losing the changes of the views it was out of), and without a part, so that the coordinator asks it again.
     */
    @Test
    void aBackupAddedAgainWhoseAdvanceFailedIsIncompleteAtOnce() throws Exception {
        primaryWithBackupCopiedUnderWrites(); // the client holds keys of view 2 at both replicas
        replicas[0].installView(3, List.of());
        assertEquals(List.of(GroupReplica.Role.BACKUP, true), List.of(replicas[1].role(), replicas[1].complete()),
                "dropped, and not told");
        network.failNextDeregistration(new IllegalStateException("injected: the device would not deregister"), Thread.currentThread());

        assertThrows(IllegalStateException.class, () -> replicas[1].becomeBackup(4));

        assertEquals(List.of(GroupReplica.Role.SOLE, false), List.of(replicas[1].role(), replicas[1].complete()));
        replicas[1].becomeBackup(4);
        assertEquals(List.of(GroupReplica.Role.BACKUP, false, 4L), List.of(replicas[1].role(), replicas[1].complete(), replicas[1].view()));
    }

    /** A copy that fails (a WRITE to the backup the device failed) starts again, and completes the backup. */
    @Test
    void aCopyThatFailedStartsAgain() throws Exception {
        replicas[0].becomePrimary(1);
        replicas[1].becomeBackup(2);
        network.failNextWorkRequest(new dev.dex.rdma.FabricException("injected: the copy's first WRITE failed"));
        long start = System.nanoTime();

        replicas[0].installView(2, List.of(replicas[1].endpoint()));

        await("the backup is complete", replicas[1]::complete);
        assertTrue(System.nanoTime() - start >= DisniReplicaRegion.COPY_RETRY.toNanos() / 2,
                "the first copy failed and a second one ran");
        assertSameBytes(0, 1);
    }

    /**
     * A view that moves only the primary (a backup dropped) reaches the other backups with a beat at once, not a quarter
     * lease later: the coordinator takes a backup's report of a lost primary only in the current view. Here beats come
     * every 10 s, and no copy's end (which beats too) comes in between.
     */
    @Test
    void aBackupLearnsItsPrimarysNewViewAtOnce() throws Exception {
        DisniReplicaRegion[] slow = new DisniReplicaRegion[3];
        for (int r = 0; r < slow.length; r++) {
            DisniFabric fabric = resources.closeAfter(model.fabric());
            fabric.replication(TIMING.withLease(Duration.ofSeconds(40)));
            slow[r] = resources.closeAfter(fabric.exportReplica(SERVER + 1, REGION, CHUNK));
        }
        slow[0].becomePrimary(1);
        slow[1].becomeBackup(2);
        slow[2].becomeBackup(2);
        slow[0].installView(2, List.of(slow[1].endpoint(), slow[2].endpoint()));
        await("both backups are complete", () -> slow[1].complete() && slow[2].complete());
        long start = System.nanoTime();

        slow[0].installView(3, List.of(slow[1].endpoint()));

        await("the first backup follows view 3", () -> slow[1].view() == 3);
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "well before the next beat, 10 s on");
    }

    @Test
    void aPrimaryReportsABackupThatStoppedAnswering() throws Exception {
        primaryWithBackupCopiedUnderWrites();

        replicas[1].close();

        await("the primary reports its backup lost", () -> replicas[0].lostBackups().containsKey(replicas[1].endpoint()));
        replicas[0].installView(3, List.of());
        assertEquals(Map.of(), replicas[0].lostBackups(), "a view without it reports nothing");
    }

    @Test
    void aBackupDroppedAndAddedAgainIsCopiedAgain() throws Exception {
        ReplicatedRemoteMemory memory = primaryWithBackupCopiedUnderWrites();
        replicas[0].installView(3, List.of());
        assertTrue(memory.install(SERVER, computeSide.replicaSet(SERVER, endpoints(3, 0), CLIENT)));
        memory.write(page(7), image(777), 0, 1024); // missed by the dropped backup

        replicas[1].becomeBackup(4);
        assertFalse(replicas[1].complete(), "whatever it held, it missed view 3");
        replicas[0].installView(4, List.of(replicas[1].endpoint()));

        await("the backup is complete again", replicas[1]::complete);
        assertEquals(777_000L, replicas[1].region().getLongVolatile(GlobalAddress.offset(page(7))));
        assertSameBytes(0, 1);
    }

    @Test
    void partsThatCannotHoldAreRefused() throws Exception {
        replicas[0].becomePrimary(1);
        replicas[1].becomeBackup(2);

        assertThrows(IllegalStateException.class, () -> replicas[1].becomePrimary(3), "a backup whose copy is not done");
        assertThrows(IllegalStateException.class, () -> replicas[1].installView(3, List.of()), "a backup installs no view");
        DisniFabric other = resources.closeAfter(model.fabric());
        DisniReplicaRegion ofAnotherServer = resources.closeAfter(other.exportReplica(SERVER + 1, REGION, CHUNK));
        IllegalStateException wrongServer = assertThrows(IllegalStateException.class,
                () -> replicas[0].installView(2, List.of(ofAnotherServer.endpoint())));
        assertTrue(wrongServer.getMessage().contains("memory server " + (SERVER + 1)), wrongServer.getMessage());
        assertThrows(IllegalStateException.class, () -> replicas[0].installView(2, List.of("not an endpoint")));
        assertEquals(1, replicas[0].view(), "a refused view moves nothing");
    }

    @Test
    void aLateDepositionLeavesAPrimaryOfANewerViewInPlace() throws Exception {
        primaryWithBackupCopiedUnderWrites();
        replicas[1].becomePrimary(3);
        await("the replaced primary moves to view 3", () -> replicas[0].view() == 3);
        replicas[0].becomeBackup(4);
        replicas[1].installView(4, List.of(replicas[0].endpoint()));
        await("the old primary is a complete backup again", replicas[0]::complete);
        replicas[0].becomePrimary(5); // replica 1 is deposed in turn; then a late word for view 3 reaches replica 0
        await("replica 1 moves to view 5", () -> replicas[1].view() == 5);

        try (RemoteMemory link = memorySide[2].controlLink(SERVER, replicas[0].endpoint())) {
            UnsafeBuffer request = new UnsafeBuffer(new byte[DisniReplicaRegion.HEADER]);
            request.putInt(0, RdmaGrants.MAGIC, java.nio.ByteOrder.LITTLE_ENDIAN);
            request.putByte(4, DisniReplicaRegion.DEPOSE);
            request.putLong(8, 3, java.nio.ByteOrder.LITTLE_ENDIAN);
            UnsafeBuffer answer = new UnsafeBuffer(new byte[dev.dex.rdma.MessageHandler.MAX_MESSAGE]);
            ((dev.dex.rdma.MessageSender) link).send(SERVER, request, 0, DisniReplicaRegion.HEADER, answer, 0);
        }

        assertEquals(GroupReplica.Role.PRIMARY, replicas[0].role());
        assertEquals(5, replicas[0].view());
        assertNotNull(replicas[0].region());
    }
}
