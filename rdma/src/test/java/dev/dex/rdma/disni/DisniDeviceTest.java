package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Map;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.RemoteMemoryContractTest;
import dev.dex.rdma.local.LocalFabric;

/**
 * The fabric contract on a real RDMA device (a NIC, or Soft-RoCE): {@link DisniFabric} with DiSNI, libdisni and
 * the kernel's verbs, the {@code local} fabric as control fabric. Where {@link RdmaDevices#available()} is false
 * every test is skipped with {@link RdmaDevices#reason()}.
 *
 * <p>It listens on the address in the system property {@code dex.disni.test.host} (default {@code 127.0.0.1}),
 * which must belong to an RDMA interface. Transfers are limited to 4 KiB so that the contract's longer reads and
 * writes are split. RDMA has no injected latency; the contract's latency test runs through
 * {@link RecordingFabric#delayed}. See docs/rdma-disni.md for the command line.
 */
class DisniDeviceTest extends RemoteMemoryContractTest {
    private static final DisniSettings SETTINGS = DisniSettings.DEFAULTS
            .withHost(System.getProperty("dex.disni.test.host", "127.0.0.1"))
            .withMaxTransfer(DisniSettings.MIN_MAX_TRANSFER);

    @org.junit.jupiter.api.BeforeAll
    static void sayWhySkipped() {
        if (!RdmaDevices.available()) {
            // Surefire keeps assumption messages in its reports only; the build log should say it too.
            System.out.println("DisniDeviceTest: every test skipped: " + RdmaDevices.reason());
        }
    }

    @BeforeEach
    void needsAnRdmaDevice() {
        assumeTrue(RdmaDevices.available(), RdmaDevices.reason());
    }

    /**
     * The device posts a batch's work requests together, but the latency of this test is added per verb by a
     * forwarding layer ({@link RecordingFabric#delayed}), which runs a batch one verb at a time.
     */
    @Override
    protected boolean pipelinesBatches() {
        return false;
    }

    @Override
    protected Fabric newFabric(long latencyNs) {
        Fabric fabric = new DisniFabric(new LocalFabric(latencyNs), SETTINGS);
        return latencyNs == 0 ? fabric : RecordingFabric.delayed(fabric, latencyNs);
    }

    @Test
    void clientConnectsThroughTheAdvertisedEndpoint() {
        Fabric fabric = fabric();
        ExportedRegion exported = export(fabric, 0);
        RdmaRegionDescriptor descriptor = RdmaRegionDescriptor.parse(exported.endpoint());
        RemoteMemory memory = closeAfterTest(fabric.connect(Map.of(0, exported.endpoint())));
        byte[] bytes = pattern(3 * DisniSettings.MIN_MAX_TRANSFER + 100, 5);

        memory.write(GlobalAddress.of(0, CHUNK_LENGTH - 50), new UnsafeBuffer(bytes), 0, bytes.length);

        assertTrue(descriptor.rdmaPort() > 0, exported.endpoint());
        assertEquals(exported.region().segment(0).addressOffset(), descriptor.segments().get(0).address(),
                "the registration advertises the segment's own virtual address");
        byte[] seenByServer = new byte[bytes.length];
        exported.region().getBytes(CHUNK_LENGTH - 50, new UnsafeBuffer(seenByServer), 0, bytes.length);
        assertArrayEquals(bytes, seenByServer);
        assertArrayEquals(bytes, readBytes(memory, 0, CHUNK_LENGTH - 50, bytes.length));
    }
}
