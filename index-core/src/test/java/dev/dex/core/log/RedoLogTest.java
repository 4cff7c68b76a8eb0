package dev.dex.core.log;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.FaultInjectingRemoteMemory;
import dev.dex.rdma.FaultPlan;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/** The redo log ring on its own: appends, replay, wrap-around, torn tails, epochs, the durable watermark. */
class RedoLogTest {
    private static final int CHUNK = 4096;
    /** (4096 - 64) / 40 records in a one-chunk log. */
    private static final int CAPACITY = (CHUNK - RedoLogDescriptor.HEADER_LENGTH) / RedoLogDescriptor.RECORD_LENGTH;
    private static final long WAIT = TimeUnit.SECONDS.toNanos(5);

    private final LocalFabric fabric = new LocalFabric();
    private final RemoteMemory memory;
    private final CRC32C crc = new CRC32C();

    RedoLogTest() {
        fabric.export(0, 1L << 20, CHUNK);
        memory = fabric.connect(0);
    }

    @AfterEach
    void close() {
        fabric.close();
    }

    private RedoLog open(int partition) {
        return RedoLog.open(memory, partition, 8, 42, CHUNK, WAIT);
    }

    private record Entry(int op, long key, long value) {
    }

    private static List<Entry> replay(RedoLog log) {
        List<Entry> entries = new ArrayList<>();
        log.replay((op, key, value) -> entries.add(new Entry(op, key[0], value)));
        return entries;
    }

    /** Assigns and appends {@code count} PUT records key = lsn, value = lsn * 10 in one run; returns the first LSN. */
    private long appendRun(RedoLog log, int count) {
        UnsafeBuffer records = new UnsafeBuffer(new byte[count * RedoLogDescriptor.RECORD_LENGTH]);
        long first = -1;
        for (int i = 0; i < count; i++) {
            long lsn = log.assign();
            first = i == 0 ? lsn : first;
            log.encode(records, i * RedoLogDescriptor.RECORD_LENGTH, lsn, RedoLogDescriptor.PUT, new long[] {lsn}, lsn * 10, crc);
        }
        log.append(first, records, 0, count);
        return first;
    }

    @Test
    void recordsAppendedByOneOwnerAreReplayedByTheNextInOrder() {
        RedoLog first = open(3);
        first.replay((op, key, value) -> { });
        assertEquals(1, first.epoch());
        long lsn = appendRun(first, 10);
        assertEquals(1, lsn);
        assertEquals(10, first.durableLsn());

        RedoLog second = open(3);
        assertEquals(2, second.epoch(), "a new owner bumps the epoch");
        List<Entry> entries = replay(second);
        assertEquals(10, entries.size());
        for (int i = 0; i < 10; i++) {
            assertEquals(new Entry(RedoLogDescriptor.PUT, i + 1, (i + 1) * 10L), entries.get(i));
        }
        assertEquals(11, second.nextLsn(), "writes continue after the last record replayed");
        assertEquals(0, replay(open(4)).size(), "another partition's log is its own");
    }

    @Test
    void aReplayIsIdempotentUntilTheCheckpointMoves() {
        RedoLog log = open(0);
        log.replay((op, key, value) -> { });
        appendRun(log, 7);
        List<Entry> once = replay(open(0));
        List<Entry> twice = replay(open(0));
        assertEquals(once, twice, "replaying again (a takeover that crashed) applies the same records");
        RedoLog owner = open(0);
        replay(owner);
        owner.checkpointed(owner.nextLsn());
        assertEquals(0, replay(open(0)).size(), "nothing before the checkpoint is replayed");
    }

