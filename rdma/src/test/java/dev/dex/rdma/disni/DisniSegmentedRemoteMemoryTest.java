package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.RemoteMemoryContractTest;
import dev.dex.rdma.VerbSnapshot;

/**
 * The fabric contract for the {@code disni} transport over regions of many 8 KiB segments, with the smallest
 * transfer size (4 KiB), so that most multi-chunk transfers of the contract are split at segment boundaries and
 * at the transfer size; plus checks of how they are split.
 */
class DisniSegmentedRemoteMemoryTest extends RemoteMemoryContractTest {
    private static final int SEGMENT_SHIFT = 13;
    private static final int SEGMENT_LENGTH = 1 << SEGMENT_SHIFT;
    private static final DisniSettings SETTINGS = DisniSettings.DEFAULTS.withMaxTransfer(DisniSettings.MIN_MAX_TRANSFER);

    private InJvmRdmaTransport transport;

    @Override
    protected Fabric newFabric(long latencyNs) {
        transport = new InJvmRdmaTransport(SETTINGS.maxTransfer(), latencyNs);
        return new DisniFabric(new dev.dex.rdma.local.LocalFabric(latencyNs, SEGMENT_SHIFT), SETTINGS, transport);
    }

    @Test
    void transferAcrossSegmentsAndLongerThanOneTransferIsSplitAtBothWithEachSegmentsAddressAndRkey() {
        Fabric fabric = fabric();
        ExportedRegion exported = export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        RdmaRegionDescriptor descriptor = RdmaRegionDescriptor.parse(exported.endpoint());
        long start = SEGMENT_LENGTH - 50;
        int length = 3 * SETTINGS.maxTransfer() + 100;
        byte[] bytes = pattern(length, 21);
        transport.record();

        memory.write(GlobalAddress.of(0, start), new UnsafeBuffer(bytes), 0, length);

        List<InJvmRdmaTransport.WorkRequest> expected = new ArrayList<>();
        int[][] segmentOffsetLength = {
            {0, SEGMENT_LENGTH - 50, 50},
            {1, 0, 4096},
            {1, 4096, 4096},
            {2, 0, 4096},
            {2, 4096, 50},
        };
        List<InJvmRdmaTransport.WorkRequest> recorded = transport.recorded();
        assertEquals(segmentOffsetLength.length, recorded.size());
        for (int i = 0; i < segmentOffsetLength.length; i++) {
            int[] piece = segmentOffsetLength[i];
            RdmaRegionDescriptor.RemoteSegment segment = descriptor.segments().get(piece[0]);
            // The rkey is this client's own, granted at connect: the one every piece of that segment uses.
            int rkey = recorded.get(piece[0] == 0 ? 0 : piece[0] == 1 ? 1 : 3).rkey();
            expected.add(new InJvmRdmaTransport.WorkRequest(0, false, segment.address() + piece[1], rkey, piece[2]));
        }
        assertEquals(expected, recorded);
        assertEquals(3, recorded.stream().mapToInt(InJvmRdmaTransport.WorkRequest::rkey).distinct().count(),
                "each segment has a key of its own");
        assertEquals(new VerbSnapshot(0, 1, 0, 0, length), memory.counters().snapshot(), "one write, however many work requests");

        transport.record();
        assertArrayEquals(bytes, readBytes(memory, 0, start, length));
        assertEquals(expected.size(), transport.recorded().size(), "the read is split like the write");
        byte[] seenByServer = new byte[length];
        exported.region().getBytes(start, new UnsafeBuffer(seenByServer), 0, length);
        assertArrayEquals(bytes, seenByServer);
    }

