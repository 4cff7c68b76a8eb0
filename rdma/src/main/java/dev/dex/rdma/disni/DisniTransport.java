package dev.dex.rdma.disni;

import static dev.dex.rdma.disni.DisniOneSidedVerbs.messageOf;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;

import org.agrona.concurrent.AtomicBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.ibm.disni.RdmaEndpoint;
import com.ibm.disni.RdmaPassiveEndpointGroup;
import com.ibm.disni.RdmaServerEndpoint;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.Region;

/**
 * {@link RdmaTransport} over DiSNI.
 *
 * <p>Memory side: on the first registration it opens a {@link RdmaPassiveEndpointGroup}, binds a server
 * endpoint to {@link DisniSettings#host()}:{@link DisniSettings#port()} and starts an acceptor thread that
 * accepts every client. Each grant registers the segments once more with the server endpoint's protection
 * domain, for local write and remote read, write and atomics, through {@link IbvPd#regMr(long, int, int)} rather
 * than DiSNI's {@code registerMemory}, whose fixed access flags lack remote atomics; its close deregisters them,
 * which revokes that client's keys alone. DiSNI keeps one protection domain per device, shared by every endpoint
 * on it, so the accepted connections can reach the segments. The memory node's CPU takes no part in the
 * clients' READs and WRITEs; accepted connections stay passive.
 *
 * <p>Compute side: each {@link #connect} opens a {@link DisniOneSidedVerbs}.
 *
 * <p>Concurrency: registration, the lazy start of the listener and close are serialised on this object; a
 * region's grants are listed under its registration's lock and registered outside it. The acceptor thread
 * alone touches its list of accepted connections.
 */
final class DisniTransport implements RdmaTransport {
    /** Access flags of a registered segment: what one-sided clients may do with it. */
    static final int SEGMENT_ACCESS = IbvMr.IBV_ACCESS_LOCAL_WRITE | IbvMr.IBV_ACCESS_REMOTE_READ
            | IbvMr.IBV_ACCESS_REMOTE_WRITE | IbvMr.IBV_ACCESS_REMOTE_ATOMIC;
    private static final int BACKLOG = 128;
    /** Accepted connections post nothing themselves; their queues only need to exist. */
    private static final int SERVED_QUEUE_DEPTH = 4;
    private static final long ACCEPTOR_JOIN_MS = 5_000;
    private static final Logger LOG = LoggerFactory.getLogger(DisniTransport.class);

    private final DisniSettings settings;
    private Server server;
    private boolean closed;

    DisniTransport(DisniSettings settings) {
        this.settings = settings;
    }

    @Override
    public synchronized Registration register(Region region) {
        if (closed) {
            throw new IllegalStateException("the disni transport is closed");
        }
        List<AtomicBuffer> memory = new ArrayList<>(region.segmentCount());
        List<RdmaRegionDescriptor.RemoteSegment> segments = new ArrayList<>(region.segmentCount());
        for (int i = 0; i < region.segmentCount(); i++) {
            AtomicBuffer segment = region.segment(i);
            if (segment.byteArray() != null) {
                throw new IllegalArgumentException("segment " + i + " of the region lies on the Java heap; RDMA can only register off-heap memory");
            }
            memory.add(segment);
            segments.add(new RdmaRegionDescriptor.RemoteSegment(segment.addressOffset(), 0, segment.capacity()));
        }
        if (server == null) {
            server = Server.listen(settings);
        }
        return new SegmentRegistration(server.host, server.port, server.endpoint.getPd(), segments, memory);
    }

    @Override
    public OneSidedVerbs connect(Collection<RdmaRegionDescriptor> servers) {
        return new DisniOneSidedVerbs(settings, servers);
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (server != null) {
            server.close();
        }
    }

    /** Deregisters each and takes it out of the list; returns the first failure (each is logged), or null. */
    private static IOException deregister(List<IbvMr> registrations) {
        IOException first = null;
        for (java.util.Iterator<IbvMr> it = registrations.iterator(); it.hasNext(); ) {
            IbvMr mr = it.next();
            try {
                mr.deregMr().execute().free();
                it.remove();
            } catch (IOException e) {
                LOG.warn("deregistering a region segment failed: {}", messageOf(e));
                first = first == null ? e : first;
            }
        }
        return first;
    }