    @Test
    void theRingWrapsBehindTheCheckpointAndNeverOverAnUncheckpointedRecord() throws Exception {
        RedoLog log = open(1);
        long sentinel = sentinelAfter(1);
        log.replay((op, key, value) -> { });
        // An LSN handed out now and appended only two laps later, after the checkpoint passed it.
        long late = log.assign();
        int written = 1;
        while (written < 3 * CAPACITY) {
            int run = Math.min(17, 3 * CAPACITY - written);
            long last = log.nextLsn() + run - 1;
            if (!log.hasRoom(last)) {
                log.checkpointed(log.nextLsn() - 5); // the five newest stay needed
            }
            if (last - late >= CAPACITY) {
                // This run takes the late record's slot: it waits until that record was written (or skipped).
                CompletableFuture<Long> reusing = CompletableFuture.supplyAsync(() -> appendRun(log, run));
                Thread.sleep(20);
                assertFalse(reusing.isDone(), "a slot whose record was handed out but not written is not reused");
                appendAt(log, late); // behind the checkpoint now: skipped, its slot is the newer record's
                reusing.get(5, TimeUnit.SECONDS);
                late = Long.MAX_VALUE;
            } else {
                appendRun(log, run);
            }
            written += run;
        }
        assertEquals(Long.MAX_VALUE, late, "the late record was appended");
        assertEquals(log.nextLsn() - 1, log.durableLsn(), "no hole left");
        // One run longer than the ring: only what lies after the checkpoint is written, within the log.
        int longRun = 3 * CAPACITY;
        UnsafeBuffer records = new UnsafeBuffer(new byte[longRun * RedoLogDescriptor.RECORD_LENGTH]);
        long first = -1;
        for (int i = 0; i < longRun; i++) {
            long lsn = log.assign();
            first = i == 0 ? lsn : first;
            log.encode(records, i * RedoLogDescriptor.RECORD_LENGTH, lsn, RedoLogDescriptor.PUT, new long[] {lsn}, lsn * 10, crc);
        }
        log.checkpointed(log.nextLsn() - CAPACITY / 2); // the newest half lap is not in the pages yet
        log.append(first, records, 0, longRun);
        assertEquals(log.nextLsn() - 1, log.durableLsn());
        assertSentinel(sentinel);

        long next = log.nextLsn();
        assertFalse(log.hasRoom(log.checkpoint() + CAPACITY), "a full lap past the checkpoint has no room");
        UnsafeBuffer one = new UnsafeBuffer(new byte[RedoLogDescriptor.RECORD_LENGTH]);
        long tooFar = log.checkpoint() + CAPACITY;
        log.encode(one, 0, tooFar, RedoLogDescriptor.PUT, new long[] {1}, 1, crc);
        assertThrows(IllegalStateException.class, () -> log.append(tooFar, one, 0, 1));

        List<Entry> entries = replay(open(1));
        assertEquals(next - log.checkpoint(), entries.size(), "every record since the checkpoint, across the wrap");
        for (int i = 0; i < entries.size(); i++) {
            assertEquals(log.checkpoint() + i, entries.get(i).key());
        }
    }

    @Test
    void aRunOfThreeTimesTheRingAfterACheckpointWritesNothingPastTheLog() {
        RedoLog log = open(8);
        long sentinel = sentinelAfter(8);
        log.replay((op, key, value) -> { });
        int count = 3 * CAPACITY;
        UnsafeBuffer records = new UnsafeBuffer(new byte[count * RedoLogDescriptor.RECORD_LENGTH]);
        long first = log.nextLsn();
        for (int i = 0; i < count; i++) {
            long lsn = log.assign();
            log.encode(records, i * RedoLogDescriptor.RECORD_LENGTH, lsn, RedoLogDescriptor.PUT, new long[] {lsn}, lsn, crc);
        }
        long last = first + count - 1;
        // What a commit does when its records do not fit: a checkpoint to the next LSN (its pages are written back).
        assertFalse(log.hasRoom(last));
        log.checkpointed(log.nextLsn());
        log.append(first, records, 0, count);
        assertEquals(last, log.durableLsn());
        assertSentinel(sentinel);
        assertEquals(List.of(), replay(open(8)), "everything is behind the checkpoint");
    }

    @Test
    void aLateAppendOfAnLsnTakenBeforeACheckpointNeverOverwritesANewerRecord() throws Exception {
        RedoLog log = open(9);
        log.replay((op, key, value) -> { });
        long first = log.assign(); // L = 1, taken and not appended yet
        assertEquals(1, first);
        for (long lsn = 2; lsn <= CAPACITY; lsn++) {
            assertEquals(lsn, log.assign());
            appendAt(log, lsn);
        }
        log.checkpointed(CAPACITY + 1); // every page written back
        long newer = log.assign(); // C + 1, the same slot as L
        assertEquals(CAPACITY + 1, newer);
        CompletableFuture<Void> appending = CompletableFuture.runAsync(() -> appendAt(log, newer));
        Thread.sleep(50);
        assertFalse(appending.isDone(), "record C + 1 waits until L, handed out before it in the same slot, is written");
        appendAt(log, first);
        appending.get(5, TimeUnit.SECONDS);
        assertEquals(newer, log.durableLsn());
        assertEquals(List.of(new Entry(RedoLogDescriptor.PUT, newer, newer)), replay(open(9)),
                "the late append of L did not land over C + 1");
    }

