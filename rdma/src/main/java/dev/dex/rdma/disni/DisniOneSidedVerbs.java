package dev.dex.rdma.disni;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.ibm.disni.RdmaActiveEndpointGroup;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.SVCPostSend;

import dev.dex.rdma.FabricException;

/**
 * {@link OneSidedVerbs} over DiSNI: one reliable connection (RC queue pair) per memory server, in one
 * {@link RdmaActiveEndpointGroup} whose completion-queue thread hands each completion to the thread that
 * posted the request.
 *
 * <p>Per calling thread ({@link ThreadContext}): a page-aligned staging buffer of
 * {@link DisniSettings#maxTransfer()} bytes, registered once per protection domain for local write; per
 * server and opcode, stateful, reused {@link SVCPostSend} chains of 1 to {@link #MAX_CHAIN} work requests, made
 * on first use, whose ids, remote addresses, rkeys and lengths are rewritten in place before each post; and a
 * {@link CompletionSlot}. A READ lands in the staging buffer and is copied out; a WRITE is copied in first. Each
 * request is signaled and awaited, so one thread's requests take effect in issue order. {@link #postAll} posts
 * several at once ({@link ChainPoster}): each gets its own part of the staging buffer and its own entry of the
 * slot, the requests of one opcode to one server go in chains (one post each), and the thread waits once for the
 * round.
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
    /** Work requests one post carries at most: a chain of one opcode to one server. */
    static final int MAX_CHAIN = 16;
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
    private final ChainPoster poster;

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
        this.poster = new ChainPoster(settings.maxTransfer(), settings.queueDepth(), MAX_CHAIN, verbTimeoutNanos, SPIN_NANOS) {
            @Override
            protected Connection connection(int serverId) {
                return serverId >= 0 && serverId < endpoints.length ? endpoints[serverId] : null;
            }

            @Override
            protected void post(Round round, WorkList work, Connection connection, int serverId, boolean read, long first, int k)
                    throws IOException {
                ((ThreadContext) round).postChain(work, (ClientEndpoint) connection, serverId, read, first, k);
            }
        };
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

    /** Posts the requests in rounds of chains ({@link ChainPoster}), one wait for each round's completions. */
    @Override
    public void postAll(WorkList work) {
        ThreadContext context;
        try {
            context = enter();
        } catch (IllegalStateException closedNow) {
            for (int i = 0; i < work.size(); i++) {
                work.fail(i, closedNow);
            }
            return;
        }
        try {
            poster.postAll(context, work, () -> closed);
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
        WorkRequest request = context.chain(serverId, endpoint, opcode, 1);
        IbvMr staging = context.staging.registration(endpoint.getPd());
        acquireCredit(endpoint, opcode, length, serverId);
        long wrId = context.slot.arm();
        request.prepare(0, wrId, remoteAddress, rkey, staging.getAddr(), length, staging.getLkey());
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
    private final class ThreadContext extends ChainPoster.Round {
        /** Per server, chains of 1 to {@link #MAX_CHAIN} work requests, made on first use. */
        final WorkRequest[][] reads = new WorkRequest[endpoints.length][];
        final WorkRequest[][] writes = new WorkRequest[endpoints.length][];
        final List<Staging> retired = new ArrayList<>();
        Staging staging = new Staging(settings.maxTransfer());
        volatile boolean busy;

        ThreadContext(CompletionSlot slot) {
            super(slot);
        }

        @Override
        UnsafeBuffer staging() {
            return staging.view;
        }

        /** Posts {@code chain[0..k)} of the round as one chain of work requests ({@link ChainPoster#post}). */
        void postChain(WorkList work, ClientEndpoint endpoint, int serverId, boolean read, long first, int k) throws IOException {
            IbvMr registered = staging.registration(endpoint.getPd());
            WorkRequest requests = chain(serverId, endpoint, read ? IbvSendWR.IBV_WR_RDMA_READ : IbvSendWR.IBV_WR_RDMA_WRITE, k);
            for (int c = 0; c < k; c++) {
                int e = chain[c];
                int r = request[e];
                requests.prepare(c, first + e, work.remoteAddress(r), work.rkey(r), registered.getAddr() + at[e], work.length(r),
                        registered.getLkey());
            }
            requests.call.execute();
        }

        /** The chain of {@code length} work requests of {@code opcode} to server {@code serverId}. */
        WorkRequest chain(int serverId, ClientEndpoint endpoint, int opcode, int length) {
            WorkRequest[][] lanes = opcode == IbvSendWR.IBV_WR_RDMA_READ ? reads : writes;
            if (lanes[serverId] == null) {
                lanes[serverId] = new WorkRequest[MAX_CHAIN];
            }
            WorkRequest[] lane = lanes[serverId];
            if (lane[length - 1] == null) {
                try {
                    lane[length - 1] = new WorkRequest(endpoint, opcode, length);
                } catch (IOException e) {
                    throw new FabricException("could not prepare " + length + " work request(s) for memory server " + serverId + ": "
                            + messageOf(e), e);
                }
            }
            return lane[length - 1];
        }

        @Override
        void retireStaging() {
            retired.add(staging);
            staging = new Staging(settings.maxTransfer());
        }

        void release() {
            for (WorkRequest[][] lanes : List.of(reads, writes)) {
                for (WorkRequest[] lane : lanes) {
                    for (WorkRequest request : lane == null ? new WorkRequest[0] : lane) {
                        if (request != null) {
                            request.call.free();
                        }
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

    /**
     * A stateful post-send call for a chain of signaled READs or WRITEs, each with one scatter-gather element, rewritten
     * per use; one post (one doorbell) sends the whole chain.
     */
    private static final class WorkRequest {
        final SVCPostSend call;
        private final SVCPostSend.SendWRMod[] wrs;
        private final SVCPostSend.RdmaMod[] rdmas;
        private final SVCPostSend.SgeMod[] sges;

        WorkRequest(ClientEndpoint endpoint, int opcode, int length) throws IOException {
            List<IbvSendWR> templates = new ArrayList<>(length);
            for (int i = 0; i < length; i++) {
                LinkedList<IbvSge> sgList = new LinkedList<>();
                sgList.add(new IbvSge());
                IbvSendWR template = new IbvSendWR();
                template.setSg_list(sgList);
                template.setOpcode(opcode);
                template.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
                templates.add(template);
            }
            this.call = endpoint.postSend(templates);
            this.wrs = new SVCPostSend.SendWRMod[length];
            this.rdmas = new SVCPostSend.RdmaMod[length];
            this.sges = new SVCPostSend.SgeMod[length];
            for (int i = 0; i < length; i++) {
                wrs[i] = call.getWrMod(i);
                rdmas[i] = wrs[i].getRdmaMod();
                sges[i] = wrs[i].getSgeMod(0);
            }
        }

        /** Rewrites work request {@code index} of the chain. */
        void prepare(int index, long wrId, long remoteAddress, int rkey, long localAddress, int length, int lkey) {
            wrs[index].setWr_id(wrId);
            rdmas[index].setRemote_addr(remoteAddress);
            rdmas[index].setRkey(rkey);
            sges[index].setAddr(localAddress);
            sges[index].setLength(length);
            sges[index].setLkey(lkey);
        }
    }
}
