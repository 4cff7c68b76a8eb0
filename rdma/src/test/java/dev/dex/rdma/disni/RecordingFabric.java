package dev.dex.rdma.disni;

import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;

/**
 * A fabric decorator for tests. As a disni fabric's control fabric ({@link #control}) it advertises
 * {@code control-<id>} endpoints, insists on them in {@link #connect(Map)}, and counts what reaches its clients
 * and what it closes. Around a whole fabric ({@link #delayed}) it spins a fixed latency before every verb,
 * which RDMA itself has no knob for.
 */
final class RecordingFabric implements Fabric {
    final AtomicInteger reads = new AtomicInteger();
    final AtomicInteger writes = new AtomicInteger();
    final AtomicInteger compareAndSwaps = new AtomicInteger();
    final AtomicInteger fetchAndAdds = new AtomicInteger();
    final AtomicInteger clientsOpened = new AtomicInteger();
    final AtomicInteger clientsClosed = new AtomicInteger();
    volatile boolean closed;
    volatile Map<Integer, String> lastEndpoints;

    private final Fabric delegate;
    private final boolean controlEndpoints;
    private final long latencyNs;

    private RecordingFabric(Fabric delegate, boolean controlEndpoints, long latencyNs) {
        this.delegate = delegate;
        this.controlEndpoints = controlEndpoints;
        this.latencyNs = latencyNs;
    }

    static RecordingFabric control(Fabric delegate) {
        return new RecordingFabric(delegate, true, 0);
    }

    static RecordingFabric delayed(Fabric delegate, long latencyNs) {
        return new RecordingFabric(delegate, false, latencyNs);
    }

    static String endpointOf(int serverId) {
        return "control-" + serverId;
    }

    @Override
    public String transport() {
        return delegate.transport();
    }

    @Override
    public ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        ExportedRegion exported = delegate.export(serverId, regionLength, chunkLength);
        if (!controlEndpoints) {
            return exported;
        }
        return new ExportedRegion() {
            @Override
            public int serverId() {
                return exported.serverId();
            }

            @Override
            public Region region() {
                return exported.region();
            }

            @Override
            public String endpoint() {
                return endpointOf(serverId);
            }

            @Override
            public void close() {
                exported.close();
            }
        };
    }

    @Override
    public RemoteMemory connect(int... serverIds) {
        return wrap(delegate.connect(serverIds));
    }

    @Override
    public RemoteMemory connect(Map<Integer, String> endpoints) {
        lastEndpoints = Map.copyOf(endpoints);
        if (controlEndpoints) {
            endpoints.forEach((id, endpoint) -> {
                if (!endpoint.equals(endpointOf(id))) {
                    throw new IllegalArgumentException("control endpoint of memory server " + id + " is '" + endpoint + "'");
                }
            });
        }
        return wrap(delegate.connect(endpoints));
    }

    @Override
    public void close() {
        closed = true;
        delegate.close();
    }

    private RemoteMemory wrap(RemoteMemory memory) {
        clientsOpened.incrementAndGet();
        return new ForwardingRemoteMemory(memory) {
            @Override
            public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
                delay();
                reads.incrementAndGet();
                super.read(address, dst, dstOffset, length);
            }

            @Override
            public void write(long address, DirectBuffer src, int srcOffset, int length) {
                delay();
                writes.incrementAndGet();
                super.write(address, src, srcOffset, length);
            }

            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                delay();
                compareAndSwaps.incrementAndGet();
                return super.compareAndSwap(address, expected, desired);
            }

            @Override
            public long fetchAndAdd(long address, long delta) {
                delay();
                fetchAndAdds.incrementAndGet();
                return super.fetchAndAdd(address, delta);
            }

            @Override
            public void close() {
                clientsClosed.incrementAndGet();
                super.close();
            }
        };
    }

    private void delay() {
        dev.dex.rdma.VerbChecks.spin(latencyNs);
    }
}
