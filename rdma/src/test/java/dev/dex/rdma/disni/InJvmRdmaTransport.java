package dev.dex.rdma.disni;

import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.AtomicBuffer;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.Region;

/**
 * An {@link RdmaTransport} whose device is this JVM. Registration hands out an rkey per segment and advertises
 * the segment's real address; every READ and WRITE is checked as a NIC checks it (the rkey belongs to the server
 * of the connection and is still registered, the range lies inside that registration, the length fits one
 * transfer) and then copied, aligned 8- and 16-byte transfers word by word with volatile accesses, like
 * {@link Region#readVerb}. A failed check throws {@link FabricException}, as a completion with
 * {@code IBV_WC_REM_ACCESS_ERR} does; a violation of the {@link OneSidedVerbs} contract throws
 * {@link AssertionError}.
 *
 * <p>Registering a region registers nothing; each grant registers its segments under fresh rkeys, and closing
 * the grant removes them, so a revoked client's verbs fail as they would on a NIC.
 *
 * <p>Tests can record every work request, make the next registration, deregistration or work request fail,
 * and see how many connections are open. Thread-safe: registrations live in a concurrent map, the record is a synchronized list,
 * and the rest is volatile or atomic.
 */
final class InJvmRdmaTransport implements RdmaTransport {
    /** The address registrations advertise (TEST-NET-1, never routed). */
    static final String HOST = "192.0.2.7";
    static final int PORT = 7471;

    /** One work request as the device saw it. */
    record WorkRequest(int serverId, boolean read, long remoteAddress, int rkey, int length) {
    }

    private record MemoryRegion(AtomicBuffer segment, long address, int length) {
    }

    private final int maxTransfer;
    private final long latencyNs;
    private final Map<Integer, MemoryRegion> registered = new ConcurrentHashMap<>();
    private final AtomicInteger nextRkey = new AtomicInteger(0x1000);
    private final AtomicInteger openConnections = new AtomicInteger();
    private final AtomicInteger postedTogether = new AtomicInteger();
    private final List<WorkRequest> recorded = Collections.synchronizedList(new ArrayList<>());
    private volatile boolean recording;
    private volatile RuntimeException nextRegistrationFailure;
    private volatile RuntimeException nextDeregistrationFailure;
    /** The thread whose next deregistration fails, or null for any. */
    private volatile Thread deregistrationFailureThread;
    private volatile Runnable nextRegistrationAction;
    private volatile RuntimeException nextListenFailure;
    private volatile RuntimeException nextVerbFailure;
    private volatile boolean closed;

    /**
     * @param maxTransfer the largest transfer the fabric's settings allow
     * @param latencyNs   spun before every work request, 0 for none
     */
    InJvmRdmaTransport(int maxTransfer, long latencyNs) {
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        this.maxTransfer = maxTransfer;
        this.latencyNs = latencyNs;
    }

    /** How many times a client posted work requests together ({@link OneSidedVerbs#postAll}). */
    int postedTogether() {
        return postedTogether.get();
    }

    /** Starts recording work requests. */
    void record() {
        recorded.clear();
        recording = true;
    }

    List<WorkRequest> recorded() {
        synchronized (recorded) {
            return List.copyOf(recorded);
        }
    }

    /** Makes the next region's registration fail, as a listener the device refuses. */
    void failNextListen(RuntimeException failure) {
        nextListenFailure = failure;
    }

    /** Makes the next grant's registration fail. */
    void failNextRegistration(RuntimeException failure) {
        nextRegistrationFailure = failure;
    }

    /** Runs {@code action} inside the next grant's registration, after its keys are registered: a race made certain. */
    void duringNextRegistration(Runnable action) {
        nextRegistrationAction = action;
    }

    /** Makes the next grant's deregistration fail, leaving its keys registered. */
    void failNextDeregistration(RuntimeException failure) {
        failNextDeregistration(failure, null);
    }

    /**
     * As above, but only a deregistration on {@code thread} (null: any) fails: one that a background thread makes
     * meanwhile (a copy's or a lease's keys given back) does not take the injected failure.
     */
    void failNextDeregistration(RuntimeException failure, Thread thread) {
        deregistrationFailureThread = thread;
        nextDeregistrationFailure = failure;
    }

    void failNextWorkRequest(RuntimeException failure) {
        nextVerbFailure = failure;
    }

    int openConnections() {
        return openConnections.get();
    }