    @Test
    void anAppendThatFailedIsWrittenAgainAndTheWatermarkCatchesUp() {
        FaultInjectingRemoteMemory faulty = new FaultInjectingRemoteMemory(memory, FaultPlan.none().withNthVerb(1)
                .withKinds(FaultPlan.Kind.WRITE).withApplyFirst(0));
        faulty.enabled(false);
        RedoLog log = RedoLog.open(faulty, 10, 8, 42, CHUNK, WAIT);
        log.replay((op, key, value) -> { });
        long a = log.assign();
        long b = log.assign();
        UnsafeBuffer records = new UnsafeBuffer(new byte[2 * RedoLogDescriptor.RECORD_LENGTH]);
        log.encode(records, 0, a, RedoLogDescriptor.PUT, new long[] {a}, 7, crc);
        log.encode(records, RedoLogDescriptor.RECORD_LENGTH, b, RedoLogDescriptor.PUT, new long[] {b}, 8, crc);
        faulty.enabled(true);
        assertThrows(FabricException.class, () -> log.append(a, records, 0, 2));
        assertEquals(1, faulty.injected());
        assertFalse(log.failed(), "one failed write is not yet a hole: the owner may write the records again");
        assertEquals(a - 1, log.durableLsn());
        log.append(a, records, 0, 2);
        assertEquals(b, log.durableLsn());
        assertEquals(2, replay(open(10)).size());
    }

    /** Allocates the chunk after partition {@code p}'s log (a one-chunk log) and fills it with a pattern. */
    private long sentinelAfter(int p) {
        long log = directorySlot(p);
        long sentinel = memory.chunkAllocator().allocateChunk(0);
        assertEquals(log + CHUNK, sentinel, "the chunk after the log");
        UnsafeBuffer pattern = new UnsafeBuffer(new byte[CHUNK]);
        for (int i = 0; i < CHUNK; i++) {
            pattern.putByte(i, (byte) (i * 31 + 7));
        }
        memory.write(sentinel, pattern, 0, CHUNK);
        return sentinel;
    }

    private void assertSentinel(long sentinel) {
        UnsafeBuffer now = new UnsafeBuffer(new byte[CHUNK]);
        memory.read(sentinel, now, 0, CHUNK);
        for (int i = 0; i < CHUNK; i++) {
            assertEquals((byte) (i * 31 + 7), now.getByte(i), "byte " + i + " of the chunk after the log was overwritten");
        }
    }

    @Test
    void aReplayStopsAtATornRecord() {
        RedoLog log = open(2);
        log.replay((op, key, value) -> { });
        appendRun(log, 20);
        // Flip one byte of record 13's value: its checksum no longer matches.
        long logAddress = directorySlot(2);
        long record13 = logAddress + RedoLogDescriptor.HEADER_LENGTH + 13L * RedoLogDescriptor.RECORD_LENGTH;
        UnsafeBuffer b = new UnsafeBuffer(new byte[1]);
        memory.read(record13 + RedoLogDescriptor.VALUE_OFFSET, b, 0, 1);
        b.putByte(0, (byte) (b.getByte(0) ^ 1));
        memory.write(record13 + RedoLogDescriptor.VALUE_OFFSET, b, 0, 1);

        RedoLog next = open(2);
        List<Entry> entries = replay(next);
        assertEquals(12, entries.size(), "records 1..12 are whole, 13 is torn");
        assertEquals(13, next.nextLsn(), "the next owner writes over the torn tail");
    }

    @Test
    void aReplayStopsAtARecordOfAnOlderOwner() {
        RedoLog a = open(5);
        a.replay((op, key, value) -> { });
        appendRun(a, 5); // LSN 1..5, epoch 1
        RedoLog b = open(5);
        assertEquals(5, replay(b).size());
        appendRun(b, 2); // LSN 6..7, epoch 2
        // A, slow and not yet fenced, writes its LSN 8 late (epoch 1) after B's records.
        UnsafeBuffer late = new UnsafeBuffer(new byte[RedoLogDescriptor.RECORD_LENGTH]);
        a.encode(late, 0, 8, RedoLogDescriptor.PUT, new long[] {99}, 99, crc);
        long slot8 = directorySlot(5) + RedoLogDescriptor.HEADER_LENGTH + 8L * RedoLogDescriptor.RECORD_LENGTH;
        memory.write(slot8, late, 0, RedoLogDescriptor.RECORD_LENGTH);
        List<Entry> entries = replay(open(5));
        assertEquals(7, entries.size(), "the older epoch's record after the newer owner's ends the replay");
    }