    /** One region made reachable: its segments, and the grants registered for its clients. */
    private static final class SegmentRegistration implements Registration {
        private final String host;
        private final int port;
        private final IbvPd pd;
        private final List<RdmaRegionDescriptor.RemoteSegment> segments;
        private final List<AtomicBuffer> memory;
        private final List<SegmentGrant> grants = new ArrayList<>();
        private boolean closed;

        SegmentRegistration(String host, int port, IbvPd pd, List<RdmaRegionDescriptor.RemoteSegment> segments, List<AtomicBuffer> memory) {
            this.host = host;
            this.port = port;
            this.pd = pd;
            this.segments = List.copyOf(segments);
            this.memory = List.copyOf(memory);
        }

        @Override
        public String host() {
            return host;
        }

        @Override
        public int port() {
            return port;
        }

        @Override
        public List<RdmaRegionDescriptor.RemoteSegment> segments() {
            return segments;
        }

        /**
         * Registers each segment with the server endpoint's protection domain, for local write and remote read,
         * write and atomics, through {@link IbvPd#regMr(long, int, int)} rather than DiSNI's
         * {@code registerMemory}, whose fixed access flags lack remote atomics.
         */
        @Override
        public SegmentGrant grant() {
            synchronized (this) {
                if (closed) {
                    throw new IllegalStateException("the region is no longer reachable over RDMA");
                }
            }
            List<IbvMr> registered = new ArrayList<>(memory.size());
            try {
                for (int i = 0; i < memory.size(); i++) {
                    AtomicBuffer segment = memory.get(i);
                    try {
                        registered.add(pd.regMr(segment.addressOffset(), segment.capacity(), SEGMENT_ACCESS).execute().free().getMr());
                    } catch (IOException e) {
                        throw new FabricException("could not register segment " + i + " (" + segment.capacity() + " bytes) with the RDMA "
                                + "device for local write and remote read, write and atomics: " + messageOf(e), e);
                    }
                }
            } catch (RuntimeException e) {
                deregister(registered);
                throw e;
            }
            SegmentGrant grant = new SegmentGrant(registered, this::forget);
            synchronized (this) {
                if (!closed) {
                    grants.add(grant);
                    return grant;
                }
            }
            grant.close();
            throw new IllegalStateException("the region is no longer reachable over RDMA");
        }

        private synchronized void forget(SegmentGrant grant) {
            grants.remove(grant);
        }

        @Override
        public void close() {
            List<SegmentGrant> open;
            synchronized (this) {
                if (closed) {
                    return;
                }
                closed = true;
                open = List.copyOf(grants);
                grants.clear();
            }
            for (SegmentGrant grant : open) {
                try {
                    grant.close();
                } catch (FabricException logged) {
                    // deregister logged it; the region goes away with the memory node anyway
                }
            }
        }
    }

    /** One client's memory registrations of a region's segments. */
    private static final class SegmentGrant implements Grant {
        /** Those not deregistered yet. */
        private final List<IbvMr> registrations;
        private final int[] rkeys;
        private final java.util.function.Consumer<SegmentGrant> onClosed;

        SegmentGrant(List<IbvMr> registrations, java.util.function.Consumer<SegmentGrant> onClosed) {
            this.registrations = new ArrayList<>(registrations);
            this.rkeys = registrations.stream().mapToInt(IbvMr::getRkey).toArray();
            this.onClosed = onClosed;
        }

        @Override
        public int[] rkeys() {
            return rkeys.clone();
        }

        /**
         * {@code ibv_dereg_mr} of each segment: the device invalidates the keys before the call returns.
         *
         * @throws FabricException when a segment could not be deregistered (its key may still work; the next
         *                         close tries it again)
         */
        @Override
        public synchronized void close() {
            IOException failed = deregister(registrations);
            if (failed != null) {
                throw new FabricException("the RDMA device did not deregister a client's segment, so its key may still work: "
                        + messageOf(failed), failed);
            }
            onClosed.accept(this);
        }
    }

    /** The listening server endpoint, its group and its acceptor thread. */
    private static final class Server implements Runnable {
        final RdmaServerEndpoint<ServedEndpoint> endpoint;
        final String host;
        final int port;
        private final RdmaPassiveEndpointGroup<ServedEndpoint> group;
        private final List<ServedEndpoint> accepted = new ArrayList<>();
        private final Thread acceptor;
        private volatile boolean stopping;

