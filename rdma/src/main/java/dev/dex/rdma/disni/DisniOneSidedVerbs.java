package dev.dex.rdma.disni;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.ibm.disni.RdmaActiveEndpoint;
import com.ibm.disni.RdmaActiveEndpointGroup;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.SVCPostSend;

import dev.dex.rdma.FabricException;

/**
 * {@link OneSidedVerbs} over DiSNI: one reliable connection (RC queue pair) per memory server, in one
 * {@link RdmaActiveEndpointGroup} whose completion-queue thread hands each completion to the thread that
 * posted the request.
 *
 * <p>Per calling thread ({@link ThreadContext}): a page-aligned staging buffer of
 * {@link DisniSettings#maxTransfer()} bytes, registered once per protection domain for local write; per
 * server a stateful, reused {@link SVCPostSend} for READ and one for WRITE, whose work request id, remote
 * address, rkey and length are rewritten in place before each post; and a {@link CompletionSlot}. A READ
 * lands in the staging buffer and is copied out; a WRITE is copied in first. Each request is signaled and
 * awaited, so one thread's requests take effect in issue order.
 *
 * <p>Failures: a completion with an error status, a post that fails, a request that does not complete within
 * {@link DisniSettings#verbTimeout()} or a disconnect marks that server's connection broken, and every later
 * verb on it throws {@link FabricException}. After a timeout the request may still be in flight, so the thread
 * abandons its staging buffer (kept registered until close) rather than let a late READ overwrite a later
 * transfer; its late completion finds no armed id and is dropped.
 *
 * <p>Concurrency: a thread context is written only by its thread, between setting and clearing its volatile
 * {@code busy} flag, which it sets before it reads {@code closed}; {@link #close()} sets {@code closed} before
 * it reads each {@code busy}, so (both volatile) either the verb sees the close and fails, or the close waits
 * for the verb, up to the verb timeout, before it frees the context's native objects. The slot table is
 * copied on write under {@code slotsLock} and read without a lock by the completion-queue thread. Each
 * connection bounds its requests in flight with a semaphore of {@link DisniSettings#queueDepth()} permits, the
 * size of its send queue.
 */
final class DisniOneSidedVerbs implements OneSidedVerbs {
    /** How long DiSNI's connection-manager and completion-queue threads block before they look for a close. */
    static final int EVENT_TIMEOUT_MS = 200;
    /** Transport retries of a request before its completion reports an error: the RC maximum. */
    private static final byte RETRY_COUNT = 7;
    /** Completions arrive within microseconds; spin that long before parking. */
    private static final long SPIN_NANOS = 20_000;
    private static final int PAGE = 4096;
    private static final Logger LOG = LoggerFactory.getLogger(DisniOneSidedVerbs.class);

    private final DisniSettings settings;
    private final long verbTimeoutNanos;
    private final ClientEndpoint[] endpoints;
    private final RdmaActiveEndpointGroup<ClientEndpoint> group;
    private final Object slotsLock = new Object();
    private volatile CompletionSlot[] slots = new CompletionSlot[0];
    private final List<ThreadContext> contexts = new CopyOnWriteArrayList<>();
    private final ThreadLocal<ThreadContext> local = ThreadLocal.withInitial(this::newContext);
    private volatile boolean closed;

