package dev.dex.rdma.disni;

import java.nio.ByteOrder;

import org.agrona.concurrent.UnsafeBuffer;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;

import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.local.LocalFabric;

/**
 * One fuzz input for a memory node's book of RDMA key grants ({@link RdmaGrants}): a GRANT or RELEASE message of
 * arbitrary bytes (mostly with the right magic and kind) from one of a few clients, sometimes a fence of one of
 * them, against the in-process device model. A malformed or refused request must end in
 * {@link IllegalArgumentException} (the sender gets why), nothing else. Run by the rdma module's fuzz test
 * ({@code TcpFrameFuzzTest}: Jazzer fuzzes one test per JVM).
 */
public final class GrantMessagesFuzzing {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final InJvmRdmaTransport DEVICE = new InJvmRdmaTransport(DisniSettings.DEFAULTS.maxTransfer(), 0);
    private static final RdmaGrants GRANTS = new RdmaGrants(0,
            DEVICE.register(new LocalFabric(0, 12).export(0, 4L * CHUNK, CHUNK).region()));
    private static final UnsafeBuffer REPLY = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);

    private GrantMessagesFuzzing() {
    }

    public static void fuzzOne(FuzzedDataProvider data) {
        long client = data.consumeLong(1, 4);
        if (data.consumeInt(0, 31) == 0) {
            GRANTS.fence(client);
            return;
        }
        boolean framed = data.consumeBoolean();
        byte kind = data.consumeBoolean() ? RdmaGrants.GRANT : RdmaGrants.RELEASE;
        byte[] bytes = data.consumeRemainingAsBytes();
        if (framed && bytes.length >= 5) {
            new UnsafeBuffer(bytes).putInt(0, RdmaGrants.MAGIC, ByteOrder.LITTLE_ENDIAN);
            bytes[4] = kind;
        }
        try {
            GRANTS.handle(client, new UnsafeBuffer(bytes), 0, bytes.length, REPLY);
        } catch (IllegalArgumentException refused) {
            // malformed, or refused by the book (fenced client, the book full): the sender is told why
        }
    }
}
