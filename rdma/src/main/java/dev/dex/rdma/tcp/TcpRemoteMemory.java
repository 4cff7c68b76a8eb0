package dev.dex.rdma.tcp;

import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_CAS;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_FAA;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_FENCE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_HELLO;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_MESSAGE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_READ;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_WRITE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_OK;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.rdma.ChunkAllocator;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.VerbChecks;
import dev.dex.rdma.VerbCounters;

/**
 * {@link RemoteMemory} over the {@code tcp} fabric: each verb is a request to the memory server that holds
 * the address, on one of a few pipelined {@link Connection connections} per server (a calling thread always
 * uses the same one), and the calling thread waits for the answer, so verbs complete before they return and
 * one thread's verbs take effect in issue order, as the contract asks. Reads and writes longer than the
 * maximum transfer go as several requests.
 *
 * <p>Failures: an address outside the region, a misaligned atomic or an unconnected server throws
 * {@link IllegalArgumentException} before anything is sent. A lost connection fails the verbs in flight on it
 * with {@link FabricException}; the next verb on it opens a new connection (and fails likewise if the memory
 * server cannot be reached). A verb without an answer within the verb timeout closes its connection and throws
 * {@link FabricException}: whether it took effect is unknown. A client greets every server with its identity
 * ({@link #clientId()}); once a server has fenced that identity, it closes the client's connections and every
 * later verb to it throws {@link FencedException}.
 *
 * <p>Failover (docs/replication.md): with a failover wait, a read, or a write of bytes only this client writes
 * ({@link dev.dex.rdma.OwnedWrites}), that fails because its server's connection broke waits until the server is
 * {@link #relocate relocated} (its replica group's new primary) and runs once more there. Any other write fails as
 * before: another client may have changed its bytes in between (a released lock word taken again), which a second run
 * would undo. A compare-and-swap, fetch-and-add or message could take effect twice, so it fails as before too.
 *
 * <p>Concurrency: thread-safe. Per-thread state is the thread's {@link VerbCall} and its counter cell. A
 * broken connection is replaced under the server link's lock, so concurrent callers open one replacement.
 */
public final class TcpRemoteMemory implements RemoteMemory, MessageSender {
    private final TcpSettings settings;
    private final IoTransport io;
    private final long latencyNs;
    private final Link[] links;
    private final int[] serverIds;
    private final VerbCounters counters = new VerbCounters();
    private final ChunkAllocator chunkAllocator;
    private final ThreadLocal<VerbCall> calls = ThreadLocal.withInitial(VerbCall::new);
    private final Runnable onClose;
    private final long clientId;
    /** How long a failed read or write waits for its server to be relocated before it fails (0: it fails at once). */
    private final long failoverWaitNanos;
    private volatile boolean closed;

