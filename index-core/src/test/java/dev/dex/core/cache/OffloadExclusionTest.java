package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.dex.core.node.WideKeys;
import dev.dex.core.node.KeyFormat;

/**
 * {@link OffloadExclusion}: which escapes a write at a level must not find in its range, and that a write and an escape
 * that conflict are never entered at once, also under many threads.
 */
class OffloadExclusionTest {
    /** Offloading level M = 2: writes start at level 1 or 2, escapes matter at levels 0 and 1. */
    private final OffloadExclusion exclusion = new OffloadExclusion(16, 2, KeyFormat.EIGHT);
    private final OffloadExclusion.Descents descents = exclusion.descents();

    @Test
    void aWriteMeetsOnlyEscapesBelowItsNodeInItsRange() {
        assertTrue(exclusion.enterFrame(3, k(100), k(150), 0), "a leaf (100, 150] under no cached parent");
        assertNull(exclusion.beginWrite(k(99), k(200), 1), "a level-1 write whose range holds the leaf's low fence");
        assertNull(exclusion.beginWrite(k(100), k(200), 1), "the leaf's low fence is the range's own");
        List<OffloadExclusion.Range> writes = new ArrayList<>();
        writes.add(exclusion.beginWrite(k(0), k(100), 1));
        assertNotNull(writes.get(0), "the range ends where the leaf starts: (0, 100] holds no key of it");
        writes.add(exclusion.beginWrite(k(150), k(300), 1));
        assertNotNull(writes.get(1), "a range after the leaf");

        assertTrue(exclusion.enterFrame(4, k(300), k(400), 1), "a level-1 node");
        assertNull(exclusion.beginWrite(k(300), k(500), 2), "a level-2 write above it");
        writes.add(exclusion.beginWrite(k(300), k(400), 1));
        assertNotNull(writes.get(2), "the level-1 node itself is not below a write at level 1");
        assertEquals(3, exclusion.writes());
        writes.forEach(exclusion::endWrite);

        exclusion.leaveFrame(3);
        assertNotNull(exclusion.beginWrite(k(90), k(160), 1), "the leaf was evicted");
        assertEquals(1, exclusion.escapes());
        assertEquals(1, exclusion.writes());
    }

    @Test
    void writesWhoseRangesOverlapExcludeEachOther() {
        OffloadExclusion.Range first = exclusion.beginWrite(k(100), k(200), 1);
        assertNotNull(first);
        assertNull(exclusion.beginWrite(k(150), k(250), 1));
        assertNull(exclusion.beginWrite(k(0), k(1000), 2), "a write above it");
        assertNotNull(exclusion.beginWrite(k(200), k(300), 1), "(200, 300] does not overlap (100, 200]");
        exclusion.endWrite(first);
        assertNotNull(exclusion.beginWrite(k(150), k(199), 1));
    }

    @Test
    void anEscapeBelowAWriteInFlightWaitsButAnOrphanIsEnteredAnyway() {
        OffloadExclusion.Range write = exclusion.beginWrite(k(100), k(200), 2);
        assertNotNull(write);
        assertFalse(exclusion.enterFrame(1, k(120), k(130), 0), "a leaf admitted below the write");
        assertFalse(exclusion.isEscape(1));
        assertNull(exclusion.enterDescent(descents, k(100), k(150), 1), "a descent into a level-1 node below it");
        assertTrue(exclusion.enterFrame(2, k(100), k(200), 2), "a node at the write's own level matters not");
        assertSame(OffloadExclusion.NOTHING, exclusion.enterDescent(descents, k(100), k(200), 2), "nor a descent into one");
        assertTrue(exclusion.enterFrame(5, k(200), k(250), 0), "a leaf after the range");

        exclusion.enterOrphan(6, k(110), k(120), 0);
        assertTrue(exclusion.isEscape(6), "an orphan was reachable until now: it cannot lie below a write in flight");
        exclusion.endWrite(write);
        OffloadExclusion.Range descent = exclusion.enterDescent(descents, k(100), k(150), 1);
        assertNotNull(descent);
        assertNull(exclusion.beginWrite(k(100), k(200), 2), "the descent's escape is below it now");
        exclusion.release(descent);
        exclusion.leaveFrame(6);
        assertNotNull(exclusion.beginWrite(k(100), k(200), 2));
    }

