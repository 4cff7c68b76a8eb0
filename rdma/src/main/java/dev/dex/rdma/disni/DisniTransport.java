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
 * accepts every client. Segments are registered with the server endpoint's protection domain, for local write
 * and remote read, write and atomics, through {@link IbvPd#regMr(long, int, int)} rather than DiSNI's
 * {@code registerMemory}, whose fixed access flags lack remote atomics. DiSNI keeps one protection domain per
 * device, shared by every endpoint on it, so the accepted connections can reach the segments. The memory node's
 * CPU takes no part in the clients' READs and WRITEs; accepted connections stay passive.
 *
 * <p>Compute side: each {@link #connect} opens a {@link DisniOneSidedVerbs}.
 *
 * <p>Concurrency: registration, the lazy start of the listener and close are serialised on this object. The
 * acceptor thread alone touches its list of accepted connections.
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
        if (server == null) {
            server = Server.listen(settings);
        }
        IbvPd pd = server.endpoint.getPd();
        List<IbvMr> registered = new ArrayList<>(region.segmentCount());
        List<RdmaRegionDescriptor.RemoteSegment> segments = new ArrayList<>(region.segmentCount());
        try {
            for (int i = 0; i < region.segmentCount(); i++) {
                AtomicBuffer segment = region.segment(i);
                if (segment.byteArray() != null) {
                    throw new IllegalArgumentException("segment " + i + " of the region lies on the Java heap; RDMA can only register off-heap memory");
                }
                IbvMr mr;
                try {
                    mr = pd.regMr(segment.addressOffset(), segment.capacity(), SEGMENT_ACCESS).execute().free().getMr();
                } catch (IOException e) {
                    throw new FabricException("could not register segment " + i + " (" + segment.capacity() + " bytes) with the RDMA "
                            + "device for local write and remote read, write and atomics: " + messageOf(e), e);
                }
                registered.add(mr);
                segments.add(new RdmaRegionDescriptor.RemoteSegment(mr.getAddr(), mr.getRkey(), mr.getLength()));
            }
        } catch (RuntimeException e) {
            deregister(registered);
            throw e;
        }
        return new SegmentRegistration(server.host, server.port, segments, registered);
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

    private static void deregister(List<IbvMr> registrations) {
        for (IbvMr mr : registrations) {
            try {
                mr.deregMr().execute().free();
            } catch (IOException e) {
                LOG.warn("deregistering a region segment failed: {}", messageOf(e));
            }
        }
    }

    /** The segments of one region; deregistering them cuts off every client. */
    private static final class SegmentRegistration implements Registration {
        private final String host;
        private final int port;
        private final List<RdmaRegionDescriptor.RemoteSegment> segments;
        private final List<IbvMr> registrations;
        private boolean closed;

        SegmentRegistration(String host, int port, List<RdmaRegionDescriptor.RemoteSegment> segments, List<IbvMr> registrations) {
            this.host = host;
            this.port = port;
            this.segments = List.copyOf(segments);
            this.registrations = registrations;
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

        @Override
        public synchronized void close() {
            if (!closed) {
                closed = true;
                deregister(registrations);
            }
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
