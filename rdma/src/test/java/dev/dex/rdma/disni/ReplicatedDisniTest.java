package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.replica.ReplicaEndpoints;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.replica.StaleViewException;
import dev.dex.rdma.testing.TestResources;

/**
 * The compute-side write path over {@code disni} (docs/replication.md): a memory server held by two replicas, each a
 * region of its own memory-side fabric with the production control fabric ({@code tcp} on loopback), and one
 * {@link InJvmRdmaTransport} standing for the network. A client writes every replica with one-sided WRITEs in its view,
 * runs atomics on the primary's memory node and converges them onto the backup's; after a failover the replicas refuse
 * the old view, and a verb they refused runs again in the view the client installs next.
 */
class ReplicatedDisniTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final int SERVER = 2;
    private static final long CLIENT = 0xC0FFEEL;
    private static final long WORD = GlobalAddress.of(SERVER, CHUNK);
    private static final long PAGE = GlobalAddress.of(SERVER, 2L * CHUNK);

    @AutoClose
    private final TestResources resources = new TestResources();
    private final DeviceModel model = new DeviceModel();
    private final InJvmRdmaTransport network = model.network();
    private final DisniFabric[] memorySide = new DisniFabric[2];
    private final ExportedRegion[] replicas = new ExportedRegion[2];
    private final DisniFabric computeSide;
    private final List<String> backupFailures = new CopyOnWriteArrayList<>();

    ReplicatedDisniTest() {
        for (int r = 0; r < 2; r++) {
            memorySide[r] = resources.closeAfter(model.fabric());
            replicas[r] = resources.closeAfter(memorySide[r].export(SERVER, 16L * CHUNK, CHUNK));
            memorySide[r].advanceView(SERVER, 1);
        }
        computeSide = resources.closeAfter(model.fabric());
        // The replicas here are plain regions moved by hand, not replicas with a part (which grant read leases):
        // this test is of the views' gate alone. DisniReadLeaseTest tests the leases.
        computeSide.groups.readLeases = false;
    }

    private ReplicatedRemoteMemory connectInViewOne() {
        return resources.closeAfter(computeSide.connectGroups(Map.of(SERVER, new ReplicaEndpoints(1, replicas[0].endpoint(),
                List.of(replicas[1].endpoint()))), CLIENT, Duration.ofSeconds(5),
                (server, view, replica, cause) -> backupFailures.add(replica + ": " + cause.getMessage())));
    }

    private static UnsafeBuffer page(long seed) {
        UnsafeBuffer page = new UnsafeBuffer(new byte[1024]);
        for (int i = 0; i < 1024; i += Long.BYTES) {
            page.putLong(i, seed * 1_000 + i);
        }
        return page;
    }

    private long word(int replica, long address) {
        return replicas[replica].region().getLongVolatile(GlobalAddress.offset(address));
    }

    @Test
    void writesAndAtomicsReachEveryReplicaBeforeTheyReturn() {
        ReplicatedRemoteMemory memory = connectInViewOne();

        memory.write(PAGE, page(7), 0, 1024);
        assertEquals(0, memory.compareAndSwap(WORD, 0, 5));
        assertEquals(5, memory.fetchAndAdd(WORD, 3));
        long chunk = memory.chunkAllocator().allocateChunk(SERVER);

        for (int r = 0; r < 2; r++) {
            for (int i = 0; i < 1024; i += Long.BYTES) {
                assertEquals(7_000L + i, word(r, PAGE + i), "replica " + r + " holds the page at " + i);
            }
            assertEquals(8, word(r, WORD), "replica " + r + " holds the swapped and added word");
            assertEquals(GlobalAddress.offset(chunk) / CHUNK + 1,
                    replicas[r].region().getLongVolatile(RegionHeaderDescriptor.NEXT_CHUNK_OFFSET), "replica " + r + "'s chunk index");
        }
        assertEquals(List.of(), backupFailures);
    }

    /**
     * A failover: the backup becomes primary of view 2 and the old primary is deposed (both move to view 2). A write
     * and a swap the client sends in view 1 meanwhile are refused by the new primary's keys and gate, wait for the
     * client to install view 2, and run there once; the deposed primary gets none of it.
     */
    @Test
    void aVerbRefusedByAFailoverRunsInTheViewInstalledNext() throws Exception {
        ReplicatedRemoteMemory memory = connectInViewOne();
        memory.write(PAGE, page(1), 0, 1024);
        memory.compareAndSwap(WORD, 0, 10);

        memorySide[1].advanceView(SERVER, 2);
        memorySide[0].advanceView(SERVER, 2);
        CompletableFuture<Long> refused = CompletableFuture.supplyAsync(() -> {
            memory.write(PAGE, page(2), 0, 1024);
            return memory.compareAndSwap(WORD, 10, 11);
        });
        TimeUnit.MILLISECONDS.sleep(200);
        assertFalse(refused.isDone(), "the verbs wait for a newer view");

        assertTrue(memory.install(SERVER, computeSide.replicaSet(SERVER, new ReplicaEndpoints(2, replicas[1].endpoint(), List.of()), CLIENT)));

        assertEquals(10, refused.get(10, TimeUnit.SECONDS), "the swap ran once, in view 2");
        assertEquals(11, word(1, WORD));
        assertEquals(2_000L, word(1, PAGE), "the new primary holds the page written in view 2");
        assertEquals(10, word(0, WORD), "nothing of the refused verbs reached the deposed primary (its view 1 keys are revoked)");
        assertEquals(1_000L, word(0, PAGE));
    }

    /** A backup that moved to a newer view before the client connects is no gone backup: the view is old. */
    @Test
    void aViewWhoseBackupMovedOnIsRefusedNotConnectedWithAGoneBackup() {
        memorySide[1].advanceView(SERVER, 3);

        assertThrows(StaleViewException.class, () -> computeSide.replicaSet(SERVER,
                new ReplicaEndpoints(2, replicas[0].endpoint(), List.of(replicas[1].endpoint())), CLIENT));

        assertEquals(List.of(), backupFailures);
    }

    /**
     * The backup's memory node goes away: a write fails on it, the backup is reported, and the write counts once a view
     * without the backup is installed (nothing is sent again).
     */
    @Test
    void aWriteABackupFailedCountsInTheViewWithoutIt() throws Exception {
        ReplicatedRemoteMemory memory = connectInViewOne();
        replicas[1].close();

        CompletableFuture<Void> write = CompletableFuture.runAsync(() -> memory.write(PAGE, page(3), 0, 1024));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (backupFailures.isEmpty() && System.nanoTime() < deadline) {
            TimeUnit.MILLISECONDS.sleep(5);
        }
        assertEquals(1, backupFailures.size(), "the backup is reported once: " + backupFailures);
        assertTrue(backupFailures.get(0).startsWith(replicas[1].endpoint()), backupFailures.get(0));
        assertFalse(write.isDone(), "the write waits for a view without the backup");

        memorySide[0].advanceView(SERVER, 2);
        memory.install(SERVER, computeSide.replicaSet(SERVER, new ReplicaEndpoints(2, replicas[0].endpoint(), List.of()), CLIENT));

        write.get(10, TimeUnit.SECONDS);
        assertEquals(3_000L, word(0, PAGE));
        List<Long> pageOnPrimary = new ArrayList<>();
        for (int i = 0; i < 1024; i += Long.BYTES) {
            pageOnPrimary.add(word(0, PAGE + i) - 3_000L - i);
        }
        assertTrue(pageOnPrimary.stream().allMatch(d -> d == 0), "the whole page is on the primary");
    }

    /**
     * A client that a backup fenced (fences reach the replicas one at a time) learns it at once: its write fails with the
     * fence, without waiting for a view without that backup, which would not make it count, and the backup, which did
     * nothing wrong, is not reported as failed.
     */
    @Test
    void aClientFencedByABackupFailsAtOnceAndBlamesNoBackup() {
        ReplicatedRemoteMemory memory = connectInViewOne();
        memory.write(PAGE, page(1), 0, 1024);
        assertTrue(memorySide[1].fence(SERVER, CLIENT));

        long start = System.nanoTime();
        FabricException failed = assertThrows(FabricException.class, () -> memory.write(PAGE, page(2), 0, 1024));
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(failed instanceof dev.dex.rdma.FencedException, "the fence itself: " + failed);
        assertTrue(millis < 2_000, "not the failover wait of 5 s: " + millis + " ms");
        assertEquals(List.of(), backupFailures, "no backup is blamed");
    }
}
