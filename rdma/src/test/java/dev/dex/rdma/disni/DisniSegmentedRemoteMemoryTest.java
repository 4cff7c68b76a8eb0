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

    /** disni runs a batch's verbs one after the other (RemoteMemory's default); posting them together is not built. */
    @Override
    protected boolean pipelinesBatches() {
        return false;
    }

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