    /** Whether a READ or WRITE with {@code rkey} would pass the key check. */
    boolean isRegistered(int rkey) {
        return registered.containsKey(rkey);
    }

    /** Registered segments: one per segment of every grant open. */
    int registrations() {
        return registered.size();
    }

    boolean isClosed() {
        return closed;
    }

    @Override
    public Registration register(Region region) {
        RuntimeException refused = nextListenFailure;
        if (refused != null) {
            nextListenFailure = null;
            throw refused;
        }
        List<RdmaRegionDescriptor.RemoteSegment> segments = new ArrayList<>();
        List<AtomicBuffer> memory = new ArrayList<>();
        for (int i = 0; i < region.segmentCount(); i++) {
            AtomicBuffer segment = region.segment(i);
            memory.add(segment);
            segments.add(new RdmaRegionDescriptor.RemoteSegment(segment.addressOffset(), 0, segment.capacity()));
        }
        List<RdmaRegionDescriptor.RemoteSegment> advertised = List.copyOf(segments);
        List<Grant> grants = Collections.synchronizedList(new ArrayList<>());
        return new Registration() {
            @Override
            public String host() {
                return HOST;
            }

            @Override
            public int port() {
                return PORT;
            }

            @Override
            public List<RdmaRegionDescriptor.RemoteSegment> segments() {
                return advertised;
            }

            @Override
            public Grant grant() {
                RuntimeException failure = nextRegistrationFailure;
                if (failure != null) {
                    nextRegistrationFailure = null;
                    throw failure;
                }
                int[] rkeys = new int[memory.size()];
                for (int i = 0; i < rkeys.length; i++) {
                    AtomicBuffer segment = memory.get(i);
                    rkeys[i] = nextRkey.getAndIncrement();
                    registered.put(rkeys[i], new MemoryRegion(segment, segment.addressOffset(), segment.capacity()));
                }
                Runnable action = nextRegistrationAction;
                if (action != null) {
                    nextRegistrationAction = null;
                    action.run();
                }
                Grant grant = new Grant() {
                    @Override
                    public int[] rkeys() {
                        return rkeys.clone();
                    }

                    @Override
                    public synchronized void close() {
                        RuntimeException failure = nextDeregistrationFailure;
                        Thread only = deregistrationFailureThread;
                        if (failure != null && (only == null || only == Thread.currentThread())) {
                            nextDeregistrationFailure = null;
                            throw failure;
                        }
                        for (int rkey : rkeys) {
                            registered.remove(rkey);
                        }
                        grants.remove(this);
                    }
                };
                grants.add(grant);
                return grant;
            }

            @Override
            public void close() {
                List<Grant> open;
                synchronized (grants) {
                    open = List.copyOf(grants);
                }
                open.forEach(Grant::close);
            }
        };
    }

    @Override
    public OneSidedVerbs connect(Collection<RdmaRegionDescriptor> servers) {
        if (closed) {
            throw new IllegalStateException("transport closed");
        }
        Map<Integer, List<RdmaRegionDescriptor.RemoteSegment>> segmentsByServer = new HashMap<>();
        for (RdmaRegionDescriptor server : servers) {
            if (!server.rdmaHost().equals(HOST) || server.rdmaPort() != PORT) {
                throw new IllegalArgumentException("cannot reach memory server " + server.serverId() + " over RDMA at "
                        + server.rdmaHost() + ":" + server.rdmaPort() + ": REJECTED");
            }
            segmentsByServer.put(server.serverId(), server.segments());
        }
        openConnections.incrementAndGet();
        return new Verbs(segmentsByServer);
    }

    @Override
    public void close() {
        closed = true;
    }

    private final class Verbs implements OneSidedVerbs {
        private final Map<Integer, List<RdmaRegionDescriptor.RemoteSegment>> segmentsByServer;
        private volatile boolean verbsClosed;

        Verbs(Map<Integer, List<RdmaRegionDescriptor.RemoteSegment>> segmentsByServer) {
            this.segmentsByServer = segmentsByServer;
        }

        @Override
        public void read(int serverId, long remoteAddress, int rkey, MutableDirectBuffer dst, int dstOffset, int length) {
            read(serverId, remoteAddress, rkey, dst, dstOffset, length, true);
        }

        @Override
        public void write(int serverId, long remoteAddress, int rkey, DirectBuffer src, int srcOffset, int length) {
            write(serverId, remoteAddress, rkey, src, srcOffset, length, true);
        }

