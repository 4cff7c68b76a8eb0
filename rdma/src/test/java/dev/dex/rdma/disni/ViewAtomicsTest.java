package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import dev.dex.rdma.FencedException;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.replica.StaleViewException;
import dev.dex.rdma.replica.ViewGate;

/**
 * The atomics a {@code disni} replica's memory node runs in a view: refused in an older view and for a fenced client,
 * and a fence that returned leaves none of the client's atomics running, however they interleave.
 */
class ViewAtomicsTest {
    private static final long ALICE = 0xA11CEL;
    private static final long WORD = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;

    private final Region region = Region.offHeap(4L * RegionHeaderDescriptor.MIN_CHUNK_LENGTH);
    private final ViewGate gate = new ViewGate(0, "replica", 1);
    /** Stands for the region's grant book, which a fence marks before it drains the atomics. */
    private final Set<Long> fenced = ConcurrentHashMap.newKeySet();
    private final ViewAtomics atomics = new ViewAtomics(0, region, gate, fenced::contains);

    /** How a wire answers a message: as {@link ViewAtomics#handle} does, or by refusing it. */
    private interface Answer {
        int answer(org.agrona.DirectBuffer message, int offset, int length, org.agrona.MutableDirectBuffer reply);
    }

    /** A control connection whose server answers as {@code answer} does, in this thread. */
    private static dev.dex.rdma.MessageSender sender(Answer answer) {
        return new dev.dex.rdma.MessageSender() {
            @Override
            public int send(int serverId, org.agrona.DirectBuffer message, int offset, int length,
                            org.agrona.MutableDirectBuffer reply, int replyOffset) {
                return answer.answer(message, offset, length, reply);
            }

            @Override
            public java.time.Duration timeout() {
                return java.time.Duration.ofSeconds(1);
            }
        };
    }

    /** A fence as {@code DisniFabric} runs it: the book marks the client, then the atomics in progress are drained. */
    private static void fence(Set<Long> book, ViewAtomics atomics, long client) {
        book.add(client);
        atomics.drainFenced();
    }

    @Test
    void eachKindRunsInItsViewAndNotInAnOlderOne() {
        assertEquals(0, atomics.run(ALICE, ViewAtomics.CAS, 1, WORD, 0, 5));
        assertEquals(5, atomics.run(ALICE, ViewAtomics.ADD, 1, WORD, 2, 0));
        assertEquals(7, atomics.run(ALICE, ViewAtomics.SET, 2, WORD, 0, 0), "a newer view than the replica's is served");
        gate.advance(2);

        StaleViewException stale = assertThrows(StaleViewException.class, () -> atomics.run(ALICE, ViewAtomics.SET, 1, WORD, 0, 9));
        assertEquals(2, stale.replicaView());
        assertEquals(0, region.getLongVolatile(WORD));
        assertThrows(IllegalArgumentException.class, () -> atomics.run(ALICE, ViewAtomics.ADD, 2, WORD + 4, 1, 0));
        assertThrows(IllegalArgumentException.class, () -> atomics.run(ALICE, (byte) 9, 2, WORD, 1, 0));
    }

    /**
     * The primary's stamps (docs/replication.md, race 2): each change of a word gets the replica's view and a sequence
     * that grows in the order the changes took effect; a change that changed nothing gets none, a word's write always
     * one. On the wire the answer carries the stamp.
     */
    @Test
    void eachChangeOfAWordIsStampedInTheOrderItTookEffect() {
        long[] first = new long[2];
        long[] second = new long[2];
        long[] none = new long[2];
        assertEquals(0, atomics.run(ALICE, ViewAtomics.CAS, 1, WORD, 0, 5, 0, first));
        assertEquals(5, atomics.run(ALICE, ViewAtomics.CAS, 1, WORD, 0, 6, 0, none), "a swap that fails changes nothing");
        assertArrayEquals(new long[] {0, 0}, none, "and takes no stamp");
        assertEquals(5, atomics.run(ALICE, ViewAtomics.ADD, 1, WORD, 0, 0, 0, none));
        assertArrayEquals(new long[] {0, 0}, none, "nor does an add of 0");
        gate.advance(2);
        dev.dex.rdma.MessageSender wire = sender((message, offset, length, reply) -> atomics.handle(ALICE, message, offset, length, reply));
        assertEquals(5, ViewAtomics.request(wire, 0, ViewAtomics.SET, 2, WORD, 0, 5, 0, second), "a write of the value it found");
        assertEquals(1, first[0], "stamped in the replica's view");
        assertEquals(2, second[0], "a later view leads");
        assertTrue(second[0] > first[0] || second[1] > first[1], "the later change's stamp is later");
        long[] third = new long[2];
        atomics.run(ALICE, ViewAtomics.ADD, 2, WORD, 1, 0, 0, third);
        assertEquals(2, third[0]);
        assertTrue(third[1] > second[1], "one view: the sequence grows");
    }

