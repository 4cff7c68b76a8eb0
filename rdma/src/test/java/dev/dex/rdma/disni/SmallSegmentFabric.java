package dev.dex.rdma.disni;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.agrona.BufferUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.DirectRemoteMemory;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionFormat;
import dev.dex.rdma.RemoteMemory;

/**
 * A control fabric for tests whose regions are cut into small segments (the {@code local} fabric uses 1 GiB
 * ones), so that a region of a few chunks spans many segments and the disni client must split its transfers
 * at segment boundaries. Otherwise like {@code LocalFabric}.
 */
final class SmallSegmentFabric implements Fabric {
    private final int segmentShift;
    private final long latencyNs;
    private final Map<Integer, Exported> regions = new ConcurrentHashMap<>();

    SmallSegmentFabric(int segmentShift, long latencyNs) {
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        this.segmentShift = segmentShift;
        this.latencyNs = latencyNs;
    }

    @Override
    public String transport() {
        return "small-segments";
    }

    @Override
    public ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        long segmentLength = 1L << segmentShift;
        int count = (int) ((regionLength + segmentLength - 1) >>> segmentShift);
        AtomicBuffer[] segments = new AtomicBuffer[count];
        for (int i = 0; i < count; i++) {
            int length = (int) Math.min(segmentLength, regionLength - (long) i * segmentLength);
            segments[i] = new UnsafeBuffer(BufferUtil.allocateDirectAligned(length, 64));
        }
        Region region = new Region(segments, segmentShift);
        RegionFormat.format(region, chunkLength);
        Exported exported = new Exported(serverId, region);
        if (regions.putIfAbsent(serverId, exported) != null) {
            throw new IllegalArgumentException("memory server " + serverId + " already exported");
        }
        return exported;
    }

    @Override
    public RemoteMemory connect(int... serverIds) {
        if (serverIds.length == 0) {
            throw new IllegalArgumentException("no server ids");
        }
        int max = 0;
        for (int id : serverIds) {
            max = Math.max(max, id);
        }
        Region[] byId = new Region[max + 1];
        for (int id : serverIds) {
            Exported exported = regions.get(id);
            if (exported == null) {
                throw new IllegalArgumentException("memory server " + id + " has not exported a region");
            }
            byId[id] = exported.region;
        }
        return new DirectRemoteMemory(byId, latencyNs, () -> { });
    }

    @Override
    public void close() {
        regions.clear();
    }

    private final class Exported implements ExportedRegion {
        private final int serverId;
        private final Region region;

        Exported(int serverId, Region region) {
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
