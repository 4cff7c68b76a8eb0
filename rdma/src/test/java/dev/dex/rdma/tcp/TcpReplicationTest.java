package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.OwnedWrites;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.testing.TestResources;

/**
 * Replica groups on the tcp fabric (docs/replication.md): a primary streams every change to its backups and answers
 * only what they hold; a backup copies the region while the primary serves; a backup that becomes primary holds every
 * acknowledged write, counter increment and lock; a replaced primary changes nothing and answers nothing.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpReplicationTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION = 1024L * CHUNK; // 4 MiB
    private static final ReplicaSettings FAST = new ReplicaSettings(Duration.ofMillis(200), 512L << 20, 64 << 10,
            Duration.ofMillis(150), Duration.ZERO);

    @AutoClose
    private final TestResources resources = new TestResources();

    private TcpFabric fabric(ReplicaSettings replication) {
        return resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofSeconds(20)), replication, 0,
                null, null));
    }

    /** A memory node of server 0: its own fabric (own event loops) and region. */
    private record Node(TcpFabric fabric, ExportedRegion region) {
        String endpoint() {
            return region.endpoint();
        }

        ReplicaStatus status() {
            return fabric.replicaStatus(0);
        }
    }

    private Node node(ReplicaSettings replication, long length) {
        TcpFabric fabric = fabric(replication);
        return new Node(fabric, resources.closeAfter(fabric.export(0, length, CHUNK)));
    }

    private RemoteMemory client(Node at, long clientId) {
        return resources.closeAfter(fabric(FAST).connect(Map.of(0, at.endpoint()), clientId));
    }

    /** A primary in view 1 with one backup whose copy is complete. */
    private Node[] group(ReplicaSettings replication, long length) {
        Node primary = node(replication, length);
        Node backup = node(replication, length);
        backup.fabric.becomeBackup(0, 1);
        primary.fabric.becomePrimary(0, 1, List.of(backup.endpoint()));
        await("the backup's copy completes", () -> primary.status().backups().stream().allMatch(ReplicaStatus.Backup::complete)
                && backup.status().complete());
        return new Node[] {primary, backup};
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

    private static byte[] bytes(ExportedRegion region) {
        byte[] all = new byte[(int) region.region().length()];
        region.region().getBytes(0, new UnsafeBuffer(all), 0, all.length);
        return all;
    }

    private static void awaitQuiet(Node primary) {
        await("every change is acknowledged", () -> primary.status().committed() == primary.status().applied());
    }

    @Test
    void aBackupHoldsExactlyThePrimarysRegionAfterConcurrentWritesSwapsAndAdds() throws Exception {
        Node[] group = group(FAST, REGION);
        RemoteMemory memory = client(group[0], 1);
        List<Thread> threads = new ArrayList<>();
        java.util.concurrent.atomic.AtomicLong changes = new java.util.concurrent.atomic.AtomicLong();
        for (int t = 0; t < 4; t++) {
            int thread = t;
            threads.add(new Thread(() -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                byte[] page = new byte[1024];
                for (int i = 0; i < 2_000; i++) {
                    long slot = GlobalAddress.of(0, CHUNK + 8L * random.nextInt(4096));
                    changes.incrementAndGet();
                    switch (random.nextInt(4)) {
                        case 0 -> memory.write(slot, word(random.nextLong()), 0, 8);
                        case 1 -> {
                            long expected = memory.readLong(slot);
                            long desired = thread * 1_000_000L + i;
                            if (memory.compareAndSwap(slot, expected, desired) != expected || expected == desired) {
                                changes.decrementAndGet(); // a swap that did not happen changes nothing
                            }
                        }
                        case 2 -> memory.fetchAndAdd(slot, 1);
                        default -> {
                            random.nextBytes(page);
                            memory.write(GlobalAddress.of(0, CHUNK * (64L + random.nextInt(512))), new UnsafeBuffer(page), 0, page.length);
                        }
                    }
                }
            }));
        }
        threads.forEach(Thread::start);
        for (Thread thread : threads) {
            thread.join();
        }
        awaitQuiet(group[0]);
        assertEquals(changes.get(), group[0].status().applied(), "every change, and nothing else, got a number");
        assertEquals(group[0].status().applied(), group[1].status().applied());
        assertArrayEquals(bytes(group[0].region()), bytes(group[1].region()), "the backup's region is the primary's");
    }

    @Test
    void aBackupRefusesClientsWithAClearError() {
        Node[] group = group(FAST, REGION);
        // As for any memory server that cannot be reached, connect says so with IllegalArgumentException.
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> client(group[1], 7));
        assertTrue(refused.getMessage().contains("backup"), refused.getMessage());
        IllegalStateException memorySide = assertThrows(IllegalStateException.class,
                () -> group[1].region().memorySideWrites().change(CHUNK, 8, () -> fail("a backup applies no memory-side change")));
        assertTrue(memorySide.getMessage().contains("backup"), memorySide.getMessage());
    }

    @Test
    void memorySideChangesAndFencesReachTheBackup() {
        Node[] group = group(FAST, REGION);
        long offset = 3L * CHUNK;
        group[0].region().memorySideWrites().change(offset, 16, () -> {
            group[0].region().region().putLongVolatile(offset, 41);
            group[0].region().region().putLongVolatile(offset + 8, 42);
        });
        RemoteMemory fencer = client(group[0], 2);
        client(group[0], 3);
        assertTrue(fencer.fence(3));
        awaitQuiet(group[0]);
        assertEquals(41, group[1].region().region().getLongVolatile(offset));
        assertEquals(42, group[1].region().region().getLongVolatile(offset + 8));

        group[0].fabric().close(); // the primary's node dies
        group[1].fabric().becomePrimary(0, 2, List.of());
        assertThrows(FencedException.class, () -> client(group[1], 3), "the new primary refuses the fenced client too");
        assertEquals(42, client(group[1], 4).readLong(GlobalAddress.of(0, offset + 8)));
    }

    @Test
    void aBackupJoinsWhileThePrimaryServesWritesAndEndsIdentical() throws Exception {
        ReplicaSettings slowCopy = FAST.withCopyRate(32L << 20);
        Node primary = node(slowCopy, 8 * REGION); // 32 MiB: about a second of copy under load
        primary.fabric.becomePrimary(0, 1, List.of());
        RemoteMemory memory = client(primary, 1);
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> writers = new ArrayList<>();
        long[] written = new long[2];
        for (int t = 0; t < 2; t++) {
            int thread = t;
            writers.add(new Thread(() -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                byte[] page = new byte[4096];
                while (!stop.get()) {
                    random.nextBytes(page);
                    long at = GlobalAddress.of(0, CHUNK * (2L + random.nextInt(8 * 1024 - 2)));
                    memory.write(at, new UnsafeBuffer(page), 0, page.length);
                    memory.fetchAndAdd(GlobalAddress.of(0, CHUNK), 1);
                    written[thread]++;
                }
            }));
        }
        writers.forEach(Thread::start);
        Thread.sleep(100);
        Node backup = node(slowCopy, 8 * REGION);
        backup.fabric.becomeBackup(0, 2);
        primary.fabric.installView(0, 2, List.of(backup.endpoint()));
        await("a copy is under way", () -> backup.status().copyLeft() > 0 && backup.status().copyLeft() < 8 * REGION);
        IllegalStateException early = assertThrows(IllegalStateException.class, () -> backup.fabric.becomePrimary(0, 3, List.of()));
        assertTrue(early.getMessage().contains("not complete"), early.getMessage());
        await("the copy completes", () -> backup.status().complete());
        Thread.sleep(100);
        stop.set(true);
        for (Thread writer : writers) {
            writer.join();
        }
        awaitQuiet(primary);
        assertTrue(written[0] + written[1] > 100, "writes went on during the copy");
        assertEquals(written[0] + written[1], primary.region().region().getLongVolatile(CHUNK));
        assertArrayEquals(bytes(primary.region()), bytes(backup.region()), "copy plus stream gave the primary's region");
    }

    @Test
    void aReplacedPrimaryAnswersNothingAndChangesNothingTheNewOneHas() {
        Node[] group = group(FAST, REGION);
        RemoteMemory stale = client(group[0], 1);
        long slot = GlobalAddress.of(0, 5L * CHUNK);
        stale.write(slot, word(1), 0, 8);
        // The cluster replaces the primary (it looked dead) while it still runs: the backup takes over in view 2.
        group[1].fabric().becomePrimary(0, 2, List.of());
        RemoteMemory current = client(group[1], 2);
        assertEquals(1, current.readLong(slot), "the acknowledged write is on the new primary");

        FabricException refused = assertThrows(FabricException.class, () -> stale.write(slot, word(2), 0, 8));
        assertTrue(refused.getMessage().contains("memory server 0"), refused.getMessage());
        await("the old primary learns it was replaced", () -> group[0].status().role() == ReplicaStatus.Role.DEMOTED);
        FabricException reconnect = assertThrows(FabricException.class, () -> stale.readLong(slot));
        assertTrue(reconnect.getMessage().contains("replaced") || reconnect.getMessage().contains("does not serve"),
                reconnect.getMessage());
        assertEquals(1, current.readLong(slot), "nothing of the old primary reached the new one");
        current.write(slot, word(3), 0, 8);
        assertEquals(3, current.readLong(slot));
    }

    /**
     * A backup's memory node restarts (empty, at the same address) and is not a backup until told so: the primary is not
     * demoted by its refusal, holds its answers meanwhile (no complete backup has them), greets it again, and copies it
     * once it is a backup again.
     */
    @Test
    void aBackupThatRestartsIsGreetedAgainAndCopiedWithoutDemotingItsPrimary() throws Exception {
        Node[] group = group(FAST, REGION);
        RemoteMemory memory = client(group[0], 1);
        long slot = GlobalAddress.of(0, 7L * CHUNK);
        memory.write(slot, word(1), 0, 8);
        int port = TcpEndpoint.parse(0, group[1].endpoint()).getPort();
        group[1].fabric().close();
        TcpFabric restarted = fabric(FAST);
        TcpFabric again = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withPort(port), FAST, 0, null, null));
        ExportedRegion fresh = resources.closeAfter(again.export(0, REGION, CHUNK));
        again.standBy(0);
        IllegalArgumentException waiting = assertThrows(IllegalArgumentException.class,
                () -> restarted.connect(Map.of(0, fresh.endpoint()), 9), "a replica on stand-by serves no client");
        assertTrue(waiting.getMessage().contains("waits for its replica group"), waiting.getMessage());
        Thread writer = new Thread(() -> memory.write(slot, word(2), 0, 8)); // held: its only backup is away
        writer.start();
        Thread.sleep(600); // the primary greets the restarted node a few times, refused: it is not a backup
        assertEquals(ReplicaStatus.Role.PRIMARY, group[0].status().role(), "a refusal that is not a newer view demotes nobody");
        assertTrue(writer.isAlive(), "the write waits: no complete backup holds it");
        again.becomeBackup(0, 1);
        writer.join(20_000);
        await("the restarted backup's copy completes", () -> again.replicaStatus(0).complete());
        awaitQuiet(group[0]);
        assertEquals(2, memory.readLong(slot));
        assertArrayEquals(bytes(group[0].region()), bytes(fresh), "the restarted backup holds the primary's region again");
    }

    /**
     * The old primary does not even learn that it was replaced: the link to its backup goes silent (a paused host, a
     * cut that drops packets). Its lease runs out before the backup takes over, so a read at the old primary is not
     * answered with the value the new primary has overwritten, and a write there is never acknowledged nor applied
     * at the new primary; once the link comes back the old primary learns it was replaced.
     */
    @Test
    void aPrimaryCutOffFromItsBackupStopsAnsweringBeforeItsSuccessorStarts() throws Exception {
        Node primary = node(FAST, REGION);
        Node backup = node(FAST, REGION);
        ChaosProxy link = new ChaosProxy(backup.endpoint());
        resources.closeAfter(link::close);
        backup.fabric.becomeBackup(0, 1);
        primary.fabric.becomePrimary(0, 1, List.of(link.endpoint()));
        await("the backup's copy completes", () -> backup.status().complete());
        TcpFabric impatient = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofSeconds(2)),
                FAST, 0, null, null));
        RemoteMemory stale = resources.closeAfter(impatient.connect(Map.of(0, primary.endpoint()), 1));
        long slot = GlobalAddress.of(0, 6L * CHUNK);
        stale.write(slot, word(1), 0, 8);

        assertNull(backup.status().primaryLost(), "a live stream's backup suspects nobody");
        link.freeze();
        // A silent primary (its host gone, its link cut, its process paused) is suspected after suspect-after.
        await("the backup suspects its silent primary", () -> backup.status().primaryLost() != null);
        assertTrue(backup.status().primaryLost().startsWith("no frame from the primary of view 1 for "),
                backup.status().primaryLost());
        backup.fabric.becomePrimary(0, 2, List.of());
        RemoteMemory current = client(backup, 2);
        current.write(slot, word(5), 0, 8);

        FabricException unanswered = assertThrows(FabricException.class, () -> stale.readLong(slot),
                "the old primary's lease ran out: it must not answer a read with the overwritten 1");
        assertTrue(unanswered.getMessage().contains("did not answer"), unanswered.getMessage());
        assertThrows(FabricException.class, () -> stale.write(slot, word(9), 0, 8), "nor acknowledge a write");
        link.thaw();
        await("the old primary learns it was replaced", () -> primary.status().role() == ReplicaStatus.Role.DEMOTED);
        assertEquals(5, current.readLong(slot), "nothing of the old primary reached the new one");
    }

    /**
     * Writers, a shared counter and contended lock words against the primary; the primary's node dies at a random
     * point; the backup becomes primary; the same clients move to it and go on. Every acknowledged write, increment
     * and lock is on the new primary, and the locks keep their meaning: a thread whose acquire was acknowledged
     * releases the word it holds with a swap that finds its own tag.
     */
    @Test
    void afterAFailoverEveryAcknowledgedChangeAndLockIsOnTheNewPrimary() throws Exception {
        for (int round = 0; round < 3; round++) {
            failoverRound();
        }
    }

    private void failoverRound() throws Exception {
        Node[] group = group(FAST, REGION);
        RemoteMemory memory = client(group[0], 1);
        WAITING.set(0);
        int threads = 4;
        int slotsPerThread = 64;
        long counter = GlobalAddress.of(0, CHUNK);
        long locks = GlobalAddress.of(0, 2L * CHUNK); // 4 lock words, contended by every thread
        long slots = GlobalAddress.of(0, 4L * CHUNK);
        AtomicBoolean failedOver = new AtomicBoolean();
        AtomicBoolean stop = new AtomicBoolean();
        long[][] acked = new long[threads][slotsPerThread];
        long[][] unknown = new long[threads][slotsPerThread];
        long[] increments = new long[threads];
        long[] unknownIncrements = new long[threads];
        List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            long tag = thread + 1;
            workers.add(new Thread(() -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                long value = 0;
                while (!stop.get()) {
                    int op = random.nextInt(3);
                    try {
                        if (op == 0) {
                            int slot = random.nextInt(slotsPerThread);
                            value++;
                            unknown[thread][slot] = thread * 1_000_000_000L + value;
                            memory.write(slots + 8L * (thread * slotsPerThread + slot), word(unknown[thread][slot]), 0, 8);
                            acked[thread][slot] = unknown[thread][slot];
                            unknown[thread][slot] = 0;
                        } else if (op == 1) {
                            unknownIncrements[thread]++;
                            memory.fetchAndAdd(counter, 1);
                            unknownIncrements[thread]--;
                            increments[thread]++;
                        } else {
                            long lock = locks + 8L * random.nextInt(4);
                            if (memory.compareAndSwap(lock, 0, tag) == 0) {
                                // Held: nobody else may change the word until this thread releases it, failover or not.
                                holdAndRelease(memory, lock, tag, failedOver, violations);
                            }
                        }
                    } catch (FabricException failover) {
                        awaitFlag(failedOver);
                        // An acquire of unknown outcome: the word says whether this thread holds the lock.
                        for (int l = 0; l < 4; l++) {
                            long lock = locks + 8L * l;
                            if (retry(() -> memory.readLong(lock)) == tag) {
                                holdAndRelease(memory, lock, tag, failedOver, violations);
                            }
                        }
                    }
                }
            }));
        }
        workers.forEach(Thread::start);
        Thread.sleep(50 + ThreadLocalRandom.current().nextInt(250));
        assertNull(group[1].status().primaryLost(), "a backup whose primary streams suspects nobody");
        group[0].fabric().close(); // the primary's memory node dies with changes in flight
        // A killed primary's connections close: its backup knows at once, without waiting for silence.
        await("the backup sees its primary's stream close", () -> group[1].status().primaryLost() != null);
        assertTrue(group[1].status().primaryLost().contains("closed"), group[1].status().primaryLost());
        group[1].fabric().becomePrimary(0, 2, List.of());
        await("every worker has met the failover", () -> WAITING.get() == threads);
        // Before anyone goes on: every acknowledged change is there.
        for (int t = 0; t < threads; t++) {
            for (int s = 0; s < slotsPerThread; s++) {
                long found = group[1].region().region().getLongVolatile(GlobalAddress.offset(slots) + 8L * (t * slotsPerThread + s));
                if (found != acked[t][s] && (unknown[t][s] == 0 || found != unknown[t][s])) {
                    violations.add("slot " + t + "/" + s + " holds " + found + ", acknowledged " + acked[t][s] + ", unknown " + unknown[t][s]);
                }
            }
        }
        long count = group[1].region().region().getLongVolatile(GlobalAddress.offset(counter));
        long sure = java.util.Arrays.stream(increments).sum();
        long maybe = java.util.Arrays.stream(unknownIncrements).sum();
        assertTrue(count >= sure && count <= sure + maybe, "counter " + count + " with " + sure + " acknowledged and " + maybe + " unknown");
        memory.relocate(0, group[1].endpoint());
        failedOver.set(true);
        Thread.sleep(200);
        stop.set(true);
        for (Thread worker : workers) {
            worker.join();
        }
        assertEquals(List.of(), violations);
        assertTrue(sure > 0, "the workers ran before the failover");
        for (int l = 0; l < 4; l++) {
            assertEquals(0, memory.readLong(locks + 8L * l), "every lock was released by its holder");
        }
    }

    /** Holds the lock for a moment, then releases it; the release must find this thread's tag, across a failover too. */
    private static void holdAndRelease(RemoteMemory memory, long lock, long tag, AtomicBoolean failedOver, List<String> violations) {
        long released = retry(() -> {
            try {
                return memory.compareAndSwap(lock, tag, 0);
            } catch (FabricException failover) {
                awaitFlag(failedOver);
                // Unknown outcome: released already (0, or another holder since), or still this thread's.
                long now = memory.readLong(lock);
                return now == tag ? memory.compareAndSwap(lock, tag, 0) : tag;
            }
        });
        if (released != tag) {
            violations.add("lock " + Long.toHexString(lock) + " held by " + tag + " held " + released + " at its release");
        }
    }

    private static long retry(java.util.function.LongSupplier verb) {
        for (int attempt = 0; ; attempt++) {
            try {
                return verb.getAsLong();
            } catch (FabricException failover) {
                if (attempt > 200) {
                    throw failover;
                }
                try {
                    Thread.sleep(10);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw failover;
                }
            }
        }
    }

    /**
     * A client with a failover wait (as compute nodes of replicated servers have): reads and owned writes (bytes only
     * their writer writes, as a redo log's) in flight when the primary dies wait for the client to be relocated to the
     * new primary and complete there, each reading back what it wrote; none fails. A plain write and an atomic are never
     * run twice: they fail at once. Without a relocation within the wait, an owned write fails after the wait, with the
     * connection's error.
     */
    @Test
    void readsAndWritesInFlightDuringAFailoverCompleteOnTheNewPrimary() throws Exception {
        Node[] group = group(FAST, REGION);
        TcpFabric patient = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofSeconds(20)),
                FAST.withFailoverWait(Duration.ofSeconds(10)), 0, null, null));
        RemoteMemory memory = resources.closeAfter(patient.connect(Map.of(0, group[0].endpoint()), 1));
        TcpFabric impatientFabric = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofSeconds(20)),
                FAST.withFailoverWait(Duration.ofMillis(300)), 0, null, null));
        RemoteMemory impatient = resources.closeAfter(impatientFabric.connect(Map.of(0, group[0].endpoint()), 2));
        int threads = 3;
        int slots = 64;
        long base = GlobalAddress.of(0, 4L * CHUNK);
        long[][] acked = new long[threads][slots];
        java.util.concurrent.atomic.AtomicLong afterRelocation = new java.util.concurrent.atomic.AtomicLong();
        AtomicBoolean relocated = new AtomicBoolean();
        AtomicBoolean stop = new AtomicBoolean();
        List<String> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        List<Thread> writers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            writers.add(new Thread(() -> {
                long value = 0;
                while (!stop.get()) {
                    int slot = (int) (value % slots);
                    value++;
                    long address = base + 8L * (thread * slots + slot);
                    long written = (thread + 1L) << 40 | value;
                    try {
                        OwnedWrites.write(memory, address, word(written), 0, 8);
                        acked[thread][slot] = written;
                        long read = memory.readLong(address);
                        if (read != written) {
                            failures.add("thread " + thread + " read " + read + " after writing " + written);
                        }
                        if (relocated.get()) {
                            afterRelocation.incrementAndGet();
                        }
                    } catch (RuntimeException failed) {
                        failures.add("thread " + thread + ": " + failed);
                    }
                }
            }));
        }
        writers.forEach(Thread::start);
        Thread.sleep(100);
        group[0].fabric().close(); // the primary dies with reads and writes in flight
        group[1].fabric().becomePrimary(0, 2, List.of());

        long casAt = System.nanoTime();
        assertThrows(FabricException.class, () -> memory.compareAndSwap(base, 0, 1), "an atomic is not run twice: it fails");
        assertThrows(FabricException.class, () -> memory.write(base, word(1), 0, 8), "nor is a plain write (a lock's release,"
                + " say, which would free a lock someone took since)");
        assertTrue(System.nanoTime() - casAt < Duration.ofSeconds(5).toNanos(), "neither waited for the failover");
        long writeAt = System.nanoTime();
        assertThrows(FabricException.class, () -> OwnedWrites.write(impatient, base, word(1), 0, 8),
                "nothing relocates this client");
        assertTrue(System.nanoTime() - writeAt >= Duration.ofMillis(300).toNanos(), "the write waited out its failover wait");

        Thread.sleep(200);
        relocated.set(true);
        assertTrue(memory.relocate(0, group[1].endpoint()));
        await("the writers go on at the new primary", () -> afterRelocation.get() > 300);
        stop.set(true);
        for (Thread writer : writers) {
            writer.join();
        }
        assertEquals(List.of(), failures, "no read or write failed across the failover");
        for (int t = 0; t < threads; t++) {
            for (int slot = 0; slot < slots; slot++) {
                long found = group[1].region().region().getLongVolatile(GlobalAddress.offset(base) + 8L * (t * slots + slot));
                assertEquals(acked[t][slot], found, "slot " + t + "/" + slot + " holds its last acknowledged write");
            }
        }
    }

    /**
     * A server whose every replica is gone, marked lost by its compute node: its verbs fail at once (no failover wait)
     * with an error that starts with the reason, which names the replicas; atomics too.
     */
    @Test
    void aLostServersVerbsFailAtOnceNamingItsReplicas() {
        Node only = node(FAST, REGION);
        TcpFabric patient = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofSeconds(20)),
                FAST.withFailoverWait(Duration.ofSeconds(30)), 0, null, null));
        RemoteMemory memory = resources.closeAfter(patient.connect(Map.of(0, only.endpoint()), 1));
        long slot = GlobalAddress.of(0, 4L * CHUNK);
        memory.write(slot, word(7), 0, 8);
        only.fabric().close();
        String why = "memory server 0 is lost: every replica of its group in view 3 is out of the cluster (a, b)";
        memory.markLost(0, why);

        long started = System.nanoTime();
        FabricException write = assertThrows(FabricException.class, () -> memory.write(slot, word(8), 0, 8));
        FabricException read = assertThrows(FabricException.class, () -> memory.readLong(slot));
        FabricException swap = assertThrows(FabricException.class, () -> memory.compareAndSwap(slot, 7, 9));
        assertTrue(System.nanoTime() - started < Duration.ofSeconds(15).toNanos(), "no failover wait for a lost server");
        for (FabricException failure : List.of(write, read, swap)) {
            assertTrue(failure.getMessage().startsWith(why), failure.getMessage());
            assertTrue(failure instanceof dev.dex.rdma.MemoryServerLostException, "callers can tell a lost server: " + failure);
        }
        assertThrows(IllegalArgumentException.class, () -> memory.markLost(5, why), "a server it is not connected to");
    }

    /** Threads of the current round waiting for the failover. */
    private static final java.util.concurrent.atomic.AtomicInteger WAITING = new java.util.concurrent.atomic.AtomicInteger();

    private static void awaitFlag(AtomicBoolean flag) {
        WAITING.incrementAndGet();
        while (!flag.get()) {
            Thread.onSpinWait();
        }
        WAITING.decrementAndGet();
    }
}