    /** Appends one PUT record with the given LSN (key = lsn) without taking it from the log's counter. */
    private void appendAt(RedoLog log, long lsn) {
        UnsafeBuffer one = new UnsafeBuffer(new byte[RedoLogDescriptor.RECORD_LENGTH]);
        log.encode(one, 0, lsn, RedoLogDescriptor.PUT, new long[] {lsn}, lsn, crc);
        log.append(lsn, one, 0, 1);
    }

    @Test
    void recordsACrashedOwnerLeftBeyondAHoleAreNeverReplayedOnceALaterOwnerMovedPastThem() {
        RedoLog a = open(4);
        a.replay((op, key, value) -> { });
        appendRun(a, 3); // LSN 1..3, acknowledged
        for (long lsn = 5; lsn <= 8; lsn++) {
            appendAt(a, lsn); // written while LSN 4 was still in flight: never acknowledged; A dies
        }
        RedoLog b = open(4);
        assertEquals(3, replay(b).size(), "the replay stops at the hole");
        b.checkpointed(b.nextLsn()); // the takeover's checkpoint, at LSN 4
        appendRun(b, 2); // LSN 4..5, epoch 2, acknowledged
        b.checkpointed(b.nextLsn()); // LSN 6: pages written back
        RedoLog c = open(4);
        assertEquals(List.of(), replay(c), "A's records 6..8 lie past the checkpoint but belong to an older owner");
    }

    @Test
    void aGivenUpLogTakesNoRecordAndWakesItsWaiters() throws Exception {
        RedoLog log = open(3);
        log.replay((op, key, value) -> { });
        long hole = log.assign();
        long mine = log.assign();
        CompletableFuture<Void> waiting = CompletableFuture.runAsync(() -> log.awaitDurable(mine));
        Thread.sleep(50);
        log.abandon();
        java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                () -> waiting.get(5, TimeUnit.SECONDS));
        assertTrue(e.getCause().getMessage().contains("given up"), e.getCause().getMessage());
        assertThrows(IllegalStateException.class, () -> appendAt(log, hole));
    }

    @Test
    void aRunAppendedAheadOfAnEarlierOneIsNotDurableUntilThatOneIs() throws Exception {
        RedoLog log = open(6);
        log.replay((op, key, value) -> { });
        long early = log.assign();
        long late = log.assign();
        UnsafeBuffer records = new UnsafeBuffer(new byte[2 * RedoLogDescriptor.RECORD_LENGTH]);
        log.encode(records, 0, early, RedoLogDescriptor.PUT, new long[] {1}, 1, crc);
        log.encode(records, RedoLogDescriptor.RECORD_LENGTH, late, RedoLogDescriptor.DELETE, new long[] {2}, 0, crc);
        log.append(late, records, RedoLogDescriptor.RECORD_LENGTH, 1);
        assertEquals(early - 1, log.durableLsn(), "a hole before it");
        CompletableFuture<Void> waiting = CompletableFuture.runAsync(() -> log.awaitDurable(late));
        Thread.sleep(100);
        assertFalse(waiting.isDone(), "the later record's writer waits for the hole");
        log.append(early, records, 0, 1);
        waiting.get(5, TimeUnit.SECONDS);
        assertEquals(late, log.durableLsn());
        List<Entry> entries = replay(open(6));
        assertEquals(List.of(new Entry(RedoLogDescriptor.PUT, 1, 1), new Entry(RedoLogDescriptor.DELETE, 2, 0)), entries);
    }

    @Test
    void aWaitForARecordThatNeverComesFailsClearly() {
        RedoLog log = RedoLog.open(memory, 7, 8, 42, CHUNK, TimeUnit.MILLISECONDS.toNanos(50));
        log.replay((op, key, value) -> { });
        long lsn = log.assign();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> log.awaitDurable(lsn));
        assertTrue(e.getMessage().contains("not durable"), e.getMessage());
    }

    /** The address of partition {@code p}'s log, from the directory. */
    private long directorySlot(int p) {
        UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
        memory.read(RedoLogDescriptor.DIRECTORY_POINTER_ADDRESS, word, 0, 8);
        long directory = word.getLong(0, java.nio.ByteOrder.LITTLE_ENDIAN);
        memory.read(directory + 8L * p, word, 0, 8);
        long log = word.getLong(0, java.nio.ByteOrder.LITTLE_ENDIAN);
        assertEquals(0, GlobalAddress.serverId(log));
        return log;
    }
}
