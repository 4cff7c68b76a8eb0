package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.testing.TestResources;

/**
 * Fencing on the tcp fabric: a memory server that fenced a client identity closes its connections, applies
 * nothing of it afterwards, and refuses its greetings; other clients keep being served.
 */
class TcpFencingTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long OLD_OWNER = 0xA11CEL;
    private static final long NEW_OWNER = 0xB0BL;

    @AutoClose
    private final TestResources resources = new TestResources();

    private static UnsafeBuffer word(long value) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        buffer.putLong(0, value);
        return buffer;
    }

    @Test
    void aFencedClientIsCutOffAndRefusedWhileOthersKeepBeingServed() {
        TcpFabric fabric = resources.closeAfter(new TcpFabric());
        ExportedRegion region = resources.closeAfter(fabric.export(0, 16L * CHUNK, CHUNK));
        Map<Integer, String> endpoints = Map.of(0, region.endpoint());
        RemoteMemory old = resources.closeAfter(fabric.connect(endpoints, OLD_OWNER));
        RemoteMemory fresh = resources.closeAfter(fabric.connect(endpoints, NEW_OWNER));
        RemoteMemory anonymous = resources.closeAfter(fabric.connect(endpoints));
        long address = GlobalAddress.of(0, CHUNK);
        old.write(address, word(1), 0, Long.BYTES);
        assertEquals(OLD_OWNER, old.clientId());

        assertTrue(assertTimeoutPreemptively(Duration.ofSeconds(10), () -> fresh.fence(OLD_OWNER)));

        FencedException refused = assertThrows(FencedException.class, () -> old.write(address, word(2), 0, Long.BYTES));
        assertTrue(refused.getMessage().contains("fenced"), refused.getMessage());
        assertThrows(FencedException.class, () -> old.compareAndSwap(address, 1, 3), "every later verb is refused too");
        assertEquals(1, region.region().getLongVolatile(CHUNK), "nothing of the fenced client landed");
        assertThrows(FencedException.class, () -> fabric.connect(endpoints, OLD_OWNER), "a new connection as that client is refused");
        assertTrue(fabric.isFenced(0, OLD_OWNER));

        assertEquals(1, fresh.compareAndSwap(address, 1, 4), "the fencing client keeps working");
        assertEquals(4, anonymous.fetchAndAdd(address, 1), "an anonymous client keeps working");
        assertFalse(fabric.isFenced(0, NEW_OWNER));
    }

    /**
     * A client whose own side ends its connection (a close; a dead process's kernel does the same) is listed as hung up
     * once it has no connection left; a client the server fenced, whose connections the server closed, is not; a client
     * that hung up and connected again is not either.
     */
    @Test
    void onlyAClientWhoseOwnSideEndedItsLastConnectionIsListedAsHungUp() throws Exception {
        TcpFabric fabric = resources.closeAfter(new TcpFabric());
        ExportedRegion region = resources.closeAfter(fabric.export(0, 16L * CHUNK, CHUNK));
        Map<Integer, String> endpoints = Map.of(0, region.endpoint());
        long address = GlobalAddress.of(0, CHUNK);
        RemoteMemory leaving = fabric.connect(endpoints, OLD_OWNER);
        RemoteMemory fenced = resources.closeAfter(fabric.connect(endpoints, NEW_OWNER));
        RemoteMemory returning = fabric.connect(endpoints, 0xC0DEL);
        leaving.write(address, word(1), 0, Long.BYTES);
        fenced.write(address, word(2), 0, Long.BYTES);
        returning.write(address, word(3), 0, Long.BYTES);
        assertTrue(fabric.hungUpClients(0).isEmpty(), "nobody hung up yet: " + fabric.hungUpClients(0));

        long before = System.nanoTime();
        leaving.close();
        returning.close();
        assertTrue(fabric.fence(0, NEW_OWNER));
        RemoteMemory back = resources.closeAfter(fabric.connect(endpoints, 0xC0DEL));
        back.write(address, word(4), 0, Long.BYTES);

        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!fabric.hungUpClients(0).containsKey(OLD_OWNER) && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        Map<Long, Long> hungUp = fabric.hungUpClients(0);
        assertEquals(java.util.Set.of(OLD_OWNER), hungUp.keySet(), "only the client that closed its last connection: " + hungUp);
        assertTrue(hungUp.get(OLD_OWNER) - before >= 0, "the hang-up's time is when it happened");
        assertTrue(fabric.isFenced(0, NEW_OWNER));
    }

    @Test
    void theMemoryNodeFencesAClientItIsToldAboutEvenBeforeItConnects() {
        TcpFabric fabric = resources.closeAfter(new TcpFabric());
        ExportedRegion region = resources.closeAfter(fabric.export(0, 16L * CHUNK, CHUNK));
        Map<Integer, String> endpoints = Map.of(0, region.endpoint());
        RemoteMemory connected = resources.closeAfter(fabric.connect(endpoints, OLD_OWNER));

        assertTrue(fabric.fence(0, OLD_OWNER), "the server side fences without a client");
        assertTrue(fabric.fence(0, 0x1A7EL), "a client not connected yet is fenced too");

        assertThrows(FencedException.class, () -> connected.read(GlobalAddress.of(0, CHUNK), new UnsafeBuffer(new byte[8]), 0, 8));
        assertThrows(FencedException.class, () -> fabric.connect(endpoints, 0x1A7EL));
    }

    @Test
    void nothingSentBehindARefusedGreetingIsExecuted() throws Exception {
        TcpFabric fabric = resources.closeAfter(new TcpFabric());
        ExportedRegion region = resources.closeAfter(fabric.export(0, 16L * CHUNK, CHUNK));
        fabric.fence(0, OLD_OWNER);
        RawClient raw = resources.closeAfter(new RawClient(region.endpoint()));
        java.io.ByteArrayOutputStream pipelined = new java.io.ByteArrayOutputStream();
        pipelined.write(RawClient.request(TcpFrameDescriptor.OP_HELLO, 0, 1, GlobalAddress.of(0, 0), OLD_OWNER, 0, new byte[0], -1));
        pipelined.write(RawClient.request(TcpFrameDescriptor.OP_HELLO, 0, 2, GlobalAddress.of(0, 0), 0, 0, new byte[0], -1));
        byte[] value = new byte[8];
        value[0] = 99;
        pipelined.write(RawClient.request(TcpFrameDescriptor.OP_WRITE, 8, 3, GlobalAddress.of(0, CHUNK), 0, 0, value, -1));
        raw.send(pipelined.toByteArray());

        assertEquals(TcpFrameDescriptor.STATUS_FENCED, raw.receive().status(), "the fenced client's greeting is refused");
        assertTrue(raw.closedByPeer(), "and its connection closed without answering what it pipelined behind");
        assertEquals(0, region.region().getLongVolatile(CHUNK), "an anonymous greeting sent behind it did not let a write through");
    }

    @Test
    void anonymousOrOwnIdentitiesCannotBeFenced() {
        TcpFabric fabric = resources.closeAfter(new TcpFabric());
        ExportedRegion region = resources.closeAfter(fabric.export(0, 16L * CHUNK, CHUNK));
        RemoteMemory client = resources.closeAfter(fabric.connect(Map.of(0, region.endpoint()), NEW_OWNER));

        assertThrows(IllegalArgumentException.class, () -> client.fence(0));
        assertThrows(IllegalArgumentException.class, () -> client.fence(NEW_OWNER));
        assertThrows(IllegalArgumentException.class, () -> fabric.fence(0, 0));
        client.write(GlobalAddress.of(0, CHUNK), word(5), 0, Long.BYTES);
        assertEquals(5, region.region().getLongVolatile(CHUNK), "the client was not fenced by the refused calls");
    }

    /**
     * Writers of the old owner hammer their words while the new owner fences it: every write the old owner saw
     * acknowledged is in memory when the fence returns, and nothing changes afterwards.
     */
    @Test
    void nothingOfAFencedClientTakesEffectAfterTheFenceReturns() throws Exception {
        TcpFabric fabric = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(Duration.ofSeconds(10)), 0));
        ExportedRegion region = resources.closeAfter(fabric.export(0, 16L * CHUNK, CHUNK));
        Map<Integer, String> endpoints = Map.of(0, region.endpoint());
        RemoteMemory old = resources.closeAfter(fabric.connect(endpoints, OLD_OWNER));
        RemoteMemory fresh = resources.closeAfter(fabric.connect(endpoints, NEW_OWNER));
        int writers = 4;
        AtomicLongArray acknowledged = new AtomicLongArray(writers);
        AtomicReferenceArray<Throwable> stoppedBy = new AtomicReferenceArray<>(writers);
        CountDownLatch running = new CountDownLatch(writers);
        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < writers; w++) {
            int writer = w;
            Thread thread = new Thread(() -> {
                UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
                long address = GlobalAddress.of(0, CHUNK + writer * Long.BYTES);
                running.countDown();
                for (long value = 1; ; value++) {
                    buffer.putLong(0, value);
                    try {
                        old.write(address, buffer, 0, Long.BYTES);
                    } catch (RuntimeException fenced) {
                        stoppedBy.set(writer, fenced);
                        return;
                    }
                    acknowledged.set(writer, value);
                }
            }, "old-owner-" + w);
            thread.start();
            threads.add(thread);
        }
        running.await();
        while (acknowledged.get(writers - 1) < 200) {
            Thread.onSpinWait();
        }

        fresh.fence(OLD_OWNER);
        long[] atFence = new long[writers];
        for (int w = 0; w < writers; w++) {
            atFence[w] = region.region().getLongVolatile(CHUNK + w * Long.BYTES);
        }
        for (Thread thread : threads) {
            thread.join(10_000);
            assertFalse(thread.isAlive(), thread.getName() + " was stopped by the fence");
        }
        Thread.sleep(100);
        long[] later = new long[writers];
        for (int w = 0; w < writers; w++) {
            later[w] = region.region().getLongVolatile(CHUNK + w * Long.BYTES);
            assertTrue(acknowledged.get(w) <= atFence[w], "writer " + w + "'s acknowledged write " + acknowledged.get(w)
                    + " is in memory when the fence returns (found " + atFence[w] + ")");
            assertTrue(stoppedBy.get(w) instanceof FabricException, "writer " + w + " stopped on a fabric failure: " + stoppedBy.get(w));
        }
        assertArrayEquals(atFence, later, "nothing of the fenced client took effect after the fence returned");
        assertThrows(FencedException.class, () -> old.write(GlobalAddress.of(0, CHUNK), word(0), 0, Long.BYTES));
    }
}
