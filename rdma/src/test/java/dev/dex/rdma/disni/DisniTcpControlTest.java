package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.RemoteMemoryContractTest;
import dev.dex.rdma.VerbSnapshot;
import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.tcp.TcpSettings;

/**
 * The {@code disni} fabric with the production control fabric, {@code tcp} on loopback: the contract, and a
 * compute-side fabric object that reaches a memory-side one only through the endpoint text, as a compute node
 * does with a memory node's description. The RDMA device is one {@link InJvmRdmaTransport} shared by both sides,
 * standing for the network.
 */
class DisniTcpControlTest extends RemoteMemoryContractTest {
    private static final DisniSettings SETTINGS = DisniSettings.DEFAULTS;

    @Override
    protected Fabric newFabric(long latencyNs) {
        return new DisniFabric(new TcpFabric(TcpSettings.DEFAULTS, latencyNs), SETTINGS,
                new InJvmRdmaTransport(SETTINGS.maxTransfer(), latencyNs));
    }

    @Test
    void computeSideReachesAMemorySideFabricThroughItsEndpointAlone() {
        InJvmRdmaTransport network = new InJvmRdmaTransport(SETTINGS.maxTransfer(), 0);
        Fabric memorySide = closeAfterTest(new DisniFabric(new TcpFabric(TcpSettings.DEFAULTS, 0), SETTINGS, network));
        ExportedRegion exported = export(memorySide, 3);
        Fabric computeSide = closeAfterTest(new DisniFabric(new TcpFabric(TcpSettings.DEFAULTS, 0), SETTINGS, network));
        String controlEndpoint = RdmaRegionDescriptor.parse(exported.endpoint()).controlEndpoint();
        network.record();

        RemoteMemory memory = closeAfterTest(computeSide.connect(Map.of(3, exported.endpoint())));
        writeLong(memory, GlobalAddress.of(3, CHUNK_LENGTH), 4242);
        long chunk = memory.chunkAllocator().allocateChunk(3);
        long found = memory.compareAndSwap(GlobalAddress.of(3, CHUNK_LENGTH), 4242, 4343);

        assertTrue(controlEndpoint.startsWith("127.0.0.1:"), "the tcp fabric's endpoint rides along: " + controlEndpoint);
        assertEquals(4242, found);
        assertEquals(4343, exported.region().getLongVolatile(CHUNK_LENGTH), "the swap reached the region over tcp");
        assertEquals(GlobalAddress.of(3, CHUNK_LENGTH), chunk);
        assertEquals(2, exported.region().getLongVolatile(RegionHeaderDescriptor.NEXT_CHUNK_OFFSET));
        assertEquals(1, network.recorded().size(), "only the write went over RDMA");
        assertEquals(new VerbSnapshot(0, 1, 2, 0, 8 + 2 * 8), memory.counters().snapshot());
    }
}
