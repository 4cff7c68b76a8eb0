package dev.dex.rdma.local;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import dev.dex.rdma.DirectRemoteMemory;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionFormat;
import dev.dex.rdma.RemoteMemory;

/**
 * The {@code local} transport: regions are off-heap buffers of this JVM. Compute and memory sides are
 * objects in one process; an optional latency per verb (spun, in nanoseconds) emulates the round trip
 * of RDMA (about 2 µs).
 *
 * <p>Concurrency: the set of regions is a concurrent map; export, connect and close may race freely.
 */
public final class LocalFabric implements Fabric {
    private final long latencyNs;
    private final int segmentShift;
    private final Map<Integer, LocalRegion> regions = new ConcurrentHashMap<>();

    /** A fabric with no injected latency. */
    public LocalFabric() {
        this(0);
    }

    /** @param latencyNs latency spun before every verb, 0 for none */
    public LocalFabric(long latencyNs) {
        this(latencyNs, Region.DEFAULT_SEGMENT_SHIFT);
    }

    /**
     * @param latencyNs    latency spun before every verb, 0 for none
     * @param segmentShift regions in segments of {@code 2^segmentShift} bytes (1 GiB by default); small segments
     *                     let tests of transports that split transfers at segment boundaries cross many of them
     */
    public LocalFabric(long latencyNs, int segmentShift) {
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        if (segmentShift < 12 || segmentShift > Region.DEFAULT_SEGMENT_SHIFT) {
            throw new IllegalArgumentException("segment shift must be in [12, " + Region.DEFAULT_SEGMENT_SHIFT + "]: " + segmentShift);
        }
        this.latencyNs = latencyNs;
        this.segmentShift = segmentShift;
    }

    @Override
    public String transport() {
        return "local";
    }

    @Override
    public ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        if (Integer.numberOfTrailingZeros(chunkLength) > segmentShift) {
            throw new IllegalArgumentException("chunk length " + chunkLength + " exceeds this fabric's segments of "
                    + (1L << segmentShift) + " bytes");
        }
        Region region = Region.offHeap(regionLength, segmentShift);
        RegionFormat.format(region, chunkLength);
        LocalRegion exported = new LocalRegion(serverId, region);
        if (regions.putIfAbsent(serverId, exported) != null) {
            throw new IllegalArgumentException("memory server " + serverId + " already exported on this fabric");
        }
        return exported;
    }

    @Override
    public RemoteMemory connect(int... serverIds) {
        if (serverIds.length == 0) {
            throw new IllegalArgumentException("connect needs at least one memory server id");
        }
        int max = 0;
        for (int id : serverIds) {
            max = Math.max(max, id);
        }
        Region[] byId = new Region[max + 1];
        for (int id : serverIds) {
            LocalRegion exported = regions.get(id);
            if (exported == null) {
                throw new IllegalArgumentException("memory server " + id + " has not exported a region on this local fabric");
            }
            byId[id] = exported.region;
        }
        return new DirectRemoteMemory(byId, latencyNs, () -> { });
    }

    @Override
    public void close() {
        regions.clear();
    }

    private final class LocalRegion implements ExportedRegion {
        private final int serverId;
        private final Region region;

        LocalRegion(int serverId, Region region) {
            this.serverId = serverId;
            this.region = region;
        }

        @Override
        public int serverId() {
            return serverId;
        }

        @Override
        public Region region() {
            return region;
        }

        @Override
        public void close() {
            regions.remove(serverId, this);
        }
    }
}