    @Test
    void aSessionHoldsAnyNumberOfDescentsAndAWriteSeesEachUntilItIsLeft() {
        List<OffloadExclusion.Range> held = new ArrayList<>();
        for (int i = 0; i < 20; i++) { // more than a session's first slots
            OffloadExclusion.Range descent = exclusion.enterDescent(descents, k(100 + 10 * i), k(110 + 10 * i), 1);
            assertNotNull(descent);
            held.add(descent);
        }
        assertEquals(20, exclusion.escapes());
        for (int i = 0; i < 20; i++) {
            assertNull(exclusion.beginWrite(k(100 + 10 * i), k(110 + 10 * i), 2), "descent " + i + " is below the write");
        }
        held.subList(0, 19).forEach(exclusion::release);
        assertNull(exclusion.beginWrite(k(290), k(300), 2), "the last descent is still held");
        exclusion.release(held.get(19));
        assertNotNull(exclusion.beginWrite(k(100), k(300), 2));
        assertEquals(0, exclusion.escapes());
    }

    @Test
    void aFrameEnteredAgainAfterItsEscapeWasLeftIsAnEscapeAgain() {
        assertTrue(exclusion.enterFrame(9, k(10), k(20), 0));
        exclusion.leaveFrame(9);
        assertFalse(exclusion.isEscape(9));
        assertNotNull(exclusion.beginWrite(k(0), k(100), 1));
        exclusion.enterOrphan(9, k(110), k(120), 0);
        assertTrue(exclusion.isEscape(9));
        assertEquals(-1, exclusion.escapeWithoutBit(), "its range and its bit");
        assertNull(exclusion.beginWrite(k(100), k(200), 1), "a write finds it by its bit");
        exclusion.leaveFrame(9);
        assertNotNull(exclusion.beginWrite(k(100), k(200), 1));
    }

    /**
     * One frame, three threads: an admission enters it as an escape (and rolls back when a write covers it), an
     * orphaning enters it whatever is in flight, and a writer comes and goes over its range. Once both entries
     * returned, the frame is an escape (the orphan's entry stands, whatever the admission did), and a write over its
     * range is refused.
     */
    @Test
    void anOrphanEnteredWhileAnAdmissionRollsBackStaysAnEscape() throws Exception {
        OffloadExclusion shared = new OffloadExclusion(8, 2, KeyFormat.EIGHT);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread writer = new Thread(() -> {
            while (!stop.get()) {
                OffloadExclusion.Range write = shared.beginWrite(k(0), k(1000), 1);
                if (write != null) {
                    Thread.onSpinWait();
                    shared.endWrite(write);
                }
            }
        }, "exclusion-writer");
        writer.start();
        java.util.concurrent.CyclicBarrier round = new java.util.concurrent.CyclicBarrier(2);
        AtomicReference<String> lost = new AtomicReference<>();
        int rounds = 20_000;
        Thread admission = new Thread(() -> {
            try {
                for (int i = 0; i < rounds && lost.get() == null; i++) {
                    round.await();
                    shared.enterFrame(3, k(100), k(200), 0);
                    round.await();
                }
            } catch (Exception e) {
                lost.compareAndSet(null, e.toString());
            }
        }, "exclusion-admission");
        admission.start();
        try {
            for (int i = 0; i < rounds && lost.get() == null; i++) {
                round.await(10, java.util.concurrent.TimeUnit.SECONDS);
                shared.enterOrphan(3, k(100), k(200), 0);
                round.await(10, java.util.concurrent.TimeUnit.SECONDS);
                if (!shared.isEscape(3)) {
                    lost.compareAndSet(null, "round " + i + ": the orphan's escape was lost: " + shared);
                }
                shared.leaveFrame(3);
            }
        } finally {
            stop.set(true);
            round.reset();
            writer.join(10_000);
            admission.join(10_000);
        }
        assertNull(lost.get());
        shared.enterOrphan(3, k(100), k(200), 0);
        assertEquals(-1, shared.escapeWithoutBit(), "at rest, an escape has its bit: " + shared);
        assertNull(shared.beginWrite(k(0), k(1000), 1), "a write finds the orphan");
    }

    @Test
    void aClosedSessionIsForgotten() {
        OffloadExclusion.Descents other = exclusion.descents();
        OffloadExclusion.Range descent = exclusion.enterDescent(other, k(10), k(20), 0);
        assertNotNull(descent);
        assertNull(exclusion.beginWrite(k(0), k(100), 1));
        exclusion.release(descent);
        exclusion.forget(other);
        assertEquals(0, exclusion.escapes());
        assertNotNull(exclusion.beginWrite(k(0), k(100), 1));
    }