    /**
     * Connects to every server, one after the other.
     *
     * @throws IllegalArgumentException when a server cannot be reached (nothing stays open)
     * @throws FabricException          when the local device cannot be opened
     */
    DisniOneSidedVerbs(DisniSettings settings, Collection<RdmaRegionDescriptor> servers) {
        this.settings = settings;
        this.verbTimeoutNanos = settings.verbTimeout().toNanos();
        int maxId = servers.stream().mapToInt(RdmaRegionDescriptor::serverId).max()
                .orElseThrow(() -> new IllegalArgumentException("a disni client needs at least one memory server"));
        this.endpoints = new ClientEndpoint[maxId + 1];
        RdmaActiveEndpointGroup<ClientEndpoint> endpointGroup;
        try {
            // All connections of the group share one completion queue per device, so it holds every request in flight.
            endpointGroup = new RdmaActiveEndpointGroup<>(EVENT_TIMEOUT_MS, false, settings.queueDepth(), 1,
                    settings.queueDepth() * servers.size());
        } catch (IOException e) {
            throw new FabricException("could not open the RDMA device for a client: " + messageOf(e), e);
        }
        this.group = endpointGroup;
        endpointGroup.init((id, serverSide) -> new ClientEndpoint(endpointGroup, id, serverSide, this, settings.queueDepth()));
        try {
            endpointGroup.getConnParam().setRetry_count(RETRY_COUNT);
            for (RdmaRegionDescriptor server : servers) {
                endpoints[server.serverId()] = connect(server);
            }
        } catch (IOException e) {
            closeGroup();
            throw new FabricException("could not configure RDMA connections: " + messageOf(e), e);
        } catch (RuntimeException e) {
            closeGroup();
            throw e;
        }
    }

    private ClientEndpoint connect(RdmaRegionDescriptor server) {
        String where = "memory server " + server.serverId() + " at " + server.rdmaHost() + ":" + server.rdmaPort();
        InetSocketAddress address = new InetSocketAddress(server.rdmaHost(), server.rdmaPort());
        if (address.isUnresolved()) {
            throw new IllegalArgumentException("cannot reach " + where + " over RDMA: unknown host");
        }
        ClientEndpoint endpoint;
        try {
            endpoint = group.createEndpoint();
        } catch (IOException e) {
            throw new FabricException("could not create an RDMA endpoint for " + where + ": " + messageOf(e), e);
        }
        try {
            endpoint.connectWithin(address, settings.connectTimeout());
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot reach " + where + " over RDMA: " + messageOf(e), e);
        }
        return endpoint;
    }

    @Override
    public void read(int serverId, long remoteAddress, int rkey, MutableDirectBuffer dst, int dstOffset, int length) {
        ThreadContext context = enter();
        try {
            post(context, serverId, IbvSendWR.IBV_WR_RDMA_READ, remoteAddress, rkey, length);
            dst.putBytes(dstOffset, context.staging.view, 0, length);
        } finally {
            context.busy = false;
        }
    }

    @Override
    public void write(int serverId, long remoteAddress, int rkey, DirectBuffer src, int srcOffset, int length) {
        ThreadContext context = enter();
        try {
            checkLength(length);
            context.staging.view.putBytes(0, src, srcOffset, length);
            post(context, serverId, IbvSendWR.IBV_WR_RDMA_WRITE, remoteAddress, rkey, length);
        } finally {
            context.busy = false;
        }
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        long deadline = System.nanoTime() + verbTimeoutNanos + TimeUnit.SECONDS.toNanos(1);
        List<ThreadContext> quiet = new ArrayList<>();
        for (ThreadContext context : contexts) {
            while (context.busy && System.nanoTime() < deadline) {
                LockSupport.parkNanos(100_000);
            }
            if (context.busy) {
                LOG.warn("a verb is still running at close; its RDMA resources are left allocated");
            } else {
                quiet.add(context);
            }
        }
        closeGroup();
        for (ThreadContext context : quiet) {
            context.release();
        }
        contexts.clear();
    }

    /** From the completion-queue thread: hands the completion to the slot its id names. */
    void complete(long wrId, int status) {
        CompletionSlot[] current = slots;
        int id = CompletionSlot.slotIdOf(wrId);
        if (id < current.length) {
            current[id].complete(wrId, status);
        }
    }

    private ThreadContext enter() {
        ThreadContext context = local.get();
        context.busy = true;
        if (closed) {
            context.busy = false;
            throw new IllegalStateException("remote memory is closed");
        }
        return context;
    }

