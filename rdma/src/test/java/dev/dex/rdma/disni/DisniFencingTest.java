package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;

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
 * Fencing on the {@code disni} fabric, with its production control fabric ({@code tcp} on loopback) and an
 * {@link InJvmRdmaTransport} standing for the network: each client reaches the region with RDMA keys of its own,
 * granted over its greeted control connection, and a fence revokes exactly those keys, so nothing a fenced
 * client READs or WRITEs reaches the region any more, while other clients keep being served.
 */
class DisniFencingTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final int SERVER = 3;
    private static final long OLD_OWNER = 0xA11CEL;
    private static final long NEW_OWNER = 0xB0BL;
    private static final long WORD = GlobalAddress.of(SERVER, CHUNK);

    @AutoClose
    private final TestResources resources = new TestResources();
    private final DeviceModel model = new DeviceModel();
    private final InJvmRdmaTransport network = model.network();
    private final DisniFabric memorySide = resources.closeAfter(model.fabric());
    private final ExportedRegion region = resources.closeAfter(memorySide.export(SERVER, 16L * CHUNK, CHUNK));
    private final DisniFabric computeSide = resources.closeAfter(model.fabric());
    private final Map<Integer, String> endpoints = Map.of(SERVER, region.endpoint());

    private static UnsafeBuffer word(long value) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        buffer.putLong(0, value);
        return buffer;
    }

    private static long read(RemoteMemory memory) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        memory.read(WORD, buffer, 0, Long.BYTES);
        return buffer.getLong(0);
    }

    @Test
    void everyClientHasKeysOfItsOwnAndTheEndpointNamesNone() {
        RemoteMemory old = resources.closeAfter(computeSide.connect(endpoints, OLD_OWNER));
        RemoteMemory fresh = resources.closeAfter(computeSide.connect(endpoints, NEW_OWNER));
        network.record();

        old.write(WORD, word(1), 0, Long.BYTES);
        fresh.write(WORD, word(2), 0, Long.BYTES);

        assertEquals(2, network.recorded().size());
        assertTrue(network.recorded().get(0).rkey() != network.recorded().get(1).rkey(), "two clients, two keys: " + network.recorded());
        assertEquals(2, network.registrations(), "one segment registered per client");
        assertEquals(OLD_OWNER, old.clientId());
        assertTrue(RdmaRegionDescriptor.parse(region.endpoint()).segments().stream().allMatch(segment -> segment.rkey() == 0));
    }

    @Test
    void aFencedClientsReadsAndWritesFailAsFencedAndNoneReachesTheRegion() {
        RemoteMemory old = resources.closeAfter(computeSide.connect(endpoints, OLD_OWNER));
        RemoteMemory fresh = resources.closeAfter(computeSide.connect(endpoints, NEW_OWNER));
        old.write(WORD, word(1), 0, Long.BYTES);

        assertTrue(assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memorySide.fence(SERVER, OLD_OWNER)));

        FencedException write = assertThrows(FencedException.class, () -> old.write(WORD, word(66), 0, Long.BYTES));
        assertTrue(write.getMessage().contains("RDMA keys are revoked"), write.getMessage());
        assertThrows(FencedException.class, () -> read(old));
        assertEquals(1, region.region().getLongVolatile(CHUNK), "the fenced client's write did not land");
        fresh.write(WORD, word(2), 0, Long.BYTES);
        assertEquals(2, read(fresh), "other clients keep being served");
        assertEquals(1, network.registrations(), "only the fenced client's key is gone");
        assertThrows(FencedException.class, () -> computeSide.connect(endpoints, OLD_OWNER), "a fenced client gets no new keys");
    }

    @Test
    void aFencedClientsBatchFailsAsFencedVerbByVerbAndNothingReachesTheRegion() {
        RemoteMemory old = resources.closeAfter(computeSide.connect(endpoints, OLD_OWNER));
        old.write(WORD, word(1), 0, Long.BYTES);
        assertTrue(assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memorySide.fence(SERVER, OLD_OWNER)));

        dev.dex.rdma.VerbBatch batch = new dev.dex.rdma.VerbBatch();
        int write = batch.write(WORD, word(66), 0, Long.BYTES);
        int read = batch.read(WORD, new UnsafeBuffer(new byte[Long.BYTES]), 0, Long.BYTES);
        old.submit(batch);

        assertTrue(batch.failure(write) instanceof FencedException, String.valueOf(batch.failure(write)));
        assertTrue(batch.failure(read) instanceof FencedException, String.valueOf(batch.failure(read)));
        assertEquals(1, region.region().getLongVolatile(CHUNK), "the fenced client's batched write did not land");
    }

    /**
     * On a device only the first request on a fenced connection fails with the access error; the others are flushed.
     * Every verb of the batch says fenced, even one whose flushed piece comes before the access error.
     */
    @Test
    void aBatchSaysFencedWhenAFlushedRequestComesBeforeTheAccessError() {
        RemoteMemory old = resources.closeAfter(computeSide.connect(endpoints, OLD_OWNER));
        old.write(WORD, word(1), 0, Long.BYTES);
        assertTrue(assertTimeoutPreemptively(Duration.ofSeconds(10), () -> memorySide.fence(SERVER, OLD_OWNER)));
        network.failNextWorkRequest(new FabricException("RDMA WRITE on memory server " + SERVER + " completed with IBV_WC_WR_FLUSH_ERR (5)"));

        dev.dex.rdma.VerbBatch batch = new dev.dex.rdma.VerbBatch();
        int flushed = batch.write(WORD, word(66), 0, Long.BYTES);
        int denied = batch.write(WORD + Long.BYTES, word(67), 0, Long.BYTES);
        old.submit(batch);

        assertTrue(batch.failure(flushed) instanceof FencedException, String.valueOf(batch.failure(flushed)));
        assertTrue(batch.failure(denied) instanceof FencedException, String.valueOf(batch.failure(denied)));
    }

    @Test
    void aNewOwnersFenceThroughItsOwnConnectionRevokesTheOldOwnersKeys() {
        RemoteMemory old = resources.closeAfter(computeSide.connect(endpoints, OLD_OWNER));
        RemoteMemory fresh = resources.closeAfter(computeSide.connect(endpoints, NEW_OWNER));
        old.write(WORD, word(1), 0, Long.BYTES);

        assertTrue(assertTimeoutPreemptively(Duration.ofSeconds(10), () -> fresh.fence(OLD_OWNER)));

        assertThrows(FencedException.class, () -> old.write(WORD, word(66), 0, Long.BYTES));
        assertEquals(1, region.region().getLongVolatile(CHUNK));
        assertEquals(1, read(fresh));
        assertEquals(1, network.registrations());
    }

    @Test
    void aFenceWhoseKeysCannotBeRevokedFailsRatherThanReportAFence() {
        RemoteMemory old = resources.closeAfter(computeSide.connect(endpoints, OLD_OWNER));
        RemoteMemory fresh = resources.closeAfter(computeSide.connect(endpoints, NEW_OWNER));
        network.failNextDeregistration(new FabricException("the device did not deregister the segment"));

        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> fresh.fence(OLD_OWNER));

        assertTrue(refused.getMessage().contains("is not fenced for sure"), refused.getMessage());
        network.failNextDeregistration(new FabricException("the device did not deregister the segment"));
        assertThrows(RuntimeException.class, () -> memorySide.fence(SERVER, OLD_OWNER));
        assertEquals(2, network.registrations(), "the old owner's key is still registered, and still in the book");

        assertTrue(memorySide.fence(SERVER, OLD_OWNER), "the next fence revokes what the failed ones could not");

        assertThrows(FencedException.class, () -> old.write(WORD, word(66), 0, Long.BYTES));
        assertEquals(0, region.region().getLongVolatile(CHUNK));
        assertEquals(1, network.registrations());
    }

    @Test
    void closingAClientGivesItsKeysBack() {
        RemoteMemory remote = computeSide.connect(endpoints, OLD_OWNER);
        RemoteMemory anonymous = computeSide.connect(endpoints);
        RemoteMemory sameProcess = memorySide.connect(SERVER);
        assertEquals(3, network.registrations());

        remote.close();
        anonymous.close();
        sameProcess.close();

        assertEquals(0, network.registrations());
    }
}