        private Server(RdmaPassiveEndpointGroup<ServedEndpoint> group, RdmaServerEndpoint<ServedEndpoint> endpoint, String host, int port) {
            this.group = group;
            this.endpoint = endpoint;
            this.host = host;
            this.port = port;
            this.acceptor = new Thread(this, "dex-disni-accept-" + port);
            acceptor.setDaemon(true);
            acceptor.start();
        }

        static Server listen(DisniSettings settings) {
            String where = settings.host() + ":" + settings.port();
            RdmaPassiveEndpointGroup<ServedEndpoint> group;
            try {
                group = new RdmaPassiveEndpointGroup<>(DisniOneSidedVerbs.EVENT_TIMEOUT_MS, SERVED_QUEUE_DEPTH, 1, 2 * SERVED_QUEUE_DEPTH);
            } catch (IOException e) {
                throw new FabricException("could not open the RDMA device to listen on " + where + ": " + messageOf(e), e);
            }
            group.init((id, serverSide) -> new ServedEndpoint(group, id, serverSide));
            try {
                RdmaServerEndpoint<ServedEndpoint> endpoint = group.createServerEndpoint();
                endpoint.bind(new InetSocketAddress(settings.host(), settings.port()), BACKLOG);
                SocketAddress bound = endpoint.getSrcAddr();
                String host = settings.host();
                int port = settings.port();
                if (bound instanceof InetSocketAddress inet) {
                    port = inet.getPort();
                    if (inet.getAddress() != null && !inet.getAddress().isAnyLocalAddress()) {
                        host = inet.getAddress().getHostAddress();
                    }
                }
                if (port == 0) {
                    throw new IOException("the RDMA connection manager did not report the port it bound");
                }
                return new Server(group, endpoint, host, port);
            } catch (Exception e) {
                closeGroup(group);
                throw new FabricException("could not listen for RDMA clients on " + where + ": " + messageOf(e), e);
            }
        }

        @Override
        public void run() {
            while (!stopping) {
                try {
                    accepted.add(endpoint.accept());
                } catch (IOException | RuntimeException e) {
                    if (stopping) {
                        return;
                    }
                    LOG.warn("accepting an RDMA client failed: {}", messageOf(e));
                    try {
                        Thread.sleep(DisniOneSidedVerbs.EVENT_TIMEOUT_MS);
                    } catch (InterruptedException interrupted) {
                        return;
                    }
                }
                closeDisconnected();
            }
        }

        /** Releases the queue pairs of clients that went away; done here because DiSNI's event thread must not. */
        private void closeDisconnected() {
            for (Iterator<ServedEndpoint> it = accepted.iterator(); it.hasNext(); ) {
                ServedEndpoint client = it.next();
                if (client.disconnected) {
                    it.remove();
                    try {
                        client.close();
                    } catch (IOException e) {
                        LOG.warn("closing a disconnected RDMA client failed: {}", messageOf(e));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return;
                    }
                }
            }
        }

        void close() {
            stopping = true;
            acceptor.interrupt();
            try {
                acceptor.join(ACCEPTOR_JOIN_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            closeGroup(group);
        }

        private static void closeGroup(RdmaPassiveEndpointGroup<ServedEndpoint> group) {
            try {
                group.close();
            } catch (IOException | RuntimeException e) {
                LOG.warn("closing the RDMA listener failed: {}", messageOf(e));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                LOG.warn("interrupted while closing the RDMA listener");
            }
        }
    }

    /** A client's connection as the memory side sees it: passive, remembered until the client goes away. */
    static final class ServedEndpoint extends RdmaEndpoint {
        volatile boolean disconnected;

        ServedEndpoint(RdmaPassiveEndpointGroup<ServedEndpoint> group, RdmaCmId id, boolean serverSide) throws IOException {
            super(group, id, serverSide);
        }

        @Override
        public synchronized void dispatchCmEvent(RdmaCmEvent event) throws IOException {
            if (event.getEvent() == RdmaCmEvent.EventType.RDMA_CM_EVENT_DISCONNECTED.ordinal()) {
                disconnected = true;
            }
            super.dispatchCmEvent(event);
        }
    }
}
