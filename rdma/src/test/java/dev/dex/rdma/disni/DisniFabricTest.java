package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.util.Map;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbSnapshot;
import dev.dex.rdma.local.LocalFabric;

/**
 * What the {@code disni} fabric adds to the contract: the endpoint it advertises, the split between RDMA and
 * the control fabric, and what it opens and closes. The device is {@link InJvmRdmaTransport}; the control
 * fabric is a {@link RecordingFabric} over the {@code local} fabric.
 */
class DisniFabricTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long REGION = 16L * CHUNK;

    private RecordingFabric control;
    private InJvmRdmaTransport transport;
    private DisniFabric fabric;

    @BeforeEach
    void open() {
        control = RecordingFabric.control(new LocalFabric());
        transport = new InJvmRdmaTransport(DisniSettings.DEFAULTS.maxTransfer(), 0);
        fabric = new DisniFabric(control, DisniSettings.DEFAULTS, transport);
    }

    @AfterEach
    void close() {
        fabric.close();
    }

    @Test
    void endpointNamesTheServerTheRdmaAddressEverySegmentAndTheControlEndpoint() {
        ExportedRegion exported = fabric.export(2, REGION, CHUNK);

        RdmaRegionDescriptor descriptor = RdmaRegionDescriptor.parse(exported.endpoint());

        assertEquals(2, descriptor.serverId());
        assertEquals(InJvmRdmaTransport.HOST, descriptor.rdmaHost());
        assertEquals(InJvmRdmaTransport.PORT, descriptor.rdmaPort());
        assertEquals(exported.region().segmentShift(), descriptor.segmentShift());
        assertEquals(1, descriptor.segments().size());
        assertEquals(exported.region().segment(0).addressOffset(), descriptor.segments().get(0).address());
        assertEquals(REGION, descriptor.regionLength());
        assertEquals(RecordingFabric.endpointOf(2), descriptor.controlEndpoint());
        assertEquals(2, exported.serverId());
        assertEquals(0, transport.registrations(), "nothing is registered before a client is granted keys");
        assertTrue(descriptor.segments().stream().allMatch(segment -> segment.rkey() == 0), "the endpoint names no key");
    }

    @Test
    void connectByEndpointsConnectsTheControlFabricToTheControlEndpoints() {
        ExportedRegion server0 = fabric.export(0, REGION, CHUNK);
        ExportedRegion server1 = fabric.export(1, REGION, CHUNK);

        RemoteMemory memory = fabric.connect(Map.of(1, server1.endpoint(), 0, server0.endpoint()));

        assertEquals(Map.of(0, RecordingFabric.endpointOf(0), 1, RecordingFabric.endpointOf(1)), control.lastEndpoints);
        assertArrayEquals(new int[] {0, 1}, memory.memoryServerIds());
        writeLong(memory, GlobalAddress.of(1, CHUNK), 99);
        assertEquals(99, server1.region().getLongVolatile(CHUNK));
        assertEquals(0, server0.region().getLongVolatile(CHUNK));
        assertEquals(1, memory.compareAndSwap(GlobalAddress.of(1, RegionHeaderDescriptor.NEXT_CHUNK_OFFSET), 1, 5));
        assertEquals(5, server1.region().getLongVolatile(RegionHeaderDescriptor.NEXT_CHUNK_OFFSET));
    }

    @Test
    void atomicsTakeTheControlPathReadsAndWritesTheRdmaPathAndEachVerbCountsOnce() {
        fabric.export(0, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(0);
        long word = GlobalAddress.of(0, CHUNK);
        transport.record();

        writeLong(memory, word, 7);
        assertEquals(7, readLong(memory, word));
        assertEquals(7, memory.compareAndSwap(word, 7, 8));
        assertEquals(8, memory.fetchAndAdd(word, 2));
        assertEquals(GlobalAddress.of(0, CHUNK), memory.chunkAllocator().allocateChunk(0));

        assertEquals(1, control.compareAndSwaps.get(), "compare-and-swap reached the control fabric once");
        assertEquals(2, control.fetchAndAdds.get(), "fetch-and-add and the chunk allocation reached the control fabric once each");
        assertEquals(0, control.reads.get(), "no read went over the control fabric");
        assertEquals(0, control.writes.get(), "no write went over the control fabric");
        assertEquals(2, transport.recorded().size(), "one RDMA WRITE and one RDMA READ");
        assertFalse(transport.recorded().get(0).read(), "first the write");
        assertTrue(transport.recorded().get(1).read(), "then the read");
        assertEquals(new VerbSnapshot(1, 1, 3, 0, 8 + 8 + 3 * 8), memory.counters().snapshot());
        assertEquals(10, readLong(memory, word));
    }

    @Test
    void closingAClientClosesItsRdmaConnectionAndItsControlClient() {
        fabric.export(0, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(0);
        assertEquals(1, transport.openConnections());

        memory.close();
        memory.close();

        assertEquals(0, transport.openConnections());
        assertEquals(1, control.clientsClosed.get());
    }

    @Test
    void closingTheFabricClosesItsClientsRegionsTransportAndControlFabric() {
        fabric.export(0, REGION, CHUNK);
        fabric.export(1, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(0, 1);

        fabric.close();

        assertThrows(IllegalStateException.class, () -> readLong(memory, GlobalAddress.of(0, CHUNK)));
        assertEquals(0, transport.openConnections());
        assertEquals(0, transport.registrations(), "every segment deregistered");
        assertTrue(transport.isClosed());
        assertTrue(control.closed);
        assertThrows(IllegalStateException.class, () -> fabric.export(2, REGION, CHUNK));
    }

    @Test
    void closingARegionCutsOffItsClientsAndFreesTheServerId() {
        ExportedRegion exported = fabric.export(0, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(0);
        writeLong(memory, GlobalAddress.of(0, CHUNK), 3);

        exported.close();

        assertThrows(FabricException.class, () -> readLong(memory, GlobalAddress.of(0, CHUNK)),
                "the rkey is deregistered, as when a memory node stops exporting");
        assertEquals(0, transport.registrations());
        ExportedRegion again = fabric.export(0, REGION, CHUNK);
        assertEquals(0, again.region().getLongVolatile(CHUNK));
    }

    @Test
    void failedRegistrationFailsTheConnectAndLeavesNothingOpen() {
        ExportedRegion exported = fabric.export(0, REGION, CHUNK);
        FabricException refused = new FabricException("the device refused the registration");
        transport.failNextRegistration(refused);

        assertSame(refused, assertThrows(FabricException.class, () -> fabric.connect(0)));

        assertEquals(0, transport.openConnections());
        assertEquals(control.clientsOpened.get(), control.clientsClosed.get(), "the control client is closed again");
        assertEquals(0, transport.registrations());
        exported.region().putLongVolatile(CHUNK, 77);
        assertEquals(77, readLong(fabric.connect(0), GlobalAddress.of(0, CHUNK)), "the next connect is granted keys");
        assertEquals(1, transport.registrations());
    }

    @Test
    void failedListenerFailsTheExportAndReleasesTheControlRegion() {
        FabricException refused = new FabricException("the device refused the listener");
        transport.failNextListen(refused);

        assertSame(refused, assertThrows(FabricException.class, () -> fabric.export(0, REGION, CHUNK)));

        assertThrows(IllegalArgumentException.class, () -> fabric.connect(0), "nothing exported");
        ExportedRegion exported = fabric.export(0, REGION, CHUNK);
        assertEquals(0, exported.serverId(), "the control fabric let the server id go");
    }

    @Test
    void unreachableServerFailsTheConnectAndLeavesNothingOpen() {
        ExportedRegion exported = fabric.export(0, REGION, CHUNK);
        RdmaRegionDescriptor advertised = RdmaRegionDescriptor.parse(exported.endpoint());
        String elsewhere = new RdmaRegionDescriptor(0, advertised.rdmaHost(), advertised.rdmaPort() + 1, advertised.segmentShift(),
                advertised.segments(), advertised.controlEndpoint()).encode();

        IllegalArgumentException failure = assertThrows(IllegalArgumentException.class, () -> fabric.connect(Map.of(0, elsewhere)));

        assertTrue(failure.getMessage().contains("cannot reach memory server 0"), failure.getMessage());
        assertEquals(1, control.clientsOpened.get());
        assertEquals(1, control.clientsClosed.get(), "the control client opened for the connect is closed again");
        assertEquals(0, transport.openConnections());
    }

    @Test
    void malformedEndpointIsRejectedNamingTheServerBeforeAnythingOpens() {
        IllegalArgumentException failure = assertThrows(IllegalArgumentException.class,
                () -> fabric.connect(Map.of(3, "10.0.0.5:7470")));

        assertTrue(failure.getMessage().contains("memory server 3"), failure.getMessage());
        assertTrue(failure.getMessage().contains("disni:2;"), failure.getMessage());
        assertEquals(0, control.clientsOpened.get());
    }

    @Test
    void endpointOfAnotherServerIsRejected() {
        ExportedRegion exported = fabric.export(0, REGION, CHUNK);

        IllegalArgumentException failure = assertThrows(IllegalArgumentException.class, () -> fabric.connect(Map.of(1, exported.endpoint())));

        assertTrue(failure.getMessage().contains("describes memory server 0"), failure.getMessage());
        assertThrows(IllegalArgumentException.class, () -> fabric.connect(Map.of()));
    }

    @Test
    void failedWorkRequestSurfacesAsFabricExceptionAndIsNotCounted() {
        fabric.export(0, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(0);
        FabricException lost = new FabricException("RDMA READ completed with IBV_WC_RETRY_EXC_ERR (12)");
        transport.failNextWorkRequest(lost);

        assertSame(lost, assertThrows(FabricException.class, () -> readLong(memory, GlobalAddress.of(0, CHUNK))));

        assertEquals(VerbSnapshot.ZERO, memory.counters().snapshot());
        assertEquals(0, readLong(memory, GlobalAddress.of(0, CHUNK)), "the next verb goes through");
    }

    @Test
    void writeFromATooShortBufferIsRejectedBeforeAnyByteMoves() {
        ExportedRegion exported = fabric.export(0, REGION, CHUNK);
        RemoteMemory memory = fabric.connect(0);
        transport.record();

        assertThrows(IndexOutOfBoundsException.class,
                () -> memory.write(GlobalAddress.of(0, CHUNK), new UnsafeBuffer(new byte[16]), 8, 16));

        assertTrue(transport.recorded().isEmpty());
        assertEquals(0, exported.region().getLongVolatile(CHUNK));
    }

    @Test
    void withoutRdmaThePublicConstructorFailsWithTheReason() {
        assumeFalse(RdmaDevices.available(), "this machine can run the disni fabric");
        LocalFabric local = new LocalFabric();

        IllegalStateException failure = assertThrows(IllegalStateException.class, () -> new DisniFabric(local, DisniSettings.DEFAULTS));

        assertTrue(failure.getMessage().endsWith(RdmaDevices.reason()), failure.getMessage());
        assertFalse(RdmaDevices.reason().isBlank());
        local.close();
    }

    private static void writeLong(RemoteMemory memory, long address, long value) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        buffer.putLong(0, value);
        memory.write(address, buffer, 0, Long.BYTES);
    }

    private static long readLong(RemoteMemory memory, long address) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[Long.BYTES]);
        memory.read(address, buffer, 0, Long.BYTES);
        return buffer.getLong(0);
    }
}
