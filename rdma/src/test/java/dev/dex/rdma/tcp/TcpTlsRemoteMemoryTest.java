package dev.dex.rdma.tcp;

import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemoryContractTest;

/** The fabric contract over TCP with mutual TLS (both ends with certificates of one CA). */
class TcpTlsRemoteMemoryTest extends RemoteMemoryContractTest {

    @Override
    protected Fabric newFabric(long latencyNs) {
        return new TcpFabric(TcpSettings.DEFAULTS, latencyNs, null, TcpTlsTest.tls("a", "cluster"));
    }
}