    /**
     * Connects to every server and greets it; throws {@link IllegalArgumentException} naming the server that
     * cannot be reached or that answers as another server.
     */
    TcpRemoteMemory(Map<Integer, InetSocketAddress> addresses, TcpSettings settings, IoTransport io, long latencyNs, long clientId,
                    java.time.Duration failoverWait, Runnable onClose) {
        this.settings = settings;
        this.failoverWaitNanos = failoverWait.toNanos();
        this.clientId = clientId;
        this.io = io;
        this.latencyNs = latencyNs;
        this.onClose = onClose;
        TreeMap<Integer, InetSocketAddress> sorted = new TreeMap<>(addresses);
        int max = sorted.isEmpty() ? -1 : sorted.lastKey();
        this.links = new Link[max + 1];
        this.serverIds = sorted.keySet().stream().mapToInt(Integer::intValue).toArray();
        long[] regionLengths = new long[max + 1];
        long[] chunkLengths = new long[max + 1];
        List<Link> opened = new ArrayList<>();
        try {
            for (Map.Entry<Integer, InetSocketAddress> entry : sorted.entrySet()) {
                Link link = new Link(entry.getKey(), entry.getValue());
                opened.add(link);
                links[entry.getKey()] = link;
                regionLengths[entry.getKey()] = link.regionLength;
                chunkLengths[entry.getKey()] = link.chunkLength;
            }
        } catch (RuntimeException e) {
            opened.forEach(Link::close);
            throw e instanceof FabricException && !(e instanceof FencedException) ? new IllegalArgumentException(e.getMessage(), e) : e;
        }
        this.chunkAllocator = new ChunkAllocator(this::fetchAndAdd, regionLengths, chunkLengths);
    }

    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        transfer(OP_READ, address, dst, null, dstOffset, length);
        counters.recordRead(length);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        transfer(OP_WRITE, address, null, src, srcOffset, length);
        counters.recordWrite(length);
    }

    /** A read into {@code dst} or a write from {@code src}, as requests of at most the maximum transfer each. */
    private void transfer(byte op, long address, MutableDirectBuffer dst, DirectBuffer src, int bufferOffset, int length) {
        Link link = linkOf(address, length);
        // Checked here: the event loop copies into and out of these buffers after the caller handed them over.
        (dst != null ? dst : src).boundsCheck(bufferOffset, length);
        VerbChecks.spin(latencyNs);
        long offset = GlobalAddress.offset(address);
        int done = 0;
        do {
            int n = Math.min(length - done, link.maxTransfer);
            int relocations = link.relocations;
            try {
                transferPart(op, link, offset + done, n, dst, src, bufferOffset + done);
            } catch (FabricException failed) {
                if (op == OP_WRITE && !dev.dex.rdma.OwnedWrites.active() || !awaitFailover(link, relocations, failed)) {
                    throw failed;
                }
                // Relocated to the group's new primary: a read, or a write of bytes only this client writes, runs again.
                transferPart(op, link, offset + done, n, dst, src, bufferOffset + done);
            }
            done += n;
        } while (done < length);
    }

    private void transferPart(byte op, Link link, long offset, int n, MutableDirectBuffer dst, DirectBuffer src, int bufferOffset) {
        VerbCall call = call();
        call.prepare(op, GlobalAddress.of(link.serverId, offset), n, 0, 0);
        call.dst = dst;
        call.src = src;
        call.srcOffset = bufferOffset;
        call.dstOffset = bufferOffset;
        run(link, call);
    }

    /**
     * Puts every verb of the batch on its server's connection at once: the thread's verbs for one connection go out with
     * one flush (the first rings the doorbell, the rest find it rung), and the caller waits once, for the batch. Verbs
     * longer than the largest transfer run alone when the batch is awaited. The injected latency is paid once. A verb
     * that cannot be sent (a bad address or buffer) fails alone.
     */
    @Override
    public void start(VerbBatch batch) {
        InFlight inFlight = batch.transportState() instanceof InFlight mine && mine.owner() == this
                && mine.thread == Thread.currentThread() ? mine : new InFlight();
        batch.pending(inFlight); // throws for a batch already started: before anything of the calls is touched
        batch.transportState(inFlight);
        inFlight.begin(batch.size());
        if (batch.isEmpty()) {
            return;
        }
        VerbChecks.spin(latencyNs);
        for (int slot = 0; slot < batch.size(); slot++) {
            if (batch.completed(slot)) {
                continue;
            }
            byte op = batch.op(slot);
            try {
                boolean word = op == VerbBatch.COMPARE_AND_SWAP || op == VerbBatch.FETCH_AND_ADD;
                Link link = word ? wordLinkOf(batch.address(slot)) : linkOf(batch.address(slot), batch.length(slot));
                inFlight.links[slot] = link;
                inFlight.relocations[slot] = link.relocations;
                if (!word) {
                    (op == VerbBatch.READ ? batch.destination(slot) : batch.source(slot))
                            .boundsCheck(batch.bufferOffset(slot), batch.length(slot));
                    if (batch.length(slot) > link.maxTransfer) {
                        continue; // runs alone at the await, as several requests
                    }
                }
                VerbCall call = inFlight.call(slot);
                call.prepare(batch, slot);
                Connection connection = link.connection();
                inFlight.connections[slot] = connection;
                // Each call's deadline from its own submission: a reconnect above may have taken a while.
                long deadline = System.nanoTime() + settings.verbTimeout().toNanos();
                inFlight.deadlines[slot] = deadline;
                connection.submit(call, deadline);
                inFlight.submitted[slot] = true;
            } catch (FabricException failed) {
                inFlight.failures[slot] = failed; // a read may still run again once its server is relocated
            } catch (RuntimeException refused) {
                batch.fail(slot, refused); // a bad address or buffer: this verb alone, nothing of it was sent
            }
        }
    }

    /**
     * The batch's calls, one per verb, owned by the thread that started it; calls abandoned after a timeout are replaced.
     * At the await, each verb's outcome is what the single verb's would be: a read that failed in the transport (its
     * connection broke or timed out) waits for its server's relocation within the failover wait, as {@link #transfer}
     * does, and runs once more there; a write or an atomic fails; a server that was not relocated within the wait is
     * waited for once per batch, not once per read.
     */
    private final class InFlight implements VerbBatch.Pending {
        final Thread thread = Thread.currentThread();
        VerbCall[] calls = new VerbCall[0];
        Link[] links = new Link[0];
        Connection[] connections = new Connection[0];
        int[] relocations = new int[0];
        long[] deadlines = new long[0];
        boolean[] submitted = new boolean[0];
        FabricException[] failures = new FabricException[0];

        TcpRemoteMemory owner() {
            return TcpRemoteMemory.this;
        }

        void begin(int n) {
            if (calls.length < n) {
                calls = java.util.Arrays.copyOf(calls, n);
                links = new Link[n];
                connections = new Connection[n];
                relocations = new int[n];
                deadlines = new long[n];
                submitted = new boolean[n];
                failures = new FabricException[n];
            }
            java.util.Arrays.fill(links, null);
            java.util.Arrays.fill(connections, null);
            java.util.Arrays.fill(submitted, false);
            java.util.Arrays.fill(failures, null);
        }

        VerbCall call(int slot) {
            VerbCall call = calls[slot];
            if (call == null || call.isAbandoned()) {
                call = new VerbCall();
                calls[slot] = call;
            }
            return call;
        }

        @Override
        public void await(VerbBatch batch) {
            // Every call is waited for before anything runs again, so no call of the batch is still in flight then.
            for (int slot = 0; slot < batch.size(); slot++) {
                if (submitted[slot] && !batch.completed(slot)) {
                    failures[slot] = outcome(batch, slot);
                }
            }
            java.util.List<Link> notRelocated = null;
            for (int slot = 0; slot < batch.size(); slot++) {
                if (batch.completed(slot)) {
                    continue;
                }
                Link link = links[slot];
                FabricException failed = failures[slot];
                if (failed == null) {
                    batch.runOne(TcpRemoteMemory.this, slot); // longer than one transfer: alone, as a single verb
                    continue;
                }
                boolean waitedOut = notRelocated != null && notRelocated.contains(link);
                // A write of a batch is never an owned write (OwnedWrites): like a single write, it does not run twice.
                if (batch.op(slot) != VerbBatch.READ || waitedOut || !awaitFailover(link, relocations[slot], failed)) {
                    if (batch.op(slot) == VerbBatch.READ && !waitedOut) {
                        notRelocated = notRelocated == null ? new java.util.ArrayList<>(2) : notRelocated;
                        notRelocated.add(link);
                    }
                    batch.fail(slot, lostOr(link, failed));
                    continue;
                }
                try {
                    // Relocated to the group's new primary: the read runs once more there, as a single read does.
                    transferPart(OP_READ, link, GlobalAddress.offset(batch.address(slot)), batch.length(slot),
                            batch.destination(slot), null, batch.bufferOffset(slot));
                    counters.recordRead(batch.length(slot));
                    batch.complete(slot, 0);
                } catch (RuntimeException e) {
                    batch.fail(slot, e);
                }
            }
        }

        /**
         * Waits for the call in {@code slot}: completes the batch's verb, or fails it when the server refused it, or
         * returns its transport failure (a broken connection, a timeout, a replica that does not serve clients).
         */
        private FabricException outcome(VerbBatch batch, int slot) {
            VerbCall call = calls[slot];
            RuntimeException failed = awaitOutcome(links[slot], connections[slot], call, deadlines[slot]);
            if (failed instanceof FabricException transport) {
                return transport;
            }
            if (failed != null) {
                batch.fail(slot, failed);
                return null;
            }
            switch (call.op) {
                case OP_READ -> counters.recordRead(call.count);
                case OP_WRITE -> counters.recordWrite(call.count);
                default -> counters.recordAtomic();
            }
            batch.complete(slot, call.value);
            return null;
        }
    }

    /**
     * Whether a read or write that failed with {@code failed} may run again: its server was relocated since the verb
     * began (at {@code relocations}), or is within the failover wait. A fenced client, a closed memory and a client
     * without a failover wait fail at once.
     */
    private boolean awaitFailover(Link link, int relocations, FabricException failed) {
        if (failoverWaitNanos == 0 || failed instanceof FencedException || closed || link.lost != null) {
            return false;
        }
        return link.awaitRelocation(relocations, failoverWaitNanos);
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        Link link = wordLinkOf(address);
        VerbChecks.spin(latencyNs);
        VerbCall call = call();
        call.prepare(OP_CAS, address, 0, expected, desired);
        run(link, call);
        counters.recordAtomic();
        return call.value;
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        Link link = wordLinkOf(address);
        VerbChecks.spin(latencyNs);
        VerbCall call = call();
        call.prepare(OP_FAA, address, 0, delta, 0);
        run(link, call);
        counters.recordAtomic();
        return call.value;
    }

    /** The verb timeout: a message waits for its answer as long as a verb does. */
    @Override
    public java.time.Duration timeout() {
        return settings.verbTimeout();
    }

    /**
     * Sends a two-sided message to the memory server's {@link MessageHandler} on the thread's connection, in
     * order with its verbs. Counted by the caller (the engine records each offload as a two-sided verb).
     */
    @Override
    public int send(int serverId, DirectBuffer message, int offset, int length, MutableDirectBuffer reply, int replyOffset) {
        if (length < 0 || length > MessageHandler.MAX_MESSAGE) {
            throw new IllegalArgumentException("a message has 0.." + MessageHandler.MAX_MESSAGE + " bytes, not " + length);
        }
        long address = GlobalAddress.of(serverId, 0);
        Link link = VerbChecks.server(links, address, closed);
        message.boundsCheck(offset, length);
        reply.boundsCheck(replyOffset, 0);
        VerbChecks.spin(latencyNs);
        VerbCall call = call();
        call.prepare(OP_MESSAGE, address, length, 0, 0);
        call.src = message;
        call.srcOffset = offset;
        call.dst = reply;
        call.dstOffset = replyOffset;
        run(link, call);
        return (int) call.value;
    }

    @Override
    public long clientId() {
        return clientId;
    }

    /**
     * Sends FENCE for {@code client} to every connected memory server, one after the other; each answers once
     * that client's connections to it are closed.
     */
    @Override
    public boolean fence(long client) {
        if (client == 0 || client == clientId) {
            throw new IllegalArgumentException(client == 0 ? "client 0 (anonymous) cannot be fenced" : "a client cannot fence itself");
        }
        for (int serverId : serverIds) {
            Link link = links[serverId];
            VerbCall call = call();
            call.prepare(OP_FENCE, GlobalAddress.of(serverId, 0), 0, client, 0);
            run(link, call);
            counters.recordTwoSided(0);
        }
        return true;
    }

    @Override
    public boolean relocate(int serverId, String endpoint) {
        if (serverId < 0 || serverId >= links.length || links[serverId] == null) {
            throw new IllegalArgumentException("memory server " + serverId + " is not connected to this client");
        }
        if (closed) {
            throw new IllegalStateException("remote memory is closed");
        }
        InetSocketAddress moved = TcpEndpoint.parse(serverId, endpoint);
        InetSocketAddress current = links[serverId].address;
        if (moved.getHostString().equals(current.getHostString()) && moved.getPort() == current.getPort()) {
            return false; // not moved: no need to wait for the link's lock, which a reconnect may hold for a while
        }
        return links[serverId].relocate(moved);
    }

    @Override
    public void markLost(int serverId, String why) {
        if (serverId < 0 || serverId >= links.length || links[serverId] == null) {
            throw new IllegalArgumentException("memory server " + serverId + " is not connected to this client");
        }
        links[serverId].lost = why;
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
        if (closed) {
            return;
        }
        closed = true;
        for (Link link : links) {
            if (link != null) {
                link.close();
            }
        }
        onClose.run();
    }

    /** The calling thread's call; a call abandoned after a timeout is replaced, never reused. */
    private VerbCall call() {
        VerbCall call = calls.get();
        if (call.isAbandoned()) {
            call = new VerbCall();
            calls.set(call);
        }
        return call;
    }

    private void run(Link link, VerbCall call) {
        try {
            runOnce(link, call);
        } catch (FabricException failed) {
            throw lostOr(link, failed);
        }
    }

    /** {@code failed}, or a {@link dev.dex.rdma.MemoryServerLostException} saying so when its server is marked lost. */
    private static FabricException lostOr(Link link, FabricException failed) {
        String lost = link.lost;
        if (lost == null || failed instanceof FencedException) {
            return failed;
        }
        return new dev.dex.rdma.MemoryServerLostException(lost + " (" + failed.getMessage() + ")", failed);
    }

    private void runOnce(Link link, VerbCall call) {
        Connection connection = link.connection();
        long deadline = System.nanoTime() + settings.verbTimeout().toNanos();
        connection.submit(call, deadline);
        RuntimeException failed = awaitOutcome(link, connection, call, deadline);
        if (failed != null) {
            throw failed;
        }
    }

    /**
     * Waits for {@code call}'s answer until {@code deadline}. Returns null when the verb was applied; a
     * {@link FabricException} when the transport failed it (no answer in time: the connection is closed and the verb may
     * or may not have taken effect; a broken connection; a replica that does not serve clients); an
     * {@link IllegalArgumentException} when the server refused it.
     */
    private RuntimeException awaitOutcome(Link link, Connection connection, VerbCall call, long deadline) {
        if (!call.await(settings.spinNanos(), deadline)) {
            FabricException timeout = new FabricException("memory server " + link.serverId + " at " + connection.endpoint()
                    + " did not answer a " + TcpFrameDescriptor.opName(call.op) + " within " + settings.verbTimeout().toMillis()
                    + " ms; the connection is closed and the verb may or may not have taken effect");
            connection.breakWith(timeout);
            return timeout;
        }
        if (call.failure != null) {
            return Connection.copy(call.failure);
        }
        if (call.status == TcpFrameDescriptor.STATUS_NOT_PRIMARY) {
            return notPrimary(connection, call);
        }
        if (call.status != STATUS_OK) {
            return new IllegalArgumentException("memory server " + link.serverId + " refused a " + TcpFrameDescriptor.opName(call.op)
                    + ": " + call.reason);
        }
        return null;
    }

    /**
     * A replica that does not serve clients (a backup, or a primary that was replaced) answered: the verb did not take
     * effect there, and the memory server's primary is elsewhere ({@link #relocate} points this client at it).
     */
    private static FabricException notPrimary(Connection connection, VerbCall call) {
        FabricException failure = new FabricException("memory server " + connection.serverId() + " at " + connection.endpoint()
                + " does not serve clients: " + call.reason);
        connection.breakWith(failure);
        return failure;
    }

    private Link linkOf(long address, int length) {
        Link link = VerbChecks.server(links, address, closed);
        VerbChecks.range(address, length, link.regionLength);
        return link;
    }

    private Link wordLinkOf(long address) {
        Link link = linkOf(address, Long.BYTES);
        VerbChecks.aligned(address);
        return link;
    }

    /** The connections to one memory server, opened at connect and replaced when they break. */
    private final class Link {
        final int serverId;
        /** Where the server answers; replaced by {@link #relocate}, under the link's lock. */
        volatile InetSocketAddress address;
        /** How often it was relocated; waited on under the link's lock. */
        volatile int relocations;
        /** Why the server is lost ({@link #markLost}), or null. */
        volatile String lost;
        final AtomicReferenceArray<Connection> connections;
        final long regionLength;
        final long chunkLength;
        /** The largest transfer both sides take: the smaller of this client's and the server's max-transfer. */
        final int maxTransfer;
        /** The region's incarnation at the first greeting; a reconnect must find the same one. */
        final long incarnation;

        Link(int serverId, InetSocketAddress address) {
            this.serverId = serverId;
            this.address = address;
            this.connections = new AtomicReferenceArray<>(settings.connectionsPerServer());
            long[] greeting = null;
            for (int i = 0; i < settings.connectionsPerServer(); i++) {
                try {
                    Connection connection = Connection.open(serverId, address, settings, io);
                    connections.set(i, connection);
                    greeting = hello(connection);
                } catch (RuntimeException e) {
                    close();
                    throw e;
                }
            }
            this.regionLength = greeting[0];
            this.chunkLength = greeting[1];
            long serverMax = greeting[2];
            this.maxTransfer = serverMax <= 0 ? settings.maxTransfer() : (int) Math.min(settings.maxTransfer(), serverMax);
            this.incarnation = greeting[3];
        }

        /** The calling thread's connection, reopened first if it broke. */
        Connection connection() {
            int index = (int) (Thread.currentThread().getId() % connections.length());
            Connection connection = connections.get(index);
            if (connection.broken() == null) {
                return connection;
            }
            synchronized (this) {
                connection = connections.get(index);
                if (connection.broken() != null) {
                    if (closed) {
                        throw new IllegalStateException("remote memory is closed");
                    }
                    connection = Connection.open(serverId, this.address, settings, io);
                    long found = hello(connection)[3];
                    if (found != incarnation) {
                        // Not the memory this client's addresses and cached pages refer to: a memory node that
                        // restarted without its data. Using it would read and write another tree.
                        FabricException other = new FabricException("memory server " + serverId + " at " + connection.endpoint()
                                + " serves another region than the one this client connected to (incarnation "
                                + Long.toHexString(found) + ", not " + Long.toHexString(incarnation)
                                + "): it restarted without its data; this client must be restarted");
                        connection.breakWith(other);
                        throw other;
                    }
                    connections.set(index, connection);
                }
                return connection;
            }
        }

        /**
         * Greets the server on {@code connection}: checks that it is {@code serverId}; returns region length, chunk
         * length and the server's largest transfer (0 if it did not say). Uses a call of its own: a reconnect happens in the middle of the thread's current verb.
         */
        private long[] hello(Connection connection) {
            VerbCall call = new VerbCall();
            call.prepare(OP_HELLO, GlobalAddress.of(serverId, 0), 0, clientId, 0);
            long deadline = System.nanoTime() + settings.connectTimeout().toNanos();
            connection.submit(call, deadline);
            if (!call.await(settings.spinNanos(), deadline)) {
                connection.breakWith(new FabricException("no greeting"));
                throw new FabricException("memory server " + serverId + " at " + connection.endpoint() + " did not answer the greeting within "
                        + settings.connectTimeout().toMillis() + " ms");
            }
            if (call.failure != null) {
                throw Connection.copy(call.failure);
            }
            if (call.status == TcpFrameDescriptor.STATUS_NOT_PRIMARY) {
                throw notPrimary(connection, call);
            }
            if (call.status != STATUS_OK) {
                connection.breakWith(new FabricException("wrong server"));
                throw new IllegalArgumentException("endpoint " + connection.endpoint() + " refused memory server " + serverId + ": " + call.reason);
            }
            return new long[] {call.value, call.extra, call.extra2, call.extra3};
        }

        /** Points the link at {@code moved}; the connections to the old address are broken, so the next verb reconnects. */
        synchronized boolean relocate(InetSocketAddress moved) {
            if (moved.getHostString().equals(address.getHostString()) && moved.getPort() == address.getPort()) {
                return false;
            }
            InetSocketAddress old = address;
            address = moved;
            lost = null;
            for (int i = 0; i < connections.length(); i++) {
                Connection connection = connections.get(i);
                if (connection != null) {
                    connection.breakWith(new FabricException("memory server " + serverId + " moved from "
                            + TcpEndpoint.format(old.getHostString(), old.getPort()) + " to "
                            + TcpEndpoint.format(moved.getHostString(), moved.getPort())));
                }
            }
            // Counted after the old connections are broken: a verb that saw this count cannot still be on one of them.
            relocations++;
            notifyAll();
            return true;
        }

        /** Waits up to {@code nanos} until this link was relocated since {@code seen}; true when it was. */
        synchronized boolean awaitRelocation(int seen, long nanos) {
            long deadline = System.nanoTime() + nanos;
            while (relocations == seen && !closed) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    wait(left / 1_000_000, (int) (left % 1_000_000));
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return relocations != seen && !closed;
        }

        synchronized void close() {
            notifyAll(); // a verb waiting for a relocation fails now
            for (int i = 0; i < connections.length(); i++) {
                Connection connection = connections.get(i);
                if (connection != null) {
                    connection.breakWith(new FabricException("remote memory is closed"));
                }
            }
        }
    }
}
