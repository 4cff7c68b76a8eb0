package dev.dex.rdma;

import java.util.Arrays;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * {@link RemoteMemory} for transports whose regions this process can address with loads and stores
 * ({@code local}, {@code shm}): each verb is a copy or an atomic instruction on the region, preceded by
 * the configured injected latency.
 *
 * <p>Concurrency: stateless apart from the closed flag and the counters. Each verb ends with a full fence,
 * so verbs of one thread take effect in issue order, as completed RDMA verbs do. An 8-byte aligned read or
 * write is a single volatile access (never torn); longer copies may be torn by a concurrent writer.
 */
public final class DirectRemoteMemory implements RemoteMemory {
    private final Region[] regions;
    private final int[] serverIds;
    private final long latencyNs;
    private final VerbCounters counters = new VerbCounters();
    private final ChunkAllocator chunkAllocator;
    private final Runnable onClose;
    private volatile boolean closed;

    /**
     * @param regionsByServerId region of each connected server, {@code null} where not connected
     * @param latencyNs         injected latency per verb, spun, 0 for none
     * @param onClose           run once by {@link #close()}
     */
    public DirectRemoteMemory(Region[] regionsByServerId, long latencyNs, Runnable onClose) {
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        this.regions = regionsByServerId.clone();
        this.latencyNs = latencyNs;
        this.onClose = onClose;
        long[] regionLengths = new long[regions.length];
        long[] chunkLengths = new long[regions.length];
        int connected = 0;
        for (int id = 0; id < regions.length; id++) {
            if (regions[id] != null) {
                chunkLengths[id] = RegionFormat.check(id, regions[id]);
                regionLengths[id] = regions[id].length();
                connected++;
            }
        }
        this.serverIds = new int[connected];
        for (int id = 0, i = 0; id < regions.length; id++) {
            if (regions[id] != null) {
                serverIds[i++] = id;
            }
        }
        this.chunkAllocator = new ChunkAllocator(this::fetchAndAdd, regionLengths, chunkLengths);
    }

    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        Region region = regionOf(address);
        delay();
        readNow(region, address, dst, dstOffset, length);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        Region region = regionOf(address);
        delay();
        writeNow(region, address, src, srcOffset, length);
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        Region region = regionOf(address);
        delay();
        return compareAndSwapNow(region, address, expected, desired);
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        Region region = regionOf(address);
        delay();
        return fetchAndAddNow(region, address, delta);
    }

    /**
     * Runs the batch's verbs now, paying the injected latency once for all of them: verbs posted together overlap
     * their round trips, as on a NIC. Each verb's outcome is recorded in the batch.
     */
    @Override
    public void start(VerbBatch batch) {
        batch.started();
        if (batch.isEmpty()) {
            return;
        }
        delay();
        for (int slot = 0; slot < batch.size(); slot++) {
            if (batch.completed(slot)) {
                continue;
            }
            long address = batch.address(slot);
            try {
                Region region = regionOf(address);
                switch (batch.op(slot)) {
                    case VerbBatch.READ -> readNow(region, address, batch.destination(slot), batch.bufferOffset(slot), batch.length(slot));
                    case VerbBatch.WRITE -> writeNow(region, address, batch.source(slot), batch.bufferOffset(slot), batch.length(slot));
                    case VerbBatch.COMPARE_AND_SWAP -> {
                        batch.complete(slot, compareAndSwapNow(region, address, batch.operand1(slot), batch.operand2(slot)));
                        continue;
                    }
                    default -> {
                        batch.complete(slot, fetchAndAddNow(region, address, batch.operand1(slot)));
                        continue;
                    }
                }
                batch.complete(slot, 0);
            } catch (RuntimeException e) {
                batch.fail(slot, e);
            }
        }
    }

    private void readNow(Region region, long address, MutableDirectBuffer dst, int dstOffset, int length) {
        region.readVerb(GlobalAddress.offset(address), dst, dstOffset, length);
        counters.recordRead(length);
    }

    private void writeNow(Region region, long address, DirectBuffer src, int srcOffset, int length) {
        region.writeVerb(GlobalAddress.offset(address), src, srcOffset, length);
        counters.recordWrite(length);
    }

    private long compareAndSwapNow(Region region, long address, long expected, long desired) {
        long found = region.compareAndSwapLong(GlobalAddress.offset(address), expected, desired);
        counters.recordAtomic();
        return found;
    }

    private long fetchAndAddNow(Region region, long address, long delta) {
        long previous = region.getAndAddLong(GlobalAddress.offset(address), delta);
        counters.recordAtomic();
        return previous;
    }

    @Override
    public int[] memoryServerIds() {
        return serverIds.clone();
    }

    @Override
    public VerbCounters counters() {
        return counters;
    }

    @Override
    public ChunkAllocator chunkAllocator() {
        return chunkAllocator;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            Arrays.fill(regions, null);
            onClose.run();
        }
    }

    private Region regionOf(long address) {
        return VerbChecks.server(regions, address, closed);
    }

    private void delay() {
        VerbChecks.spin(latencyNs);
    }
}
