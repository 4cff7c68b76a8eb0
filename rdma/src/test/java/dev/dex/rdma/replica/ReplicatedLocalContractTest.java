package dev.dex.rdma.replica;

import dev.dex.rdma.Fabric;
import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemoryContractTest;
import dev.dex.rdma.local.LocalFabric;

/**
 * The whole transport contract, against a {@code local} fabric whose servers are each held by two replicas: the
 * compute-side write path ({@link ReplicatedRemoteMemory}) keeps every promise of a single region.
 */
class ReplicatedLocalContractTest extends RemoteMemoryContractTest {
    @Override
    protected Fabric newFabric(long latencyNs) {
        return new LocalFabric(latencyNs, Region.DEFAULT_SEGMENT_SHIFT, 2);
    }
}
