package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.replica.LeaseLapsedException;
import dev.dex.rdma.replica.ReplicaEndpoints;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.tcp.ReplicaSettings;
import dev.dex.rdma.testing.TestResources;

/**
 * Read leases of {@code disni} replica groups (docs/replication.md, "Read leases"), on the device model: two replicas
 * of one server, each exported by a memory-side fabric of its own, and compute nodes on fabrics of their own. The case
 * they exist for: a replaced primary that its successor cannot depose (cut off) still serves one-sided READs, and a
 * compute node that missed the failover must not read there a value older than one the new view acknowledged.
 */
class DisniReadLeaseTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION = 64L * CHUNK;
    private static final int SERVER = 5;
    private static final long PAGE = GlobalAddress.of(SERVER, 2L * CHUNK);
    /** A 1 s lease (beats every 250 ms), a primary suspected after 750 ms, a fast copy. */
    private static final ReplicaSettings TIMING = new ReplicaSettings(Duration.ofSeconds(1), 256L << 20,
            ReplicaSettings.DEFAULTS.copyChunk(), Duration.ofMillis(750), Duration.ofSeconds(5));

    @AutoClose
    private final TestResources resources = new TestResources();
    private final DeviceModel model = new DeviceModel();
    private final DisniReplicaRegion[] replicas = new DisniReplicaRegion[2];
    private final DisniFabric stale;
    private final DisniFabric fresh;

    DisniReadLeaseTest() {
        for (int r = 0; r < replicas.length; r++) {
            DisniFabric memorySide = resources.closeAfter(model.fabric());
            memorySide.replication(TIMING);
            replicas[r] = resources.closeAfter(memorySide.exportReplica(SERVER, REGION, CHUNK));
        }
        stale = resources.closeAfter(model.fabric());
        stale.replication(TIMING);
        fresh = resources.closeAfter(model.fabric());
        fresh.replication(TIMING);
    }

    private ReplicaEndpoints endpoints(long view, int primary, int... backups) {
        return new ReplicaEndpoints(view, replicas[primary].endpoint(),
                java.util.Arrays.stream(backups).mapToObj(b -> replicas[b].endpoint()).toList());
    }

    private ReplicatedRemoteMemory connect(DisniFabric fabric, long client, Duration failoverWait, ReplicaEndpoints view) {
        return resources.closeAfter(fabric.connectGroups(Map.of(SERVER, view), client, failoverWait, (server, v, replica, cause) -> { }));
    }

    private static void put(ReplicatedRemoteMemory memory, long word) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[8]);
        buffer.putLong(0, word);
        memory.write(PAGE, buffer, 0, 8);
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

    /** Replica 0 primary of view 1, replica 1 a complete backup in view 2; a client of view 2 wrote 1 at the page. */
    private ReplicatedRemoteMemory groupOfTwoWithAClient() throws InterruptedException {
        replicas[0].becomePrimary(1);
        replicas[1].becomeBackup(2);
        replicas[0].installView(2, List.of(replicas[1].endpoint()));
        await("the backup is complete", replicas[1]::complete);
        ReplicatedRemoteMemory client = connect(stale, 0x51L, Duration.ofMillis(300), endpoints(2, 0, 1));
        put(client, 1);
        assertEquals(1L, client.readLong(PAGE), "read under the backup's lease");
        return client;
    }

    /**
     * The primary and its backup are cut off from each other: no beat reaches the backup, no deposition the old
     * primary. The backup is promoted and a client of the new view writes 2. A client that missed the failover finds the
     * old primary still serving its READs (it holds 1), but its lease ran out before the promotion took: its read fails
     * clearly rather than return 1, and once it installs the new view it reads 2.
     */
    @Test
    void aClientThatMissedTheFailoverReadsNothingOlderThanTheNewViewsChanges() throws Exception {
        ReplicatedRemoteMemory missed = groupOfTwoWithAClient();
        replicas[0].cutOff = true;
        replicas[1].cutOff = true;
        long start = System.nanoTime();

        replicas[1].becomePrimary(3);
        long promotedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        ReplicatedRemoteMemory next = connect(fresh, 0x52L, Duration.ofSeconds(1), endpoints(3, 1));
        put(next, 2);

        assertEquals(1L, replicas[0].region().getLongVolatile(GlobalAddress.offset(PAGE)), "the replaced primary still holds 1");
        LeaseLapsedException failed = assertThrows(LeaseLapsedException.class, () -> missed.readLong(PAGE),
                "a read of view 2 after the promotion");
        assertTrue(failed.getMessage().contains("view 2"), failed.getMessage());
        assertTrue(promotedAfterMs > 100, "the promotion waited for the lease it granted: " + promotedAfterMs + " ms");
        missed.install(SERVER, stale.replicaSet(SERVER, endpoints(3, 1), 0x51L));
        assertEquals(2L, missed.readLong(PAGE));
    }

    /**
     * A compute node keeps a lease link to a backup only while a view it is in names that backup: once a view without
     * the backup is installed, the link is closed; a view that names it again opens one anew, and reads go on.
     */
    @Test
    void theLeaseLinkToABackupDroppedFromTheViewIsClosed() throws Exception {
        ReplicatedRemoteMemory client = groupOfTwoWithAClient();
        assertEquals(1, stale.groups.leaseLinks(), "one link, to the backup of view 2");

        replicas[0].installView(3, List.of());
        assertTrue(client.install(SERVER, stale.replicaSet(SERVER, endpoints(3, 0), 0x51L)));
        assertEquals(0, stale.groups.leaseLinks(), "view 3 has no backup: the link is closed");
        assertEquals(1L, client.readLong(PAGE), "a view without backups reads without a lease");

        replicas[0].installView(4, List.of(replicas[1].endpoint()));
        await("the backup is complete in view 4", replicas[1]::complete);
        assertTrue(client.install(SERVER, stale.replicaSet(SERVER, endpoints(4, 0, 1), 0x51L)));
        assertEquals(1, stale.groups.leaseLinks(), "the backup is back: a link anew");
        put(client, 3);
        assertEquals(3L, client.readLong(PAGE), "read under the new link's lease");
    }

    /**
     * A backup that hears no beat from its primary grants nothing for longer than a lease after the last one: a client's
     * reads fail with the reason once its lease ran out. When the beats come again, so does the lease.
     */
    @Test
    void readsStopALeaseAfterTheBackupLastHeardItsPrimaryAndGoOnWhenItHearsItAgain() throws Exception {
        ReplicatedRemoteMemory client = groupOfTwoWithAClient();
        replicas[0].cutOff = true; // its beats fail

        await("the lease runs out", () -> {
            try {
                client.readLong(PAGE);
                return false;
            } catch (LeaseLapsedException lapsed) {
                assertTrue(lapsed.getMessage().contains("heard no heartbeat from its primary"), lapsed.getMessage());
                return true;
            }
        });
        replicas[0].cutOff = false;

        await("the lease is granted again", () -> {
            try {
                return client.readLong(PAGE) == 1L;
            } catch (LeaseLapsedException stillLapsed) {
                return false;
            }
        });
    }

    /** A backup that is not of the client's view, or is being promoted, grants nothing; one in a newer view says so. */
    @Test
    void aBackupGrantsOnlyInItsOwnViewAndNotWhileItIsPromoted() throws Exception {
        groupOfTwoWithAClient();
        await("a beat of view 2 reached the backup", () -> replicas[1].grantRead(2).isGranted());

        assertEquals(2L, replicas[1].grantRead(1).newerView());
        assertTrue(replicas[1].grantRead(3).why().contains("BACKUP in view 2"), replicas[1].grantRead(3).why());
        assertTrue(replicas[0].grantRead(2).why().contains("PRIMARY"), "a primary grants none");
        long granted = replicas[1].grantRead(2).nanos();
        assertTrue(granted > 0 && granted <= TIMING.lease().toNanos(), "at most a lease after the last beat: " + granted);
    }
}
