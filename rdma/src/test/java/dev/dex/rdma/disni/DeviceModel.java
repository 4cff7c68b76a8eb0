package dev.dex.rdma.disni;

import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.tcp.TcpSettings;

/**
 * The RDMA device model ({@link InJvmRdmaTransport}) for tests of other modules: one network of this JVM, and
 * {@code disni} fabrics on it, each with a {@code tcp} control fabric of its own on loopback, as a host would have.
 * Everything but the device is the production code.
 */
public final class DeviceModel {
    private final InJvmRdmaTransport network = new InJvmRdmaTransport(DisniSettings.DEFAULTS.maxTransfer(), 0);

    /** The network itself, for the tests of this package that inject its faults. */
    InJvmRdmaTransport network() {
        return network;
    }

    /** A fabric of one more host on this network; the caller closes it. */
    public DisniFabric fabric() {
        return new DisniFabric(new TcpFabric(TcpSettings.DEFAULTS, 0), DisniSettings.DEFAULTS, network);
    }
}