    /**
     * A backup stores a converged word only if its stamp is later than the last one it stored there: a stalled older
     * convergence, or the same one twice, changes nothing, and a newer view's stamp wins over any sequence of an older
     * one. Stamps of views before the backup's copy began are the copy's, and the book starts anew with each copy.
     */
    @Test
    void aBackupStoresOnlyALaterStamp() {
        dev.dex.rdma.MessageSender wire = sender((message, offset, length, reply) -> atomics.handle(ALICE, message, offset, length, reply));
        assertEquals(1, ViewAtomics.request(wire, 0, ViewAtomics.NEWER, 1, WORD, 11, 1, 5, null), "the first stamp of the word");
        assertEquals(11, region.getLongVolatile(WORD));
        assertEquals(0, atomics.run(ALICE, ViewAtomics.NEWER, 1, WORD, 10, 1, 4, null), "an older stamp, stalled");
        assertEquals(0, atomics.run(ALICE, ViewAtomics.NEWER, 1, WORD, 12, 1, 5, null), "the same stamp again");
        assertEquals(11, region.getLongVolatile(WORD), "neither moved the word");
        assertEquals(1, atomics.run(ALICE, ViewAtomics.NEWER, 1, WORD + 8, 3, 1, 1, null), "each word has its own stamps");
        assertEquals(1, atomics.run(ALICE, ViewAtomics.NEWER, 2, WORD, 0, 2, 1, null), "a newer primary's view wins");
        assertEquals(0, atomics.run(ALICE, ViewAtomics.NEWER, 2, WORD, 9, 1, 99, null), "over any sequence of an older one");
        assertEquals(0, region.getLongVolatile(WORD));

        atomics.stampsFrom(3);
        assertEquals(0, atomics.run(ALICE, ViewAtomics.NEWER, 3, WORD, 7, 2, 50, null), "of a view before the copy began");
        assertEquals(0, region.getLongVolatile(WORD));
        assertEquals(1, atomics.run(ALICE, ViewAtomics.NEWER, 3, WORD, 7, 3, 1, null), "the book starts anew");
        assertEquals(7, region.getLongVolatile(WORD));
        atomics.stampsFrom(3); // asked again in its view: its first answer failed
        assertEquals(0, atomics.run(ALICE, ViewAtomics.NEWER, 3, WORD, 6, 3, 1, null), "the stamps stored since stay");
        atomics.stampsFrom(2); // late, for an older view
        assertEquals(0, atomics.run(ALICE, ViewAtomics.NEWER, 3, WORD, 5, 2, 99, null), "the floor does not go down");
        assertEquals(7, region.getLongVolatile(WORD));

        gate.advance(4);
        assertThrows(StaleViewException.class, () -> ViewAtomics.request(wire, 0, ViewAtomics.NEWER, 3, WORD, 8, 4, 1, null),
                "sent in an older view than the backup's");
        fence(fenced, atomics, ALICE);
        assertThrows(FencedException.class, () -> ViewAtomics.request(wire, 0, ViewAtomics.NEWER, 4, WORD, 8, 4, 1, null));
        assertEquals(7, region.getLongVolatile(WORD), "neither the stale nor the fenced convergence stored");
    }