    private void post(ThreadContext context, int serverId, int opcode, long remoteAddress, int rkey, int length) {
        checkLength(length);
        ClientEndpoint endpoint = serverId >= 0 && serverId < endpoints.length ? endpoints[serverId] : null;
        if (endpoint == null) {
            throw new IllegalArgumentException("not connected to memory server " + serverId);
        }
        String failure = endpoint.failure;
        if (failure != null) {
            throw new FabricException(verb(opcode, length, serverId) + " failed: the connection is broken since " + failure);
        }
        WorkRequest request = context.lane(serverId, endpoint, opcode);
        IbvMr staging = context.staging.registration(endpoint.getPd());
        acquireCredit(endpoint, opcode, length, serverId);
        long wrId = context.slot.arm();
        request.prepare(wrId, remoteAddress, rkey, staging.getAddr(), length, staging.getLkey());
        try {
            request.call.execute();
        } catch (IOException e) {
            context.slot.cancel(wrId);
            endpoint.credits.release();
            endpoint.breakWith("a post failed: " + messageOf(e));
            throw new FabricException(verb(opcode, length, serverId) + " could not be posted: " + messageOf(e), e);
        }
        int status = context.slot.await(wrId, verbTimeoutNanos, SPIN_NANOS);
        if (status == CompletionSlot.TIMED_OUT) {
            // The request may still complete, so its send queue slot stays taken and its staging buffer is abandoned.
            endpoint.breakWith("a request did not complete within " + settings.verbTimeout().toMillis() + " ms");
            context.retireStaging();
            throw new FabricException(verb(opcode, length, serverId) + " did not complete within "
                    + settings.verbTimeout().toMillis() + " ms; the connection is given up");
        }
        endpoint.credits.release();
        if (status != 0) {
            String reason = describe(status);
            endpoint.breakWith("a request completed with " + reason);
            throw new FabricException(verb(opcode, length, serverId) + " completed with " + reason);
        }
    }

    private static String verb(int opcode, int length, int serverId) {
        return (opcode == IbvSendWR.IBV_WR_RDMA_READ ? "RDMA READ" : "RDMA WRITE") + " of " + length + " bytes on memory server " + serverId;
    }

    private void checkLength(int length) {
        if (length < 0 || length > settings.maxTransfer()) {
            throw new IllegalArgumentException("one RDMA transfer is 0 to " + settings.maxTransfer() + " bytes: " + length);
        }
    }

