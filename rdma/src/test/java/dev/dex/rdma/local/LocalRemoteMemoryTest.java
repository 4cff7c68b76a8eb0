package dev.dex.rdma.local;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemoryContractTest;

class LocalRemoteMemoryTest extends RemoteMemoryContractTest {

    @Override
    protected Fabric newFabric(long latencyNs) {
        return new LocalFabric(latencyNs);
    }

    @Test
    void transportIsNamedLocal() {
        assertEquals("local", fabric().transport());
    }
}