    @Test
    void anEngineThatNeverOffloadsKeepsNothing() {
        OffloadExclusion off = new OffloadExclusion(4, 0, KeyFormat.EIGHT);
        assertTrue(off.enterFrame(1, k(0), k(10), 0));
        off.enterOrphan(2, k(0), k(10), 0);
        assertSame(OffloadExclusion.NOTHING, off.enterDescent(off.descents(), k(0), k(10), 0));
        assertEquals(0, off.escapes());
    }

    /**
     * Threads enter and leave writes and escapes over a small key space; each holder publishes what it holds in a
     * model and checks, while it holds it, that nobody holds a conflicting one. With the exclusion correct, no two
     * conflicting ranges are ever held at once; the test fails if one check sees another.
     */
    /** The words of {@code n}'s key in an index of 8-byte keys, or of {@link #wide}'s width in the many-thread test. */
    private WideKeys wide = new WideKeys(8);

    private long[] k(long n) {
        long[] key = new long[wide.words()];
        wide.toWords(n, key, 0);
        return key;
    }

    @ParameterizedTest(name = "{0}-byte keys")
    @ValueSource(ints = {8, 16, 64})
    void conflictingRangesAreNeverHeldAtOnce(int keyBytes) throws Exception {
        wide = new WideKeys(keyBytes);
        KeyFormat keys = KeyFormat.of(keyBytes);
        OffloadExclusion shared = new OffloadExclusion(64, 3, keys);
        Map<Object, long[]> held = new ConcurrentHashMap<>();
        AtomicReference<String> violation = new AtomicReference<>();
        AtomicLong writes = new AtomicLong();
        AtomicLong escapes = new AtomicLong();
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            Thread worker = new Thread(() -> {
                SplittableRandom random = new SplittableRandom(id * 31L + 7);
                OffloadExclusion.Descents slots = shared.descents();
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < 40_000 && violation.get() == null; i++) {
                    // Nodes of a complete tree over keys 0..64 with fanout 4: level l spans 4^(l+1) keys.
                    int level = random.nextInt(3);
                    long span = 1L << (2 * (level + 1));
                    long low = random.nextLong(64 / span) * span;
                    boolean write = level > 0 && random.nextBoolean();
                    Object token;
                    OffloadExclusion.Range range = null;
                    int frame = -1;
                    if (write) {
                        range = shared.beginWrite(k(low), k(low + span), level);
                        token = range;
                    } else if (random.nextBoolean()) {
                        range = shared.enterDescent(slots, k(low), k(low + span), level);
                        token = range;
                    } else {
                        frame = id * 16 + random.nextInt(16);
                        token = shared.enterFrame(frame, k(low), k(low + span), level) ? Integer.valueOf(frame) : null;
                        if (token == null) {
                            frame = -1;
                        }
                    }
                    if (token == null) {
                        continue;
                    }
                    (write ? writes : escapes).incrementAndGet();
                    long[] mine = {low, low + span, level, write ? 1 : 0};
                    held.put(token, mine);
                    for (Map.Entry<Object, long[]> other : held.entrySet()) {
                        if (other.getKey() != token && conflict(mine, other.getValue())) {
                            violation.compareAndSet(null, java.util.Arrays.toString(mine) + " held with "
                                    + java.util.Arrays.toString(other.getValue()));
                        }
                    }
                    Thread.onSpinWait();
                    held.remove(token);
                    if (frame >= 0) {
                        shared.leaveFrame(frame);
                    } else {
                        shared.release(range);
                    }
                }
            }, "exclusion-" + t);
            workers.add(worker);
            worker.start();
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(60_000);
        }
        assertNull(violation.get());
        // The stress exercised both kinds many times over. How many writes get their range depends on the contention (a
        // write whose range conflicts is refused), so on the host's scheduling: 9,955 of about 53,000 tried in one CI
        // run on a loaded 2-core host. The floor only shows both kinds ran; the check that matters is the one above.
        assertTrue(writes.get() > 2_000 && escapes.get() > 2_000, "both kinds were held: " + writes + " writes, "
                + escapes + " escapes");
        assertEquals(0, shared.writes(), "every write was ended");
        assertEquals(0, shared.escapes(), "every escape was left");
    }

    /** Whether two held ranges {low, high, level, write} may not be held at once. */
    private static boolean conflict(long[] a, long[] b) {
        boolean aWrite = a[3] == 1;
        boolean bWrite = b[3] == 1;
        if (aWrite && bWrite) {
            return a[0] < b[1] && b[0] < a[1];
        }
        if (aWrite != bWrite) {
            long[] w = aWrite ? a : b;
            long[] e = aWrite ? b : a;
            return e[2] < w[2] && e[0] >= w[0] && e[0] < w[1];
        }
        return false;
    }
}
