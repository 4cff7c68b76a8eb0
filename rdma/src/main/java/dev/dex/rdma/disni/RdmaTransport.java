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
     * Makes {@code region} reachable over RDMA: the memory side starts listening for clients on the first
     * registration. Nothing is registered with the device yet; each client gets its own registration of the
     * segments ({@link Registration#grant()}), so that one client's access can be revoked alone.
     *
     * @throws IllegalArgumentException     when a segment is not off-heap memory
     * @throws dev.dex.rdma.FabricException when the device refuses the listener
     */
    Registration register(Region region);

    /**
     * Opens one connection to each of {@code servers} for one-sided verbs (the address is all it needs; each
     * verb names the rkey it uses).
     *
     * @throws IllegalArgumentException when a server cannot be reached
     */
    OneSidedVerbs connect(Collection<RdmaRegionDescriptor> servers);

    /** Stops listening and releases the device; registrations and connections are closed by their owners. */
    @Override
    void close();

    /** One region made reachable, and where clients connect to reach it. */
    interface Registration extends AutoCloseable {
        /** The address clients connect to. */
        String host();

        /** The port clients connect to. */
        int port();

        /** Remote address and length of each segment, in region order; rkey 0 (keys come with a grant). */
        List<RdmaRegionDescriptor.RemoteSegment> segments();

        /**
         * Registers every segment once more, for one client: remote READ and WRITE with keys of its own.
         *
         * @throws dev.dex.rdma.FabricException when the device refuses the registration
         * @throws IllegalStateException        after {@link #close()}
         */
        Grant grant();

        /** Closes every grant still open: verbs of clients still connected fail from then on; idempotent. */
        @Override
        void close();
    }

    /** One client's registration of a region's segments. */
    interface Grant extends AutoCloseable {
        /** The rkey of each segment, in region order. */
        int[] rkeys();

        /**
         * Deregisters the segments: once this returns, the device refuses every READ and WRITE with these keys
         * ({@code IBV_WC_REM_ACCESS_ERR} on the client) and applies none that arrives later; idempotent.
         */
        @Override
        void close();
    }
}