    /**
     * A replica whose region closes (its memory node stops) answers an atomic on the wire as gone, not as a failed
     * message: the atomic did not run, so the client may send it again in the group's next view.
     */
    @Test
    void anAtomicOnAClosedReplicaIsAnsweredGoneAndDoesNotRun() {
        dev.dex.rdma.MessageSender wire = sender((message, offset, length, reply) -> atomics.handle(ALICE, message, offset, length, reply));
        assertEquals(0, ViewAtomics.request(wire, 0, ViewAtomics.ADD, 1, WORD, 3, 0));
        gate.retire("memory server 0's region is closed");

        dev.dex.rdma.replica.ReplicaGoneException gone = assertThrows(dev.dex.rdma.replica.ReplicaGoneException.class,
                () -> ViewAtomics.request(wire, 0, ViewAtomics.ADD, 1, WORD, 4, 0));
        assertEquals("memory server 0's region is closed", gone.getMessage());
        assertEquals(3, region.getLongVolatile(WORD), "the refused add did not run");
    }

    /**
     * Whatever goes wrong on the wire, an atomic fails with a {@link dev.dex.rdma.FabricException}: a fenced client learns
     * it is fenced, and a message the server refuses (its region gone from the control fabric) is a failed verb. An
     * {@link IllegalArgumentException} escaping a lock's release would skip the engine's repair of a failed release
     * (a pending unlock) and leave the lock taken for good.
     */
    @Test
    void aFencedClientOrARefusedMessageFailsAsAFabricFailure() {
        fenced.add(ALICE);
        dev.dex.rdma.MessageSender toAtomics = sender((message, offset, length, reply) -> atomics.handle(ALICE, message, offset, length, reply));
        assertThrows(FencedException.class, () -> ViewAtomics.request(toAtomics, 0, ViewAtomics.SET, 1, WORD, 0, 0));

        dev.dex.rdma.MessageSender refusing = sender((message, offset, length, reply) -> {
            throw new IllegalArgumentException("memory server 0 refused a MESSAGE: no handler");
        });
        dev.dex.rdma.FabricException refused = assertThrows(dev.dex.rdma.FabricException.class,
                () -> ViewAtomics.request(refusing, 0, ViewAtomics.SET, 1, WORD, 0, 0));
        assertTrue(refused.getMessage().contains("no handler"), refused.getMessage());
        assertEquals(0, region.getLongVolatile(WORD));
    }

    @Test
    void aFencedClientsAtomicsAreRefusedAndOthersServed() {
        fence(fenced, atomics, ALICE);

        assertThrows(FencedException.class, () -> atomics.run(ALICE, ViewAtomics.ADD, 1, WORD, 1, 0));
        assertEquals(0, region.getLongVolatile(WORD));
        assertEquals(0, atomics.run(0xB0BL, ViewAtomics.ADD, 1, WORD, 1, 0));
    }

    /**
     * Two threads add for Alice while she is fenced, 200 times over: once the fence returned, the word never changes
     * again, and every add that was not refused is in it.
     */
    @Test
    void noAtomicOfAFencedClientLandsAfterItsFenceReturned() throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            for (int round = 0; round < 200; round++) {
                Region word = Region.offHeap(4L * RegionHeaderDescriptor.MIN_CHUNK_LENGTH);
                Set<Long> marked = ConcurrentHashMap.newKeySet();
                ViewAtomics book = new ViewAtomics(0, word, new ViewGate(0, "replica", 1), marked::contains);
                long client = 1000 + round;
                CountDownLatch started = new CountDownLatch(2);
                AtomicLong done = new AtomicLong();
                List<Future<?>> adders = new ArrayList<>();
                for (int t = 0; t < 2; t++) {
                    adders.add(threads.submit(() -> {
                        started.countDown();
                        try {
                            while (true) {
                                book.run(client, ViewAtomics.ADD, 1, WORD, 1, 0);
                                done.incrementAndGet();
                            }
                        } catch (FencedException refused) {
                            return null;
                        }
                    }));
                }
                started.await();
                fence(marked, book, client);
                long atFence = word.getLongVolatile(WORD);
                for (Future<?> adder : adders) {
                    adder.get(10, TimeUnit.SECONDS);
                }

                assertEquals(atFence, word.getLongVolatile(WORD), "round " + round + ": an add landed after the fence returned");
                assertEquals(done.get(), atFence, "round " + round + ": every add not refused is in the word");
                assertTrue(atFence >= 0);
            }
        } finally {
            threads.shutdownNow();
        }
    }
}
