package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.testing.TestResources;

/** What the tcp fabric does when the network or a peer misbehaves: clear errors, no hang, the server keeps serving. */
class TcpFailureTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION = 16L * CHUNK;

    @AutoClose
    private final TestResources resources = new TestResources();

    private TcpFabric fabric(Duration verbTimeout) {
        return resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(verbTimeout), 0));
    }

    /**
     * A memory node keeps at most {@code max-connections} connections open: one more is closed at once, and its
     * client's connect fails naming the server; the admitted clients keep working, and a slot freed by a client
     * that leaves is taken by the next.
     */
    @Test
    void aMemoryNodeRefusesConnectionsBeyondItsLimitAndServesTheOthers() throws Exception {
        TcpFabric server = resources.closeAfter(new TcpFabric(TcpSettings.DEFAULTS.withMaxConnections(2), 0));
        ExportedRegion region = resources.closeAfter(server.export(0, REGION, CHUNK));
        TcpFabric clients = fabric(Duration.ofSeconds(5));
        long address = GlobalAddress.of(0, CHUNK);
        RemoteMemory first = clients.connect(Map.of(0, region.endpoint()));
        RemoteMemory second = resources.closeAfter(clients.connect(Map.of(0, region.endpoint())));
        first.fetchAndAdd(address, 1);
        second.fetchAndAdd(address, 1);
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> clients.connect(Map.of(0, region.endpoint())).fetchAndAdd(address, 100));
        assertTrue(refused.getMessage().contains("memory server 0 at " + region.endpoint()), refused.getMessage());
        assertEquals(2, second.fetchAndAdd(address, 1), "the admitted clients keep working; the refused one added nothing");
        first.close();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        RemoteMemory third = null;
        while (third == null) {
            try {
                third = resources.closeAfter(clients.connect(Map.of(0, region.endpoint())));
            } catch (IllegalArgumentException stillFull) {
                assertTrue(System.nanoTime() < deadline, "the slot of a client that left is taken within 10 s: " + stillFull);
                Thread.sleep(50);
            }
        }
        assertEquals(3, third.fetchAndAdd(address, 1));
    }

    @Test
    void aConnectionLostMidRequestFailsTheVerbClearlyAndTheNextVerbReconnects() throws Exception {
        FakeMemoryServer server = resources.closeAfter(new FakeMemoryServer(0, FakeMemoryServer.Mode.CLOSE));
        RemoteMemory memory = resources.closeAfter(fabric(Duration.ofSeconds(30)).connect(Map.of(0, server.endpoint())));
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[64]);

        FabricException lost = assertTimeoutPreemptively(Duration.ofSeconds(10),
                () -> assertThrows(FabricException.class, () -> memory.read(GlobalAddress.of(0, CHUNK), buffer, 0, 64)));
        assertTrue(lost.getMessage().contains("memory server 0") && lost.getMessage().contains("closed"), lost.getMessage());

        server.mode(FakeMemoryServer.Mode.ANSWER);
        buffer.setMemory(0, 64, (byte) 7);
        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memory.read(GlobalAddress.of(0, CHUNK), buffer, 0, 64));
        assertArrayEquals(new byte[64], buffer.byteArray(), "the reconnected read got the server's bytes");
    }

    /**
     * A memory node that restarts without its data (the tcp fabric keeps a region in the memory node's process)
     * at the same endpoint: a client that reconnects must not read and write the fresh region as if it were
     * the one its addresses and cached pages refer to. The greeting's incarnation tells them apart.
     */
    @Test
    void aClientRefusesAMemoryNodeThatRestartedWithoutItsData() {
        int port = TcpTestPorts.unused();
        TcpSettings fixed = TcpSettings.DEFAULTS.withPort(port);
        TcpFabric first = new TcpFabric(fixed, 0);
        ExportedRegion before = first.export(0, REGION, CHUNK);
        RemoteMemory client = resources.closeAfter(fabric(Duration.ofSeconds(5)).connect(Map.of(0, before.endpoint())));
        UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
        word.putLong(0, 77);
        client.write(GlobalAddress.of(0, CHUNK), word, 0, 8);
        first.close();

        TcpFabric restarted = resources.closeAfter(new TcpFabric(fixed, 0));
        restarted.export(0, REGION, CHUNK);

        FabricException refused = assertThrows(FabricException.class, () -> {
            // The first verb may only find the old connection closed; the reconnect then meets the new region.
            for (int i = 0; i < 3; i++) {
                try {
                    client.read(GlobalAddress.of(0, CHUNK), word, 0, 8);
                } catch (FabricException e) {
                    if (e.getMessage().contains("another region")) {
                        throw e;
                    }
                }
            }
        });
        assertTrue(refused.getMessage().contains("restarted without its data"), refused.getMessage());
        assertEquals(77, word.getLong(0), "nothing was read from the fresh region");
    }

    @Test
    void aServerThatStopsAnsweringFailsTheVerbAfterTheTimeoutWithoutHanging() throws Exception {
        FakeMemoryServer server = resources.closeAfter(new FakeMemoryServer(0, FakeMemoryServer.Mode.SILENT));
        RemoteMemory memory = resources.closeAfter(fabric(Duration.ofMillis(300)).connect(Map.of(0, server.endpoint())));

        FabricException timeout = assertTimeoutPreemptively(Duration.ofSeconds(10),
                () -> assertThrows(FabricException.class, () -> memory.compareAndSwap(GlobalAddress.of(0, CHUNK), 0, 1)));

        assertTrue(timeout.getMessage().contains("did not answer a CAS within 300 ms"), timeout.getMessage());
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(value = FakeMemoryServer.Mode.class, names = {"WRONG_ID", "SHORT"})
    void anAnswerThatBreaksTheProtocolFailsTheVerbAtOnce(FakeMemoryServer.Mode mode) throws Exception {
        FakeMemoryServer server = resources.closeAfter(new FakeMemoryServer(0, mode));
        RemoteMemory memory = resources.closeAfter(fabric(Duration.ofSeconds(30)).connect(Map.of(0, server.endpoint())));

        FabricException broken = assertTimeoutPreemptively(Duration.ofSeconds(10),
                () -> assertThrows(FabricException.class, () -> memory.fetchAndAdd(GlobalAddress.of(0, CHUNK), 1)));

        assertTrue(broken.getMessage().contains("broke the protocol"), broken.getMessage());
    }

    @Test
    void afterATimeoutTheSameThreadsNextVerbOpensANewConnection() throws Exception {
        FakeMemoryServer server = resources.closeAfter(new FakeMemoryServer(0, FakeMemoryServer.Mode.SILENT));
        RemoteMemory memory = resources.closeAfter(fabric(Duration.ofMillis(200)).connect(Map.of(0, server.endpoint())));
        assertThrows(FabricException.class, () -> memory.compareAndSwap(GlobalAddress.of(0, CHUNK), 0, 1));

        server.mode(FakeMemoryServer.Mode.ANSWER);
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[16]);
        buffer.setMemory(0, 16, (byte) 5);

        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memory.read(GlobalAddress.of(0, CHUNK), buffer, 0, 16));
        assertArrayEquals(new byte[16], buffer.byteArray(), "the next read went to a new connection and was answered");
    }

    @Test
    void aBufferTooSmallForTheVerbFailsAtOnceAndTheClientKeepsWorking() throws Exception {
        TcpFabric fabric = fabric(Duration.ofSeconds(30));
        ExportedRegion exported = resources.closeAfter(fabric.export(0, REGION, CHUNK));
        RemoteMemory memory = resources.closeAfter(fabric.connect(Map.of(0, exported.endpoint())));
        UnsafeBuffer small = new UnsafeBuffer(new byte[8]);

        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
            assertThrows(IndexOutOfBoundsException.class, () -> memory.read(GlobalAddress.of(0, CHUNK), small, 0, 64));
            assertThrows(IndexOutOfBoundsException.class, () -> memory.write(GlobalAddress.of(0, CHUNK), small, 0, 64));
            assertThrows(IndexOutOfBoundsException.class, () -> memory.read(GlobalAddress.of(0, CHUNK), small, -1, 8));
        });

        TcpRemoteMemoryTest.writeWord(memory, GlobalAddress.of(0, CHUNK), 77);
        assertEquals(77, TcpRemoteMemoryTest.readWord(memory, GlobalAddress.of(0, CHUNK)));
        assertEquals(0, exported.region().getLongVolatile(CHUNK + 8), "the refused write wrote nothing");
    }

    @Test
    void verbsInFlightOnManyThreadsAllFailWhenTheConnectionDrops() throws Exception {
        FakeMemoryServer server = resources.closeAfter(new FakeMemoryServer(0, FakeMemoryServer.Mode.SILENT));
        RemoteMemory memory = resources.closeAfter(fabric(Duration.ofSeconds(30)).connect(Map.of(0, server.endpoint())));
        ExecutorService threads = Executors.newFixedThreadPool(6);
        try {
            List<Future<?>> verbs = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                verbs.add(threads.submit(() -> memory.fetchAndAdd(GlobalAddress.of(0, CHUNK), 1)));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (server.requests() < 6 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(6, server.requests(), "every verb reached the server");

            server.close();

            for (Future<?> verb : verbs) {
                Throwable failure = assertThrows(java.util.concurrent.ExecutionException.class, () -> verb.get(10, TimeUnit.SECONDS)).getCause();
                assertTrue(failure instanceof FabricException, failure.toString());
            }
        } finally {
            threads.shutdownNow();
        }
    }

    /**
     * A client that sends 400 reads of the largest size (100 MiB of answers) and reads nothing: the server stops
     * reading its requests once about its write-buffer high water mark is queued, instead of queueing every
     * answer; when the client reads, every answer comes, in order and whole.
     */
    @Test
    void aClientThatAsksFasterThanItReadsGetsBackPressureNotUnboundedMemory() throws Exception {
        TcpFabric fabric = fabric(Duration.ofSeconds(30));
        int size = TcpSettings.DEFAULTS.maxTransfer();
        ExportedRegion exported = resources.closeAfter(fabric.export(0, 4L << 20, CHUNK));
        exported.region().putLongVolatile(CHUNK, 99);
        RawClient raw = resources.closeAfter(new RawClient(exported.endpoint()));
        assertEquals(TcpFrameDescriptor.STATUS_OK, raw.greet(0, 0).status());
        int requests = 400;
        java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
        for (int i = 1; i <= requests; i++) {
            all.write(RawClient.request(TcpFrameDescriptor.OP_READ, size, i, GlobalAddress.of(0, CHUNK), 0, 0, new byte[0], -1));
        }
        raw.send(all.toByteArray());

        long peak = 0;
        for (int i = 0; i < 50; i++) {
            peak = Math.max(peak, fabric.pendingAnswerBytes(0));
            Thread.sleep(20);
        }
        long bound = RegionServer.waterMark(size).high() + 2L * size;
        assertTrue(peak > 0, "the server answered and queued some answers");
        assertTrue(peak <= bound, "answers queued at most the high water mark and one answer more: " + peak + " > " + bound);

        for (int i = 1; i <= requests; i++) {
            RawClient.Response answer = raw.receive();
            assertEquals(i, answer.id(), "answers in request order");
            assertEquals(TcpFrameDescriptor.STATUS_OK, answer.status());
            assertEquals(size, answer.payload().length);
            assertEquals(99, java.nio.ByteBuffer.wrap(answer.payload()).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong(0));
        }
        // The server counts an answer written once its write completes, which may be a moment after the client read it.
        long drainedBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (fabric.pendingAnswerBytes(0) != 0 && System.nanoTime() < drainedBy) {
            Thread.sleep(10);
        }
        assertEquals(0, fabric.pendingAnswerBytes(0), "nothing stays queued once every answer was read");
    }

    /**
     * A compute node configured with a larger max-transfer than the memory node's: the greeting tells it the
     * server's limit and it splits by that. Before, its 300 KiB read was a malformed frame to the server, which
     * closed the connection.
     */
    @Test
    void aClientWithALargerMaxTransferSplitsByTheServers() {
        TcpSettings small = new TcpSettings("127.0.0.1", 0, 1, 64, Duration.ofSeconds(30), Duration.ofSeconds(5), 1, 50_000, 64 << 10);
        TcpSettings large = new TcpSettings("127.0.0.1", 0, 1, 64, Duration.ofSeconds(30), Duration.ofSeconds(5), 1, 50_000, 1 << 20);
        ExportedRegion exported = resources.closeAfter(resources.closeAfter(new TcpFabric(small, 0)).export(0, 4L << 20, CHUNK));
        RemoteMemory memory = resources.closeAfter(resources.closeAfter(new TcpFabric(large, 0)).connect(Map.of(0, exported.endpoint())));
        byte[] data = new byte[300 << 10];
        new java.util.Random(3).nextBytes(data);
        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memory.write(GlobalAddress.of(0, CHUNK), new UnsafeBuffer(data), 0, data.length));
        UnsafeBuffer back = new UnsafeBuffer(new byte[data.length]);
        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memory.read(GlobalAddress.of(0, CHUNK), back, 0, data.length));
        assertArrayEquals(data, back.byteArray());
    }

    @Test
    void aRequestOutsideTheRegionIsRefusedAndTheConnectionKeepsServing() throws Exception {
        TcpFabric fabric = fabric(Duration.ofSeconds(30));
        ExportedRegion exported = resources.closeAfter(fabric.export(0, REGION, CHUNK));
        exported.region().putLongVolatile(CHUNK, 99);
        RawClient raw = resources.closeAfter(new RawClient(exported.endpoint()));
        raw.send(RawClient.request(TcpFrameDescriptor.OP_READ, 8, 9, GlobalAddress.of(0, CHUNK), 0, 0, new byte[0], -1));
        RawClient.Response beforeHello = raw.receive();
        assertEquals(TcpFrameDescriptor.STATUS_REFUSED, beforeHello.status(), "a request before HELLO is refused");
        assertTrue(new String(beforeHello.payload(), StandardCharsets.UTF_8).contains("say HELLO first"));
        assertEquals(TcpFrameDescriptor.STATUS_OK, raw.greet(0, 0).status());

        raw.send(RawClient.request(TcpFrameDescriptor.OP_READ, 16, 1, GlobalAddress.of(0, REGION - 8), 0, 0, new byte[0], -1));
        RawClient.Response outside = raw.receive();
        raw.send(RawClient.request(TcpFrameDescriptor.OP_WRITE, 8, 2, GlobalAddress.of(0, REGION), 0, 0, new byte[8], -1));
        RawClient.Response outsideWrite = raw.receive();
        raw.send(RawClient.request(TcpFrameDescriptor.OP_CAS, 0, 3, GlobalAddress.of(0, CHUNK + 4), 0, 1, new byte[0], -1));
        RawClient.Response misaligned = raw.receive();
        raw.send(RawClient.request(TcpFrameDescriptor.OP_FAA, 0, 4, GlobalAddress.of(5, CHUNK), 1, 0, new byte[0], -1));
        RawClient.Response otherServer = raw.receive();
        raw.send(RawClient.request(TcpFrameDescriptor.OP_READ, 8, 5, GlobalAddress.of(0, CHUNK), 0, 0, new byte[0], -1));
        RawClient.Response inside = raw.receive();

        assertEquals(TcpFrameDescriptor.STATUS_REFUSED, outside.status());
        assertEquals(1, outside.id());
        assertTrue(new String(outside.payload(), StandardCharsets.UTF_8).contains("outside region"));
        assertEquals(TcpFrameDescriptor.STATUS_REFUSED, outsideWrite.status());
        assertEquals(TcpFrameDescriptor.STATUS_REFUSED, misaligned.status());
        assertTrue(new String(misaligned.payload(), StandardCharsets.UTF_8).contains("aligned"));
        assertEquals(TcpFrameDescriptor.STATUS_REFUSED, otherServer.status());
        assertTrue(new String(otherServer.payload(), StandardCharsets.UTF_8).contains("serves memory server 0, not 5"));
        assertEquals(TcpFrameDescriptor.STATUS_OK, inside.status());
        assertEquals(5, inside.id());
        assertEquals(99, ByteBuffer.wrap(inside.payload()).order(ByteOrder.LITTLE_ENDIAN).getLong());
        assertEquals(99, exported.region().getLongVolatile(CHUNK), "the refused CAS changed nothing");
        assertEquals(0, exported.region().getLongVolatile(REGION - 8), "the refused write changed nothing");
    }

    @Test
    void malformedAndOversizedFramesCloseOnlyTheirConnection() throws Exception {
        TcpFabric fabric = fabric(Duration.ofSeconds(30));
        ExportedRegion exported = resources.closeAfter(fabric.export(0, REGION, CHUNK));
        RemoteMemory healthy = resources.closeAfter(fabric.connect(Map.of(0, exported.endpoint())));
        byte[][] bad = {
            RawClient.request(42, 0, 1, GlobalAddress.of(0, CHUNK), 0, 0, new byte[0], -1),
            RawClient.request(TcpFrameDescriptor.OP_WRITE, 64, 1, GlobalAddress.of(0, CHUNK), 0, 0, new byte[8], -1),
            RawClient.request(TcpFrameDescriptor.OP_READ, 8, 1, GlobalAddress.of(0, CHUNK), 0, 0, new byte[8], -1),
            RawClient.request(TcpFrameDescriptor.OP_READ, -1, 1, GlobalAddress.of(0, CHUNK), 0, 0, new byte[0], -1),
            RawClient.request(TcpFrameDescriptor.OP_READ, 1 << 30, 1, GlobalAddress.of(0, CHUNK), 0, 0, new byte[0], -1),
            RawClient.request(TcpFrameDescriptor.OP_READ, 8, 1, GlobalAddress.of(0, CHUNK), 0, 0, new byte[0], 12),
            RawClient.request(TcpFrameDescriptor.OP_WRITE, 8, 1, GlobalAddress.of(0, CHUNK), 0, 0, new byte[8], Integer.MAX_VALUE),
        };
        for (int i = 0; i < bad.length; i++) {
            try (RawClient raw = new RawClient(exported.endpoint())) {
                raw.send(bad[i]);
                assertTrue(raw.closedByPeer(), "frame " + i + " closes its connection");
            }
            TcpRemoteMemoryTest.writeWord(healthy, GlobalAddress.of(0, 2L * CHUNK), i + 1);
            assertEquals(i + 1, TcpRemoteMemoryTest.readWord(healthy, GlobalAddress.of(0, 2L * CHUNK)),
                    "another connection keeps being served after frame " + i);
        }
        assertEquals(0, exported.region().getLongVolatile(CHUNK), "no malformed write was applied");
    }

    @Test
    void compareAndSwapFromManyConnectionsIsLinearizable() throws Exception {
        TcpFabric fabric = fabric(Duration.ofSeconds(30));
        ExportedRegion exported = resources.closeAfter(fabric.export(0, REGION, CHUNK));
        int clients = 4;
        int threadsPerClient = 2;
        int increments = 500;
        long lock = GlobalAddress.of(0, CHUNK);
        long pair = GlobalAddress.of(0, 2L * CHUNK);
        List<RemoteMemory> memories = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            memories.add(resources.closeAfter(fabric.connect(Map.of(0, exported.endpoint()))));
        }
        ExecutorService threads = Executors.newFixedThreadPool(clients * threadsPerClient);
        try {
            List<Future<Integer>> results = new ArrayList<>();
            for (int t = 0; t < clients * threadsPerClient; t++) {
                RemoteMemory memory = memories.get(t % clients);
                long tag = t + 1;
                results.add(threads.submit(() -> {
                    // A remote spin lock by CAS guards a two-word record that is read and written non-atomically:
                    // if two holders ever overlapped, an increment would be lost or the words would disagree.
                    UnsafeBuffer record = new UnsafeBuffer(new byte[16]);
                    int mismatches = 0;
                    for (int i = 0; i < increments; i++) {
                        while (memory.compareAndSwap(lock, 0, tag) != 0) {
                            Thread.onSpinWait();
                        }
                        memory.read(pair, record, 0, 16);
                        if (record.getLong(0) != record.getLong(8)) {
                            mismatches++;
                        }
                        record.putLong(0, record.getLong(0) + 1);
                        memory.write(pair, record, 0, 8);
                        record.putLong(8, record.getLong(8) + 1);
                        memory.write(pair + 8, record, 8, 8);
                        assertEquals(tag, memory.compareAndSwap(lock, tag, 0), "the lock held its owner's tag");
                    }
                    return mismatches;
                }));
            }
            for (Future<Integer> result : results) {
                assertEquals(0, result.get(60, TimeUnit.SECONDS), "a holder saw a half-updated record");
            }
        } finally {
            threads.shutdownNow();
        }
        long total = (long) clients * threadsPerClient * increments;
        assertEquals(total, exported.region().getLongVolatile(2L * CHUNK));
        assertEquals(total, exported.region().getLongVolatile(2L * CHUNK + 8));
        assertEquals(0, exported.region().getLongVolatile(CHUNK));
        assertFalse(memories.isEmpty());
    }
}