    private void acquireCredit(ClientEndpoint endpoint, int opcode, int length, int serverId) {
        try {
            if (!endpoint.credits.tryAcquire(verbTimeoutNanos, TimeUnit.NANOSECONDS)) {
                throw new FabricException(verb(opcode, length, serverId) + " found the send queue full for "
                        + settings.verbTimeout().toMillis() + " ms");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FabricException(verb(opcode, length, serverId) + " was interrupted while waiting for room in the send queue", e);
        }
    }

    /** An exception's message without the line break libdisni ends its messages with. */
    static String messageOf(Throwable e) {
        return String.valueOf(e.getMessage()).strip();
    }

    /** The work completion status by its verbs name, as in {@code ibv_wc_status_str}. */
    static String describe(int status) {
        IbvWC.IbvWcStatus[] known = IbvWC.IbvWcStatus.values();
        return status >= 0 && status < known.length ? known[status].name() + " (" + status + ")" : "status " + status;
    }

    private ThreadContext newContext() {
        CompletionSlot slot;
        synchronized (slotsLock) {
            CompletionSlot[] current = slots;
            CompletionSlot[] grown = Arrays.copyOf(current, current.length + 1);
            slot = new CompletionSlot(current.length);
            grown[current.length] = slot;
            slots = grown;
        }
        ThreadContext context = new ThreadContext(slot);
        contexts.add(context);
        return context;
    }

    private void closeGroup() {
        try {
            group.close();
        } catch (IOException | RuntimeException e) {
            LOG.warn("closing the RDMA client endpoints failed: {}", messageOf(e));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            LOG.warn("interrupted while closing the RDMA client endpoints");
        }
    }

    /** One thread's staging buffers, work requests and completion slot; see the class comment. */
    private final class ThreadContext {
        final CompletionSlot slot;
        final WorkRequest[] reads = new WorkRequest[endpoints.length];
        final WorkRequest[] writes = new WorkRequest[endpoints.length];
        final List<Staging> retired = new ArrayList<>();
        Staging staging = new Staging(settings.maxTransfer());
        volatile boolean busy;

        ThreadContext(CompletionSlot slot) {
            this.slot = slot;
        }

        WorkRequest lane(int serverId, ClientEndpoint endpoint, int opcode) {
            WorkRequest[] lane = opcode == IbvSendWR.IBV_WR_RDMA_READ ? reads : writes;
            if (lane[serverId] == null) {
                try {
                    lane[serverId] = new WorkRequest(endpoint, opcode);
                } catch (IOException e) {
                    throw new FabricException("could not prepare a work request for memory server " + serverId + ": " + messageOf(e), e);
                }
            }
            return lane[serverId];
        }

        void retireStaging() {
            retired.add(staging);
            staging = new Staging(settings.maxTransfer());
        }

        void release() {
            for (WorkRequest[] lane : List.of(reads, writes)) {
                for (WorkRequest request : lane) {
                    if (request != null) {
                        request.call.free();
                    }
                }
            }
            staging.deregister();
            retired.forEach(Staging::deregister);
        }
    }

    /** A staging buffer and its registration with each protection domain it was used with. */
    private static final class Staging {
        final UnsafeBuffer view;
        private final Map<IbvPd, IbvMr> registrations = new IdentityHashMap<>();

        Staging(int length) {
            this.view = new UnsafeBuffer(BufferUtil.allocateDirectAligned(length, PAGE));
        }

        IbvMr registration(IbvPd pd) {
            IbvMr mr = registrations.get(pd);
            if (mr == null) {
                try {
                    mr = pd.regMr(view.addressOffset(), view.capacity(), IbvMr.IBV_ACCESS_LOCAL_WRITE).execute().free().getMr();
                } catch (IOException e) {
                    throw new FabricException("could not register a staging buffer of " + view.capacity() + " bytes: " + messageOf(e), e);
                }
                registrations.put(pd, mr);
            }
            return mr;
        }

        void deregister() {
            for (IbvMr mr : registrations.values()) {
                try {
                    mr.deregMr().execute().free();
                } catch (IOException e) {
                    LOG.warn("deregistering a staging buffer failed: {}", messageOf(e));
                }
            }
            registrations.clear();
        }
    }

    /** A stateful post-send call for one signaled READ or WRITE with one scatter-gather element, rewritten per use. */
    private static final class WorkRequest {
        final SVCPostSend call;
        private final SVCPostSend.SendWRMod wr;
        private final SVCPostSend.RdmaMod rdma;
        private final SVCPostSend.SgeMod sge;

        WorkRequest(ClientEndpoint endpoint, int opcode) throws IOException {
            LinkedList<IbvSge> sges = new LinkedList<>();
            sges.add(new IbvSge());
            IbvSendWR template = new IbvSendWR();
            template.setSg_list(sges);
            template.setOpcode(opcode);
            template.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
            this.call = endpoint.postSend(List.of(template));
            this.wr = call.getWrMod(0);
            this.rdma = wr.getRdmaMod();
            this.sge = wr.getSgeMod(0);
        }

        void prepare(long wrId, long remoteAddress, int rkey, long localAddress, int length, int lkey) {
            wr.setWr_id(wrId);
            rdma.setRemote_addr(remoteAddress);
            rdma.setRkey(rkey);
            sge.setAddr(localAddress);
            sge.setLength(length);
            sge.setLkey(lkey);
        }
    }

    /**
     * A client's connection to one memory server. DiSNI's connect waits without bound for its connection
     * manager events and ignores the error events, so {@link #connectWithin} interrupts it on an error event or
     * when the connect timeout passes.
     *
     * <p>Concurrency: {@code failure} is written by verb threads and the connection-manager thread, first reason
     * wins in practice and any reason is a true one; the connect fields are guarded by {@code connectLock}.
     */
    static final class ClientEndpoint extends RdmaActiveEndpoint {
        final Semaphore credits;
        volatile String failure;
        private final DisniOneSidedVerbs owner;
        private final Object connectLock = new Object();
        private Thread connecting;
        private String connectFailure;

        ClientEndpoint(RdmaActiveEndpointGroup<ClientEndpoint> group, RdmaCmId id, boolean serverSide, DisniOneSidedVerbs owner,
                       int queueDepth) throws IOException {
            super(group, id, serverSide);
            this.owner = owner;
            this.credits = new Semaphore(queueDepth);
        }

        @Override
        public void dispatchCqEvent(IbvWC wc) {
            owner.complete(wc.getWr_id(), wc.getStatus());
        }

        @Override
        public synchronized void dispatchCmEvent(RdmaCmEvent event) throws IOException {
            int type = event.getEvent();
            if (type == RdmaCmEvent.EventType.RDMA_CM_EVENT_DISCONNECTED.ordinal()) {
                breakWith("the memory server disconnected");
            } else if (isError(type)) {
                String reason = RdmaCmEvent.EventType.values()[type].name() + " (status " + event.getStatus() + ")";
                breakWith(reason);
                abortConnect(reason);
            }
            super.dispatchCmEvent(event);
        }

        /**
         * Closes the connection. DiSNI 2.1 unregisters an active endpoint from its completion-queue processor
         * after releasing it, which fails for a connection that never got a queue pair (a connect that failed):
         * by then the endpoint is released and removed from its group, and there is nothing to unregister, so
         * that failure is dropped.
         */
        @Override
        public void close() throws IOException, InterruptedException {
            boolean hadQueuePair = getQp() != null;
            try {
                super.close();
            } catch (IOException | RuntimeException e) {
                if (hadQueuePair) {
                    throw e;
                }
            }
        }

        void breakWith(String reason) {
            if (failure == null) {
                failure = reason;
            }
        }

        /** Connects, or fails with the connection manager's error event or after {@code timeout}. */
        void connectWithin(InetSocketAddress address, Duration timeout) throws IOException {
            int timeoutMs = (int) timeout.toMillis();
            synchronized (connectLock) {
                connecting = Thread.currentThread();
            }
            CompletableFuture<Void> watchdog = CompletableFuture.runAsync(
                    () -> abortConnect("no connection within " + timeoutMs + " ms"),
                    CompletableFuture.delayedExecutor(timeoutMs, TimeUnit.MILLISECONDS));
            try {
                connect(address, timeoutMs);
            } catch (Exception e) {
                String reason;
                synchronized (connectLock) {
                    reason = connectFailure;
                }
                throw new IOException(reason != null ? reason : messageOf(e), e);
            } finally {
                watchdog.cancel(false);
                boolean aborted;
                synchronized (connectLock) {
                    connecting = null;
                    aborted = connectFailure != null;
                }
                if (aborted) {
                    // abortConnect interrupted this thread to end DiSNI's wait; the interrupt is spent.
                    Thread.interrupted();
                }
            }
        }

        private void abortConnect(String reason) {
            synchronized (connectLock) {
                if (connecting != null && connectFailure == null) {
                    connectFailure = reason;
                    connecting.interrupt();
                }
            }
        }

        private static boolean isError(int type) {
            return type == RdmaCmEvent.EventType.RDMA_CM_EVENT_ADDR_ERROR.ordinal()
                    || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_ROUTE_ERROR.ordinal()
                    || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_CONNECT_ERROR.ordinal()
                    || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_UNREACHABLE.ordinal()
                    || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_REJECTED.ordinal()
                    || type == RdmaCmEvent.EventType.RDMA_CM_EVENT_DEVICE_REMOVAL.ordinal();
        }
    }
}
