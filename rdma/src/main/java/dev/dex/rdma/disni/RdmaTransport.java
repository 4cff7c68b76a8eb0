package dev.dex.rdma.disni;

import java.util.Collection;
import java.util.List;

import dev.dex.rdma.Region;

/**
 * Everything of the {@code disni} fabric that needs an RDMA device: registering a region's memory and
 * listening for clients on the memory side, connecting on the compute side. {@link DisniFabric} does the
 * rest (control transport, descriptors, bookkeeping), so that it can be tested with an in-JVM
 * implementation of this interface where no device exists.
 */
interface RdmaTransport extends AutoCloseable {

    /**
     * Registers every segment of {@code region} for remote READ and WRITE and makes it reachable: the
     * memory side starts listening for clients on the first registration.
     *
     * @throws IllegalArgumentException     when a segment is not off-heap memory
     * @throws dev.dex.rdma.FabricException when the device refuses the registration or the listener
     */
    Registration register(Region region);

    /**
     * Opens one connection to each of {@code servers} for one-sided verbs.
     *
     * @throws IllegalArgumentException when a server cannot be reached
     */
    OneSidedVerbs connect(Collection<RdmaRegionDescriptor> servers);

    /** Stops listening and releases the device; registrations and connections are closed by their owners. */
    @Override
    void close();

    /** The registered segments of one region, and where clients connect to reach them. */
    interface Registration extends AutoCloseable {
        /** The address clients connect to. */
        String host();

        /** The port clients connect to. */
        int port();

        /** Remote address, rkey and length of each segment, in region order. */
        List<RdmaRegionDescriptor.RemoteSegment> segments();

        /** Deregisters the segments: verbs of clients still connected fail from then on; idempotent. */
        @Override
        void close();
    }
}
