package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;

/** Two-sided messages over the tcp fabric: what carries offloaded operations between hosts. */
class TcpMessageTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;

    /** Answers the message's bytes reversed, followed by the region's word at offset CHUNK; refuses an empty one. */
    private static MessageHandler reverser(ExportedRegion region) {
        return (message, offset, length, reply) -> {
            if (length == 0) {
                throw new IllegalArgumentException("an empty message");
            }
            for (int i = 0; i < length; i++) {
                reply.putByte(i, message.getByte(offset + length - 1 - i));
            }
            reply.putLong(length, region.region().getLongVolatile(CHUNK));
            return length + Long.BYTES;
        };
    }

    @Test
    void aMessageIsAnsweredByTheMemoryServersHandlerInOrderWithVerbs() {
        try (TcpFabric memorySide = new TcpFabric(); TcpFabric computeSide = new TcpFabric()) {
            ExportedRegion region = memorySide.export(2, 16L * CHUNK, CHUNK);
            memorySide.handleMessages(2, reverser(region));
            try (RemoteMemory memory = computeSide.connect(Map.of(2, region.endpoint()))) {
                UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
                word.putLong(0, 4242);
                memory.write(GlobalAddress.of(2, CHUNK), word, 0, 8);
                UnsafeBuffer reply = new UnsafeBuffer(new byte[64]);

                int n = ((TcpRemoteMemory) memory).send(2, new UnsafeBuffer(new byte[] {1, 2, 3}), 0, 3, reply, 5);

                assertEquals(3 + 8, n);
                byte[] answer = new byte[3];
                reply.getBytes(5, answer);
                assertArrayEquals(new byte[] {3, 2, 1}, answer);
                assertEquals(4242, reply.getLong(8), "the handler saw the write issued before the message");
            }
        }
    }

    /**
     * A handler that blocks (the disni fabric registering memory for a key grant) runs off the event loop: other
     * connections are served meanwhile, and the handler learns who sent the message.
     */
    @Test
    void aBlockingHandlerRunsOffTheEventLoopAndIsToldTheSender() throws Exception {
        java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicLong sender = new java.util.concurrent.atomic.AtomicLong(-1);
        MessageHandler slow = new MessageHandler() {
            @Override
            public int handle(org.agrona.DirectBuffer message, int offset, int length, org.agrona.MutableDirectBuffer reply) {
                throw new AssertionError("the transport names the sender");
            }

            @Override
            public int handle(long client, org.agrona.DirectBuffer message, int offset, int length, org.agrona.MutableDirectBuffer reply) {
                sender.set(client);
                entered.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                reply.putByte(0, (byte) 42);
                return 1;
            }

            @Override
            public boolean blocking() {
                return true;
            }
        };
        TcpSettings oneLoop = TcpSettings.DEFAULTS; // one event loop: a handler on it would hold up every connection
        try (TcpFabric memorySide = new TcpFabric(oneLoop, 0); TcpFabric computeSide = new TcpFabric()) {
            ExportedRegion region = memorySide.export(0, 16L * CHUNK, CHUNK);
            memorySide.handleMessages(0, slow);
            try (RemoteMemory asker = computeSide.connect(Map.of(0, region.endpoint()), 77);
                 RemoteMemory other = computeSide.connect(Map.of(0, region.endpoint()), 78)) {
                java.util.concurrent.CompletableFuture<Integer> answer = java.util.concurrent.CompletableFuture.supplyAsync(() ->
                        ((TcpRemoteMemory) asker).send(0, new UnsafeBuffer(new byte[] {1}), 0, 1, new UnsafeBuffer(new byte[8]), 0));
                assertTrue(entered.await(10, java.util.concurrent.TimeUnit.SECONDS));

                try {
                    java.util.concurrent.CompletableFuture<Long> meanwhile = java.util.concurrent.CompletableFuture.supplyAsync(
                            () -> other.fetchAndAdd(GlobalAddress.of(0, CHUNK), 1));
                    assertEquals(0, meanwhile.get(5, java.util.concurrent.TimeUnit.SECONDS), "another client is served meanwhile");
                } finally {
                    release.countDown();
                }
                assertEquals(1, answer.get(10, java.util.concurrent.TimeUnit.SECONDS));
                assertEquals(77, sender.get());
            }
        }
    }

    @Test
    void refusedAndMalformedMessagesFailWithTheReasonAndTheConnectionKeepsServing() {
        try (TcpFabric memorySide = new TcpFabric(); TcpFabric computeSide = new TcpFabric()) {
            ExportedRegion withHandler = memorySide.export(0, 16L * CHUNK, CHUNK);
            ExportedRegion without = memorySide.export(1, 16L * CHUNK, CHUNK);
            memorySide.handleMessages(0, reverser(withHandler));
            try (RemoteMemory memory = computeSide.connect(Map.of(0, withHandler.endpoint(), 1, without.endpoint()))) {
                TcpRemoteMemory sender = (TcpRemoteMemory) memory;
                UnsafeBuffer reply = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);

                IllegalArgumentException noHandler = assertThrows(IllegalArgumentException.class,
                        () -> sender.send(1, new UnsafeBuffer(new byte[4]), 0, 4, reply, 0));
                assertTrue(noHandler.getMessage().contains("takes no messages"), noHandler.getMessage());
                IllegalArgumentException empty = assertThrows(IllegalArgumentException.class,
                        () -> sender.send(0, new UnsafeBuffer(new byte[4]), 0, 0, reply, 0));
                assertTrue(empty.getMessage().contains("an empty message"), empty.getMessage());
                assertThrows(IllegalArgumentException.class,
                        () -> sender.send(0, new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE + 1]), 0,
                                MessageHandler.MAX_MESSAGE + 1, reply, 0));
                assertThrows(IllegalArgumentException.class, () -> sender.send(7, new UnsafeBuffer(new byte[4]), 0, 4, reply, 0));

                assertEquals(1 + 8, sender.send(0, new UnsafeBuffer(new byte[] {9}), 0, 1, reply, 0), "still served");
            }
        }
    }
}
