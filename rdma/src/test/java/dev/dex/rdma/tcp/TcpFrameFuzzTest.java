package dev.dex.rdma.tcp;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionFormat;
import dev.dex.rdma.RegionHeaderDescriptor;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;

/**
 * Fuzz test (Jazzer) of the {@code tcp} fabric's request frames as a memory node's region server decodes and
 * executes them: each input is a connection (an embedded channel set up as the server sets up a real one) fed a
 * sequence of frames, mostly well-formed with fuzzed fields (ops, counts, addresses in and around the region,
 * payloads, length prefixes), sometimes raw bytes, with or without a greeting first. The server must answer,
 * refuse or close the connection, never throw out of its pipeline, fail with an error, or hang. One input in eight
 * goes to the disni key grants' messages instead ({@link dev.dex.rdma.disni.GrantMessagesFuzzing}). {@code mvn -B
 * verify} fuzzes it for 10 s (the {@code fuzz} execution, {@code JAZZER_FUZZ=1}); docs/security.md.
 */
class TcpFrameFuzzTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long LENGTH = 16L * CHUNK;
    private static final TcpSettings SETTINGS = TcpSettings.DEFAULTS;
    private static final Region REGION = Region.offHeap(LENGTH);
    private static final RegionServer SERVER;

    static {
        RegionFormat.format(REGION, CHUNK);
        SERVER = RegionServer.start(0, REGION, CHUNK, SETTINGS, IoTransport.create(1, null));
    }

    /** The harness reaches the server: an embedded connection set up this way answers a greeting and a read. */
    @org.junit.jupiter.api.Test
    void anEmbeddedConnectionIsServedLikeARealOne() {
        EmbeddedChannel channel = new EmbeddedChannel();
        SERVER.initConnection(channel, REGION, CHUNK, SETTINGS, null);
        REGION.putLongVolatile(CHUNK, 0x5eed);
        channel.writeInbound(Unpooled.wrappedBuffer(RawClient.request(TcpFrameDescriptor.OP_HELLO, 0, 1, GlobalAddress.of(0, 0), 0, 0,
                new byte[0], -1)));
        channel.writeInbound(Unpooled.wrappedBuffer(RawClient.request(TcpFrameDescriptor.OP_READ, 8, 2, GlobalAddress.of(0, CHUNK), 0, 0,
                new byte[0], -1)));
        channel.runPendingTasks();
        java.util.List<Long> ids = new java.util.ArrayList<>();
        long read = 0;
        for (io.netty.buffer.ByteBuf answer; (answer = channel.readOutbound()) != null; ) {
            java.nio.ByteBuffer frame = answer.nioBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN);
            int base = TcpFrameDescriptor.LENGTH_FIELD_LENGTH;
            ids.add(frame.getLong(base + TcpFrameDescriptor.RESPONSE_ID_OFFSET));
            if (frame.getLong(base + TcpFrameDescriptor.RESPONSE_ID_OFFSET) == 2) {
                read = frame.getLong(base + TcpFrameDescriptor.RESPONSE_HEADER_LENGTH);
            }
            answer.release();
        }
        org.junit.jupiter.api.Assertions.assertEquals(java.util.List.of(1L, 2L), ids, "both requests answered, in order");
        org.junit.jupiter.api.Assertions.assertEquals(0x5eed, read);
        channel.finishAndReleaseAll();
    }

    /** One input for the region server's frames or, one time in eight, for the book of RDMA key grants. */
    @FuzzTest(maxDuration = "10s")
    void frames(FuzzedDataProvider data) {
        if (data.consumeInt(0, 7) == 0) {
            dev.dex.rdma.disni.GrantMessagesFuzzing.fuzzOne(data);
            return;
        }
        EmbeddedChannel channel = new EmbeddedChannel();
        SERVER.initConnection(channel, REGION, CHUNK, SETTINGS, null);
        try {
            if (data.consumeBoolean()) {
                channel.writeInbound(Unpooled.wrappedBuffer(RawClient.request(TcpFrameDescriptor.OP_HELLO, 0, 0, GlobalAddress.of(0, 0),
                        data.consumeLong(0, 3), 0, new byte[0], -1)));
            }
            int frames = data.consumeInt(1, 8);
            for (int i = 0; i < frames && channel.isActive(); i++) {
                byte[] frame;
                if (data.consumeInt(0, 9) == 0) {
                    frame = data.consumeBytes(data.consumeInt(0, 64));
                } else {
                    int op = data.consumeInt(0, 9);
                    int count = data.consumeInt(-8, 2 * SETTINGS.maxTransfer());
                    long offset = data.consumeBoolean() ? data.consumeLong(0, LENGTH + 64) : data.consumeLong();
                    long address = data.consumeBoolean() ? GlobalAddress.of(0, offset & GlobalAddress.OFFSET_MASK) : offset;
                    byte[] payload = data.consumeBytes(data.consumeInt(0, 256));
                    int declared = data.consumeInt(0, 15) == 0 ? data.consumeInt() : -1;
                    frame = RawClient.request(op, count, i, address, data.consumeLong(), data.consumeLong(), payload, declared);
                }
                channel.writeInbound(Unpooled.wrappedBuffer(frame));
                channel.runPendingTasks();
            }
        } finally {
            channel.finishAndReleaseAll();
        }
    }
}