        /** As a NIC with the requests in flight together: the latency once for all of them, each checked as alone. */
        @Override
        public void postAll(WorkList work) {
            if (work.size() > 0) {
                postedTogether.incrementAndGet();
                dev.dex.rdma.VerbChecks.spin(latencyNs);
            }
            for (int i = 0; i < work.size(); i++) {
                try {
                    if (work.isRead(i)) {
                        read(work.serverId(i), work.remoteAddress(i), work.rkey(i), work.destination(i), work.offset(i), work.length(i), false);
                    } else {
                        write(work.serverId(i), work.remoteAddress(i), work.rkey(i), work.source(i), work.offset(i), work.length(i), false);
                    }
                } catch (RuntimeException e) {
                    work.fail(i, e);
                }
            }
        }

        private void read(int serverId, long remoteAddress, int rkey, MutableDirectBuffer dst, int dstOffset, int length, boolean latency) {
            MemoryRegion mr = check(serverId, true, remoteAddress, rkey, length, latency);
            int index = (int) (remoteAddress - mr.address());
            if (length == Long.BYTES && (index & 7) == 0) {
                dst.putLong(dstOffset, mr.segment().getLongVolatile(index));
            } else if (length == 2 * Long.BYTES && (index & 7) == 0) {
                dst.putLong(dstOffset, mr.segment().getLongVolatile(index));
                dst.putLong(dstOffset + Long.BYTES, mr.segment().getLongVolatile(index + Long.BYTES));
            } else {
                mr.segment().getBytes(index, dst, dstOffset, length);
            }
            VarHandle.fullFence();
        }

        private void write(int serverId, long remoteAddress, int rkey, DirectBuffer src, int srcOffset, int length, boolean latency) {
            MemoryRegion mr = check(serverId, false, remoteAddress, rkey, length, latency);
            int index = (int) (remoteAddress - mr.address());
            VarHandle.fullFence();
            if (length == Long.BYTES && (index & 7) == 0) {
                mr.segment().putLongVolatile(index, src.getLong(srcOffset));
            } else {
                mr.segment().putBytes(index, src, srcOffset, length);
            }
            VarHandle.fullFence();
        }

        @Override
        public void close() {
            if (!verbsClosed) {
                verbsClosed = true;
                openConnections.decrementAndGet();
            }
        }

        private MemoryRegion check(int serverId, boolean read, long remoteAddress, int rkey, int length, boolean latency) {
            if (verbsClosed) {
                throw new IllegalStateException("remote memory is closed");
            }
            if (length < 0 || length > maxTransfer) {
                throw new AssertionError("a work request of " + length + " bytes exceeds the maximum transfer " + maxTransfer);
            }
            if (recording) {
                recorded.add(new WorkRequest(serverId, read, remoteAddress, rkey, length));
            }
            RuntimeException failure = nextVerbFailure;
            if (failure != null) {
                nextVerbFailure = null;
                throw failure;
            }
            List<RdmaRegionDescriptor.RemoteSegment> segments = segmentsByServer.get(serverId);
            if (segments == null) {
                throw new AssertionError("no connection to memory server " + serverId);
            }
            if (segments.stream().noneMatch(segment -> remoteAddress >= segment.address()
                    && remoteAddress - segment.address() <= segment.length() - length)) {
                throw new AssertionError("[0x" + Long.toHexString(remoteAddress) + ", +" + length + ") lies in no segment of memory server "
                        + serverId);
            }
            MemoryRegion mr = registered.get(rkey);
            if (mr == null) {
                throw new FabricException("RDMA " + (read ? "READ" : "WRITE") + " on memory server " + serverId
                        + " completed with IBV_WC_REM_ACCESS_ERR: rkey 0x" + Integer.toHexString(rkey) + " is not registered there");
            }
            if (remoteAddress < mr.address() || remoteAddress - mr.address() > mr.length() - length) {
                throw new AssertionError("[0x" + Long.toHexString(remoteAddress) + ", +" + length + ") is outside the registration of rkey 0x"
                        + Integer.toHexString(rkey) + "; the work request would fail with IBV_WC_REM_ACCESS_ERR");
            }
            if (latency) {
                dev.dex.rdma.VerbChecks.spin(latencyNs);
            }
            return mr;
        }
    }
}
