package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemoryContractTest;
import dev.dex.rdma.local.LocalFabric;

/**
 * The fabric contract for the {@code disni} transport without a device: {@link DisniFabric} and
 * {@link DisniRemoteMemory} as in production, the RDMA device replaced by {@link InJvmRdmaTransport}, and the
 * {@code local} fabric as the control fabric. Regions have one segment; see
 * {@link DisniSegmentedRemoteMemoryTest} for many.
 */
class DisniRemoteMemoryTest extends RemoteMemoryContractTest {
    private static final DisniSettings SETTINGS = DisniSettings.DEFAULTS;

    @Override
    protected Fabric newFabric(long latencyNs) {
        return new DisniFabric(new LocalFabric(latencyNs), SETTINGS, new InJvmRdmaTransport(SETTINGS.maxTransfer(), latencyNs));
    }

    @Test
    void transportIsNamedDisni() {
        assertEquals("disni", fabric().transport());
    }
}
