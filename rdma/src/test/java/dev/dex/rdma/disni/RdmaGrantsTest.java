package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.replica.StaleViewException;
import dev.dex.rdma.testing.TestResources;

/** The book of a region's RDMA keys: grants, releases, fences and the messages that ask for them. */
class RdmaGrantsTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long ALICE = 0xA11CEL;
    private static final long BOB = 0xB0BL;
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    @AutoClose
    private final TestResources resources = new TestResources();
    private final InJvmRdmaTransport device = new InJvmRdmaTransport(DisniSettings.DEFAULTS.maxTransfer(), 0);
    private final LocalFabric local = resources.closeAfter(new LocalFabric(0, 12));
    private final ExportedRegion region = resources.closeAfter(local.export(0, 4L * CHUNK, CHUNK));
    private final RdmaGrants grants = resources.closeAfter(new RdmaGrants(0, device.register(region.region())));

    @Test
    void eachGrantRegistersEverySegmentUnderKeysOfItsOwnAndAReleaseGivesThemBack() {
        RdmaGrants.Granted alice = grants.grant(ALICE);
        RdmaGrants.Granted bob = grants.grant(BOB);

        assertEquals(region.region().segmentCount(), alice.rkeys().length);
        assertEquals(2 * region.region().segmentCount(), device.registrations());
        assertTrue(alice.id() != bob.id());
        assertFalse(grants.release(BOB, alice.id()), "nobody gives back another client's keys");
        assertTrue(grants.release(ALICE, alice.id()));
        assertFalse(grants.release(ALICE, alice.id()), "a grant is given back once");
        assertEquals(region.region().segmentCount(), device.registrations());
        assertEquals(1, grants.openGrants());
    }

    @Test
    void aFenceRevokesTheClientsKeysAloneAndRefusesItNewOnes() {
        grants.grant(ALICE);
        grants.grant(ALICE);
        RdmaGrants.Granted bob = grants.grant(BOB);

        grants.fence(ALICE);

        assertEquals(1, grants.openGrants());
        assertEquals(bob.rkeys().length, device.registrations());
        assertThrows(FencedException.class, () -> grants.grant(ALICE));
        assertTrue(grants.isFenced(ALICE));
        assertThrows(IllegalArgumentException.class, () -> grants.fence(0), "anonymous clients cannot be fenced");
    }

    @Test
    void openGrantsAreBounded() {
        for (int i = 0; i < RdmaGrants.MAX_GRANTS; i++) {
            grants.grant(i + 1);
        }

        IllegalStateException full = assertThrows(IllegalStateException.class, () -> grants.grant(ALICE));

        assertTrue(full.getMessage().contains("1024 RDMA key grants open, its limit"), full.getMessage());
        assertEquals(RdmaGrants.MAX_GRANTS * region.region().segmentCount(), device.registrations(), "the refused grant left nothing registered");
    }

    @Test
    void closeRevokesEveryGrantAndRefusesLaterOnes() {
        grants.grant(ALICE);
        grants.grant(0);

        grants.close();

        assertEquals(0, device.registrations());
        assertThrows(IllegalStateException.class, () -> grants.grant(BOB));
    }

    @Test
    void theMessagesAskForKeysAndGiveThemBackAsTheSendersIdentity() {
        UnsafeBuffer reply = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        UnsafeBuffer grant = request(RdmaGrants.GRANT, 0, RdmaGrants.GRANT_LENGTH);

        int n = grants.handle(ALICE, grant, 0, RdmaGrants.GRANT_LENGTH, reply);

        int segments = region.region().segmentCount();
        assertEquals(RdmaGrants.ANSWER_HEADER + 4 * segments, n);
        assertEquals(RdmaGrants.MAGIC, reply.getInt(0, ORDER));
        assertEquals(segments, reply.getInt(4, ORDER));
        long id = reply.getLong(8, ORDER);
        UnsafeBuffer release = request(RdmaGrants.RELEASE, id, RdmaGrants.RELEASE_LENGTH);
        assertEquals(RdmaGrants.ANSWER_HEADER, grants.handle(BOB, release, 0, RdmaGrants.RELEASE_LENGTH, reply));
        assertEquals(0, reply.getInt(4, ORDER), "Bob cannot give back Alice's keys");
        assertEquals(RdmaGrants.ANSWER_HEADER, grants.handle(ALICE, release, 0, RdmaGrants.RELEASE_LENGTH, reply));
        assertEquals(1, reply.getInt(4, ORDER));
        assertEquals(0, device.registrations());
    }

    @Test
    void aReleaseTheDeviceRefusesKeepsTheGrantInTheBookForTheNextFence() {
        UnsafeBuffer reply = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        RdmaGrants.Granted alice = grants.grant(ALICE);
        device.failNextDeregistration(new dev.dex.rdma.FabricException("the device did not deregister the segment"));

        assertEquals(RdmaGrants.ANSWER_HEADER, grants.handle(ALICE, request(RdmaGrants.RELEASE, alice.id(), RdmaGrants.RELEASE_LENGTH),
                0, RdmaGrants.RELEASE_LENGTH, reply));

        assertEquals(0, reply.getInt(4, ORDER), "not given back");
        assertEquals(1, grants.openGrants());
        assertTrue(device.isRegistered(alice.rkeys()[0]));
        grants.fence(ALICE);
        assertFalse(device.isRegistered(alice.rkeys()[0]), "the fence found it and revoked it");
        assertEquals(0, grants.openGrants());
        assertTrue(grants.blocking(), "registering memory is not for an I/O thread");
    }

    @Test
    void malformedOrRefusedRequestsAreRefusedWithTheReason() {
        UnsafeBuffer reply = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        UnsafeBuffer wrongMagic = request(RdmaGrants.GRANT, 0, RdmaGrants.GRANT_LENGTH);
        wrongMagic.putInt(0, 0x12345678, ORDER);
        UnsafeBuffer grantWithAnId = request(RdmaGrants.GRANT, 7, RdmaGrants.RELEASE_LENGTH);
        UnsafeBuffer unknownKind = request((byte) 9, 0, RdmaGrants.GRANT_LENGTH);

        assertTrue(assertThrows(IllegalArgumentException.class, () -> grants.handle(ALICE, wrongMagic, 0, 8, reply))
                .getMessage().contains("not an RDMA key request"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> grants.handle(ALICE, wrongMagic, 0, 3, reply))
                .getMessage().contains("not an RDMA key request"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> grants.handle(ALICE, grantWithAnId, 0, 16, reply))
                .getMessage().contains("kind 1 has 8 bytes"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> grants.handle(ALICE, unknownKind, 0, 8, reply))
                .getMessage().contains("of kind 9"));
        grants.fence(ALICE);
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> grants.handle(ALICE, request(RdmaGrants.GRANT, 0, 8), 0, 8, reply)).getMessage().contains("fenced client a11ce"));
        assertEquals(0, device.registrations());
    }

    /**
     * A replica's view change revokes the keys of every older view at once (a fence of all their clients), keeps those
     * of the view it moves to or a newer one, and refuses keys for an older view from then on.
     */
    @Test
    void aViewChangeRevokesEveryKeyOfAnOlderViewAndRefusesKeysForOne() {
        RdmaGrants.Granted carol = grants.grant(0xCA401L);
        RdmaGrants.Granted alice = grants.grant(ALICE, 1);
        RdmaGrants.Granted bob = grants.grant(BOB, 2);
        RdmaGrants.Granted aliceLater = grants.grant(ALICE, 3);

        grants.advanceView(2);

        assertEquals(2, grants.view());
        assertEquals(2, grants.openGrants());
        for (int[] revoked : List.of(carol.rkeys(), alice.rkeys())) {
            assertFalse(device.isRegistered(revoked[0]), "keys of views 0 and 1 are revoked");
        }
        assertTrue(device.isRegistered(bob.rkeys()[0]), "keys of the view moved to stay");
        assertTrue(device.isRegistered(aliceLater.rkeys()[0]), "keys of a newer view stay");
        StaleViewException stale = assertThrows(StaleViewException.class, () -> grants.grant(ALICE, 1));
        assertEquals(1, stale.clientView());
        assertEquals(2, stale.replicaView());
        assertThrows(StaleViewException.class, () -> grants.grant(BOB), "a plain grant is of view 0");
        assertThrows(IllegalArgumentException.class, () -> grants.advanceView(1), "a view only grows");
        grants.advanceView(4);
        assertEquals(0, grants.openGrants());
        assertEquals(0, device.registrations());
    }

    /** The race the lock closes: the region moves past a grant's view while the grant registers its keys. */
    @Test
    void aGrantWhoseViewIsLeftWhileItRegistersIsRefusedAndItsKeysRevoked() {
        int[] registeredDuring = new int[1];
        device.duringNextRegistration(() -> {
            registeredDuring[0] = device.registrations();
            grants.advanceView(2);
        });

        StaleViewException stale = assertThrows(StaleViewException.class, () -> grants.grant(ALICE, 1));

        assertEquals(2, stale.replicaView());
        assertEquals(region.region().segmentCount(), registeredDuring[0], "the keys were registered when the view moved");
        assertEquals(0, device.registrations(), "and revoked before the grant was refused");
        assertEquals(0, grants.openGrants());
    }

    @Test
    void anAdvanceTheDeviceRefusesIsCompletedByTheNextOne() {
        RdmaGrants.Granted alice = grants.grant(ALICE, 1);
        device.failNextDeregistration(new dev.dex.rdma.FabricException("the device did not deregister the segment"));

        assertThrows(dev.dex.rdma.FabricException.class, () -> grants.advanceView(2));

        assertEquals(2, grants.view(), "the view moved: no new key of view 1 is handed out");
        assertThrows(StaleViewException.class, () -> grants.grant(ALICE, 1));
        assertTrue(device.isRegistered(alice.rkeys()[0]), "the key the device kept is still in the book");
        grants.advanceView(2);
        assertFalse(device.isRegistered(alice.rkeys()[0]), "moving to the same view again revokes it");
        assertEquals(0, grants.openGrants());
    }

    @Test
    void theMessagesAskForKeysInAViewAndForTheView() {
        UnsafeBuffer reply = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        grants.advanceView(5);
        UnsafeBuffer view = request(RdmaGrants.VIEW, 0, RdmaGrants.VIEW_LENGTH);

        assertEquals(RdmaGrants.ANSWER_HEADER, grants.handle(ALICE, view, 0, RdmaGrants.VIEW_LENGTH, reply));
        assertEquals(0, reply.getInt(4, ORDER));
        assertEquals(5, reply.getLong(8, ORDER));

        int n = grants.handle(ALICE, request(RdmaGrants.GRANT_IN_VIEW, 4, RdmaGrants.GRANT_IN_VIEW_LENGTH), 0,
                RdmaGrants.GRANT_IN_VIEW_LENGTH, reply);
        assertEquals(RdmaGrants.ANSWER_HEADER, n);
        assertEquals(RdmaGrants.STALE_VIEW, reply.getInt(4, ORDER), "view 4 is older than the region's");
        assertEquals(5, reply.getLong(8, ORDER), "and the answer names the region's view");
        assertEquals(0, device.registrations());

        n = grants.handle(ALICE, request(RdmaGrants.GRANT_IN_VIEW, 5, RdmaGrants.GRANT_IN_VIEW_LENGTH), 0,
                RdmaGrants.GRANT_IN_VIEW_LENGTH, reply);
        int segments = region.region().segmentCount();
        assertEquals(RdmaGrants.ANSWER_HEADER + 4 * segments, n);
        assertEquals(segments, reply.getInt(4, ORDER));
        assertTrue(device.isRegistered(reply.getInt(RdmaGrants.ANSWER_HEADER, ORDER)));
        grants.advanceView(6);
        assertEquals(0, device.registrations(), "the key granted by message belongs to view 5");
    }

    /**
     * Grants in a view race with the region's moves past it, many times over: whatever the interleaving, once the
     * advance and the grants are done no key of the older view is registered, and every grant either was refused as
     * stale or handed out keys the advance revoked. A grant of the newer view, beside, is untouched.
     */
    @Test
    void noKeyOfAnOlderViewOutlivesTheAdvanceWhateverTheInterleaving() throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(3);
        try {
            for (int round = 0; round < 300; round++) {
                RdmaGrants book = new RdmaGrants(0, device.register(region.region()));
                CyclicBarrier start = new CyclicBarrier(3);
                ConcurrentLinkedQueue<int[]> handedOut = new ConcurrentLinkedQueue<>();
                List<Future<?>> done = new ArrayList<>();
                for (int t = 0; t < 2; t++) {
                    long client = 1000 + t;
                    done.add(threads.submit(() -> {
                        start.await();
                        for (int i = 0; i < 3; i++) {
                            try {
                                handedOut.add(book.grant(client, 1).rkeys());
                            } catch (StaleViewException refused) {
                                // the advance came first
                            }
                        }
                        return null;
                    }));
                }
                done.add(threads.submit(() -> {
                    start.await();
                    book.advanceView(2);
                    return null;
                }));
                for (Future<?> future : done) {
                    future.get(10, TimeUnit.SECONDS);
                }
                RdmaGrants.Granted bob = book.grant(BOB, 2);

                assertEquals(1, book.openGrants(), "round " + round + ": only the grant of view 2 is open");
                assertEquals(bob.rkeys().length, device.registrations(), "round " + round + ": no key of view 1 is registered");
                for (int[] keys : handedOut) {
                    for (int rkey : keys) {
                        assertFalse(device.isRegistered(rkey), "round " + round + ": a key of view 1 still works");
                    }
                }
                book.close();
            }
        } finally {
            threads.shutdownNow();
        }
    }

    /**
     * Grants of one client race with its fence, many times over: whatever the interleaving, once the fence and
     * the grants are done no key of the fenced client is registered, and every grant either was refused as
     * fenced or handed out keys the fence revoked. Bob's grants, beside, are untouched.
     */
    @Test
    void noKeyOfAFencedClientOutlivesItsFenceWhateverTheInterleaving() throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(3);
        try {
            for (int round = 0; round < 300; round++) {
                RdmaGrants book = new RdmaGrants(0, device.register(region.region()));
                long client = 1000 + round;
                CyclicBarrier start = new CyclicBarrier(3);
                ConcurrentLinkedQueue<int[]> handedOut = new ConcurrentLinkedQueue<>();
                List<Future<?>> done = new ArrayList<>();
                for (int t = 0; t < 2; t++) {
                    done.add(threads.submit(() -> {
                        start.await();
                        for (int i = 0; i < 3; i++) {
                            try {
                                handedOut.add(book.grant(client).rkeys());
                            } catch (FencedException refused) {
                                // the fence came first
                            }
                        }
                        return null;
                    }));
                }
                done.add(threads.submit(() -> {
                    start.await();
                    book.fence(client);
                    return null;
                }));
                RdmaGrants.Granted bob = book.grant(BOB);
                for (Future<?> future : done) {
                    future.get(10, TimeUnit.SECONDS);
                }

                assertEquals(1, book.openGrants(), "round " + round + ": only Bob's grant is open");
                assertEquals(bob.rkeys().length, device.registrations(), "round " + round + ": no key of the fenced client is registered");
                for (int[] keys : handedOut) {
                    for (int rkey : keys) {
                        assertFalse(device.isRegistered(rkey), "round " + round + ": a key handed out to the fenced client still works");
                    }
                }
                book.close();
            }
        } finally {
            threads.shutdownNow();
        }
    }

    private static UnsafeBuffer request(byte kind, long id, int length) {
        UnsafeBuffer request = new UnsafeBuffer(new byte[length]);
        request.putInt(0, RdmaGrants.MAGIC, ORDER);
        request.putByte(4, kind);
        if (length >= RdmaGrants.RELEASE_LENGTH) {
            request.putLong(8, id, ORDER);
        }
        return request;
    }
}