    /**
     * A batch's reads and writes are split as single verbs are and posted together: the device sees the same work
     * requests as for the verbs one by one, in one {@code postAll}; a failed work request fails its own verb only, and
     * the batch's atomic runs on the control connection.
     */
    @Test
    void aBatchIsSplitAsSingleVerbsArePostedTogetherAndFailsPerVerb() {
        Fabric fabric = fabric();
        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);
        long start = SEGMENT_LENGTH - 50;
        int length = 3 * SETTINGS.maxTransfer() + 100;
        byte[] bytes = pattern(length, 7);
        transport.record();
        memory.write(GlobalAddress.of(0, start), new UnsafeBuffer(bytes), 0, length);
        List<InJvmRdmaTransport.WorkRequest> single = transport.recorded();

        transport.record();
        int posted = transport.postedTogether();
        dev.dex.rdma.VerbBatch batch = new dev.dex.rdma.VerbBatch();
        UnsafeBuffer back = new UnsafeBuffer(new byte[length]);
        long far = 6L * SEGMENT_LENGTH;
        batch.write(GlobalAddress.of(0, far), new UnsafeBuffer(bytes), 0, 1000);
        int read = batch.read(GlobalAddress.of(0, start), back, 0, length);
        int add = batch.fetchAndAdd(GlobalAddress.of(0, 5L * SEGMENT_LENGTH), 5);
        memory.submit(batch);
        List<InJvmRdmaTransport.WorkRequest> batched = transport.recorded();

        batch.throwIfFailed();
        assertEquals(posted + 1, transport.postedTogether(), "the reads and writes were posted together, once");
        assertArrayEquals(bytes, back.byteArray());
        assertEquals(0, batch.value(add));
        assertEquals(5, memory.readLong(GlobalAddress.of(0, 5L * SEGMENT_LENGTH)), "the atomic ran");
        assertEquals(1 + single.size(), batched.size(), "one work request for the write, the read's pieces as the single write's: " + batched);
        for (int i = 0; i < single.size(); i++) {
            InJvmRdmaTransport.WorkRequest piece = single.get(i);
            assertEquals(new InJvmRdmaTransport.WorkRequest(0, true, piece.remoteAddress(), piece.rkey(), piece.length()), batched.get(1 + i));
        }

        batch.clear();
        int failing = batch.read(GlobalAddress.of(0, start), back, 0, length);
        int write = batch.write(GlobalAddress.of(0, far), new UnsafeBuffer(new byte[8]), 0, 8);
        int outside = batch.read(GlobalAddress.of(0, REGION_LENGTH - 4), back, 0, 8);
        transport.failNextWorkRequest(new dev.dex.rdma.FabricException("RDMA READ completed with IBV_WC_RETRY_EXC_ERR (12)"));
        memory.submit(batch);

        assertTrue(batch.failure(failing) instanceof dev.dex.rdma.FabricException, "the read whose first piece failed failed");
        assertEquals(null, batch.failure(write), "the write of the same batch completed");
        assertTrue(batch.failure(outside) instanceof IllegalArgumentException, "a range outside the region fails before any post");
    }

    @Test
    void segmentAddressesAndLengthsInTheEndpointAreTheRegionsOwn() {
        Fabric fabric = fabric();
        ExportedRegion exported = export(fabric, 4);

        RdmaRegionDescriptor descriptor = RdmaRegionDescriptor.parse(exported.endpoint());

        Region region = exported.region();
        assertEquals(SEGMENT_SHIFT, descriptor.segmentShift());
        assertEquals(REGION_LENGTH / SEGMENT_LENGTH, region.segmentCount());
        assertEquals(region.segmentCount(), descriptor.segments().size());
        for (int i = 0; i < region.segmentCount(); i++) {
            assertEquals(region.segment(i).addressOffset(), descriptor.segments().get(i).address(), "address of segment " + i);
            assertEquals(region.segment(i).capacity(), descriptor.segments().get(i).length(), "length of segment " + i);
        }
        assertTrue(descriptor.segments().stream().allMatch(segment -> segment.rkey() == 0), "the endpoint names no key");
        assertEquals(REGION_LENGTH, descriptor.regionLength());
    }
}
