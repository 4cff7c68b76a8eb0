package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.testing.TestResources;

/**
 * What a replica keeps beside its region file ({@link ReplicaFile}; docs/replication.md, "The whole group restarts"): the
 * region's identity across restarts, and the last view in which the region held every change its group answered. The
 * record follows the replica's part (primary, complete backup, a copy under way), and a group whose every memory node
 * stopped serves again from a kept region, with what was acknowledged.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ReplicaRecordTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION = 1024L * CHUNK; // 4 MiB
    private static final ReplicaSettings FAST = new ReplicaSettings(Duration.ofMillis(200), 512L << 20, 64 << 10,
            Duration.ofMillis(150), Duration.ZERO);

    @AutoClose
    private final TestResources resources = new TestResources();
    @TempDir
    Path directory;

    /** A memory node of server 0 keeping its region in {@code name}'s directory. */
    private TcpFabric node(String name, ReplicaSettings replication) {
        TcpFabric fabric = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofSeconds(20)),
                replication, 0, directory.resolve(name), null));
        if (!name.startsWith("client")) {
            dev.dex.rdma.ExportedRegion region = fabric.attach(0, REGION, CHUNK);
            regions.put(fabric, region);
            endpoints.put(fabric, region.endpoint());
        }
        return fabric;
    }

    private final Map<TcpFabric, String> endpoints = new java.util.HashMap<>();
    private final Map<TcpFabric, dev.dex.rdma.ExportedRegion> regions = new java.util.HashMap<>();

    /** Stops a memory node as a crash would: its region file stays as it is. */
    private void stop(TcpFabric node) {
        regions.get(node).detach();
        node.close();
    }

    private String endpoint(TcpFabric fabric) {
        return endpoints.get(fabric);
    }

    /** What {@code name}'s record claims now (its incarnation is checked when a node opens it, not here). */
    private ReplicaStatus.Kept recorded(String name) {
        try {
            java.util.Properties lines = new java.util.Properties();
            lines.load(new java.io.StringReader(Files.readString(directory.resolve(name).resolve("replica-0.properties"))));
            String role = lines.getProperty("role");
            return role == null ? null : new ReplicaStatus.Kept(ReplicaStatus.Role.valueOf(role), Long.parseLong(lines.getProperty("view")));
        } catch (java.io.IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within 30 s: " + what);
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail("interrupted");
            }
        }
    }

    private static UnsafeBuffer word(long value) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        buffer.putLong(0, value);
        return buffer;
    }

    @Test
    void theRecordFollowsTheReplicasPartAndTheWholeGroupServesAgainFromTheLastPrimarysRegion() {
        TcpFabric a = node("a", FAST);
        TcpFabric b = node("b", FAST);
        ReplicaStatus fresh = a.replicaStatus(0);
        assertTrue(fresh.freshRegion(), "a region formatted by this run");
        assertNull(fresh.kept());
        assertNotEquals(0, fresh.regionId());
        assertNotEquals(fresh.regionId(), b.replicaStatus(0).regionId(), "each region has an identity of its own");

        b.becomeBackup(0, 1);
        assertNull(recorded("b"), "a backup not copied yet holds nothing its group answered");
        a.becomePrimary(0, 1, List.of(endpoint(b)));
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.PRIMARY, 1), recorded("a"));
        await("the backup's copy completes", () -> b.replicaStatus(0).complete());
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.BACKUP, 1), recorded("b"), "complete after its copy");

        RemoteMemory client = resources.closeAfter(node("client", FAST).connect(Map.of(0, endpoint(a)), 1));
        long slot = GlobalAddress.of(0, 9L * CHUNK);
        client.write(slot, word(41), 0, 8);
        long regionA = a.replicaStatus(0).regionId();
        long regionB = b.replicaStatus(0).regionId();
        client.close();
        stop(a);
        stop(b);

        // The whole group restarts on its kept regions. Each says what its region held, under the identity it had.
        TcpFabric bAgain = node("b", FAST);
        ReplicaStatus kept = bAgain.replicaStatus(0);
        assertEquals(ReplicaStatus.Role.SOLE, kept.role());
        assertFalse(kept.freshRegion());
        assertEquals(regionB, kept.regionId());
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.BACKUP, 1), kept.kept());
        TcpFabric aAgain = node("a", FAST);
        assertEquals(regionA, aAgain.replicaStatus(0).regionId());
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.PRIMARY, 1), aAgain.replicaStatus(0).kept());

        // The last primary's region serves as primary of the next view; the other is made a backup and copied again.
        bAgain.becomeBackup(0, 2);
        assertNull(recorded("b"), "a backup of a new view holds nothing of it before its copy");
        aAgain.becomePrimary(0, 2, List.of(endpoint(bAgain)));
        assertNull(aAgain.replicaStatus(0).kept(), "what was kept is said only until the replica takes a part");
        RemoteMemory again = resources.closeAfter(node("client-again", FAST).connect(Map.of(0, endpoint(aAgain)), 2));
        assertEquals(41, again.readLong(slot), "the acknowledged write was kept");
        again.write(slot, word(42), 0, 8);
        await("the backup's copy completes", () -> bAgain.replicaStatus(0).complete());
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.BACKUP, 2), recorded("b"));
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.PRIMARY, 2), recorded("a"));
    }

    @Test
    void aCopyCutShortKeepsNothingAndARestartedBackupWaitsOutTheOldPrimarysLease() throws Exception {
        TcpFabric a = node("a", FAST.withCopyRate(1L << 20)); // 4 MiB at 1 MiB/s: seconds
        TcpFabric b = node("b", FAST);
        b.becomeBackup(0, 1);
        a.becomePrimary(0, 1, List.of(endpoint(b)));
        await("a copy is under way", () -> b.replicaStatus(0).copyLeft() > 0 && b.replicaStatus(0).copyLeft() < REGION);
        stop(b);
        TcpFabric bAgain = node("b", FAST);
        assertNull(bAgain.replicaStatus(0).kept(), "a backup whose copy was cut short holds nothing complete");
        stop(bAgain);
        stop(a);

        // A complete backup restarted alone and made primary starts answering a whole lease after its process began: its
        // old primary may have answered until a lease after this backup's old process stopped acknowledging.
        ReplicaSettings longLease = FAST.withLease(Duration.ofSeconds(1));
        TcpFabric p = node("p", longLease);
        TcpFabric q = node("q", longLease);
        q.becomeBackup(0, 1);
        p.becomePrimary(0, 1, List.of(endpoint(q)));
        await("the backup's copy completes", () -> q.replicaStatus(0).complete());
        stop(q);
        long beforeStart = System.nanoTime();
        TcpFabric qAgain = node("q", longLease);
        assertEquals(ReplicaStatus.Role.BACKUP, qAgain.replicaStatus(0).kept().role());
        long asked = System.nanoTime();
        qAgain.becomePrimary(0, 2, List.of());
        long waited = System.nanoTime() - asked;
        // It was made between beforeStart and asked, so it waits at least until beforeStart + lease.
        long atLeast = longLease.lease().toNanos() - (asked - beforeStart) - Duration.ofMillis(20).toNanos();
        assertTrue(atLeast > 0 && waited >= atLeast, "promoted after " + waited / 1_000_000 + " ms; a lease from its start"
                + " needed at least " + atLeast / 1_000_000 + " ms more");
        p.close();
    }

    @Test
    void aRecordThatCannotBeReadIsAClearError() throws Exception {
        Path file = directory.resolve("replica-0.properties");
        Files.writeString(file, "region-id=1f\nregion-incarnation=5\nrole=CAPTAIN\nview=3\n");
        UncheckedIOException bad = assertThrows(UncheckedIOException.class, () -> ReplicaFile.open(0, file, false, () -> 5));
        assertTrue(bad.getMessage().contains("memory server 0") && bad.getMessage().contains(file.toString()), bad.getMessage());
        // A fresh region starts a new record whatever the old one said.
        ReplicaFile started = ReplicaFile.open(0, file, true, () -> 5);
        assertNull(started.kept());
        assertNotEquals(0x1f, started.regionId());
    }

    @Test
    void aDemotedPrimaryClaimsNothingAndANewViewIsClaimedByItsPrimary() {
        TcpFabric a = node("a", FAST);
        TcpFabric b = node("b", FAST);
        b.becomeBackup(0, 1);
        a.becomePrimary(0, 1, List.of(endpoint(b)));
        await("the backup's copy completes", () -> b.replicaStatus(0).complete());
        a.installView(0, 2, List.of(endpoint(b)));
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.PRIMARY, 2), recorded("a"), "a new view it installed");
        // The backup is made primary of view 3 while the old primary runs: the old one is refused and demoted.
        b.becomePrimary(0, 3, List.of());
        assertEquals(new ReplicaStatus.Kept(ReplicaStatus.Role.PRIMARY, 3), recorded("b"));
        await("the old primary learns it was replaced (its stream's heartbeat is refused)", () -> a.replicaStatus(0).role() == ReplicaStatus.Role.DEMOTED);
        assertNull(recorded("a"), "a replaced primary's region may hold what was never answered");
    }

    @Test
    void aRecordOfAnotherIncarnationOfTheRegionClaimsNothing() throws Exception {
        TcpFabric a = node("a", FAST);
        a.becomePrimary(0, 1, List.of());
        stop(a);
        Path file = directory.resolve("a").resolve("replica-0.properties");
        String claim = Files.readString(file);
        // The region is formatted anew, and the process dies before its new record is written: the old one is left.
        TcpFabric formatting = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS, FAST, 0, directory.resolve("a"), null));
        formatting.reformat(0, REGION, CHUNK).detach();
        formatting.close();
        Files.writeString(file, claim);
        TcpFabric again = node("a", FAST);
        assertNull(again.replicaStatus(0).kept(), "the claim was of the region before the format");
    }
}
