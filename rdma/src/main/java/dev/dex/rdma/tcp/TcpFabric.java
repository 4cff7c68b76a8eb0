package dev.dex.rdma.tcp;

import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionFormat;
import dev.dex.rdma.RemoteMemory;

/**
 * The {@code tcp} transport: a memory node keeps its region in its own off-heap memory and serves reads,
 * writes, compare-and-swap and fetch-and-add on it over TCP ({@link TcpFrameDescriptor}), from Netty event
 * loops (native epoll on Linux, NIO elsewhere); compute nodes connect to the {@code host:port} a memory
 * node advertises. This is how memory leaves the host where there is no RDMA: every verb costs a network
 * round trip, answered by the memory node's CPU, so verbs are not one-sided in the RDMA sense, but they
 * keep the same contract (completion before return, issue order per thread, atomic 8-byte words).
 *
 * <p>One fabric object owns one group of event-loop threads shared by the regions it exports and the
 * clients it connects; {@link #close()} closes all of them. {@link #connect(int...)} reaches the regions
 * this object exported; other processes use {@link #connect(Map)} with the advertised endpoints.
 *
 * <p>Concurrency: export, close and the region registry synchronize on the fabric; connect only reads the
 * registry under the lock and opens its connections outside it. Clients are tracked in a concurrent set so
 * {@link #close()} can close them.
 */
public final class TcpFabric implements Fabric {
    private final TcpSettings settings;
    private final ReplicaSettings replication;
    private final long latencyNs;
    private final IoTransport io;
    private final Map<Integer, TcpRegion> exported = new HashMap<>();
    private final Set<TcpRemoteMemory> clients = ConcurrentHashMap.newKeySet();
    /** Where {@link #attach} keeps regions in files across restarts; null: regions live in this process. */
    private final dev.dex.rdma.shm.ShmFabric files;
    private boolean closed;

    /** A fabric with the default settings (loopback, a free port) and no injected latency. */
    public TcpFabric() {
        this(TcpSettings.DEFAULTS, 0);
    }

    /**
     * @param settings  where regions are served and how clients reach them
     * @param latencyNs latency spun by the client before every verb, on top of the network's; 0 for none
     */
    public TcpFabric(TcpSettings settings, long latencyNs) {
        this(settings, latencyNs, null);
    }

    /**
     * @param regionDirectory where {@link #attach} keeps each region in a memory-mapped file
     *                        ({@code region-<id>.dex}, as the shm fabric does), so a memory node that restarts
     *                        reattaches to its data; null to keep regions in this process's memory
     */
    public TcpFabric(TcpSettings settings, long latencyNs, java.nio.file.Path regionDirectory) {
        this(settings, latencyNs, regionDirectory, null);
    }

    /**
     * @param tls mutual TLS for every connection this fabric object serves or opens ({@link TcpTls}); null for
     *            plain TCP. A TLS fabric and a plain one cannot talk to each other.
     */
    public TcpFabric(TcpSettings settings, long latencyNs, java.nio.file.Path regionDirectory, TcpTls tls) {
        // No replica groups here: a client's verb fails at once when its connection breaks.
        this(settings, ReplicaSettings.DEFAULTS.withFailoverWait(java.time.Duration.ZERO), latencyNs, regionDirectory, tls);
    }

    /** @param replication how the regions this fabric object exports replicate when they join a replica group */
    public TcpFabric(TcpSettings settings, ReplicaSettings replication, long latencyNs, java.nio.file.Path regionDirectory,
                     TcpTls tls) {
        this.replication = Objects.requireNonNull(replication, "replication");
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        this.settings = Objects.requireNonNull(settings, "settings");
        this.latencyNs = latencyNs;
        this.files = regionDirectory == null ? null : new dev.dex.rdma.shm.ShmFabric(regionDirectory);
        this.regionDirectory = regionDirectory;
        this.io = IoTransport.create(settings.ioThreads(), tls);
    }

    @Override
    public String transport() {
        return "tcp";
    }

    /** {@code epoll} or {@code nio}: the event loops in use. */
    public String ioTransport() {
        return io.name();
    }

    public TcpSettings settings() {
        return settings;
    }

    /**
     * Exports a fresh region and starts serving it at the settings' host and port (a free port when 0);
     * {@link ExportedRegion#endpoint()} says where. Throws {@link IllegalArgumentException} for bad lengths, a
     * server id already exported here, or an address that cannot be bound.
     */
    @Override
    public synchronized ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        if (closed) {
            throw new IllegalStateException("the tcp fabric is closed");
        }
        if (exported.containsKey(serverId)) {
            throw new IllegalArgumentException("memory server " + serverId + " already exported on this tcp fabric");
        }
        Region region = Region.offHeap(regionLength);
        RegionFormat.format(region, chunkLength);
        TcpRegion tcpRegion = new TcpRegion(serverId, region,
                RegionServer.start(serverId, region, chunkLength, settings, replication, io, null, ReplicaFile.inMemory(serverId)), null);
        exported.put(serverId, tcpRegion);
        return tcpRegion;
    }

    /**
     * With a region directory: reattaches to the region file a previous memory node of this server id left
     * there (or makes one), under its lock file, and serves it; {@link ExportedRegion#detach()} keeps the file.
     * Without one, the same as {@link #export}: the region lives in this process and a restart starts empty.
     */
    @Override
    public synchronized ExportedRegion attach(int serverId, long regionLength, int chunkLength) {
        if (files == null) {
            return export(serverId, regionLength, chunkLength);
        }
        return serveFile(serverId, regionLength, chunkLength, false);
    }

    /**
     * With a region directory: takes the server id's lock file, replaces its region file with a fresh one and
     * serves that, so the format is what the next {@link #attach} finds; a server id another memory node serves
     * from the directory is refused before its file is touched. Without one, the same as {@link #export}.
     */
    @Override
    public synchronized ExportedRegion reformat(int serverId, long regionLength, int chunkLength) {
        if (files == null) {
            return export(serverId, regionLength, chunkLength);
        }
        return serveFile(serverId, regionLength, chunkLength, true);
    }

    /** The region directory (null: regions live in this process); the fenced clients are kept there too. */
    private final java.nio.file.Path regionDirectory;

    /** Serves the region file of {@code serverId} in the region directory, reattached or (when {@code fresh}) formatted. */
    private ExportedRegion serveFile(int serverId, long regionLength, int chunkLength, boolean fresh) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        if (closed) {
            throw new IllegalStateException("the tcp fabric is closed");
        }
        if (exported.containsKey(serverId)) {
            throw new IllegalStateException("memory server " + serverId + " already exported on this tcp fabric");
        }
        ExportedRegion backing = fresh ? files.reformat(serverId, regionLength, chunkLength)
                : files.attach(serverId, regionLength, chunkLength);
        RegionServer server;
        try {
            // The compute nodes this server fenced stay fenced across its restarts; a format starts a new region,
            // which no earlier client can use anyway (another incarnation), and a new list.
            java.nio.file.Path fences = regionDirectory.resolve("fenced-" + serverId + ".txt");
            if (fresh || backing.fresh()) {
                java.nio.file.Files.deleteIfExists(fences);
            }
            // Its part in a replica group, kept with it: a fresh region starts a new record (docs/replication.md).
            dev.dex.rdma.Region kept = backing.region();
            ReplicaFile record = ReplicaFile.open(serverId, regionDirectory.resolve("replica-" + serverId + ".properties"),
                    fresh || backing.fresh(), () -> dev.dex.rdma.RegionFormat.incarnation(kept));
            server = RegionServer.start(serverId, backing.region(), chunkLength, settings, replication, io, fences, record);
        } catch (java.io.IOException e) {
            backing.detach();
            throw new java.io.UncheckedIOException("memory server " + serverId + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            backing.detach();
            throw e;
        }
        TcpRegion tcpRegion = new TcpRegion(serverId, backing.region(), server, backing);
        exported.put(serverId, tcpRegion);
        return tcpRegion;
    }

    /**
     * Lets clients send two-sided messages to memory server {@code serverId}, exported here, which the region
     * server's event loops hand to {@code handler} (they are its memory-side threads).
     */
    public synchronized void handleMessages(int serverId, MessageHandler handler) {
        TcpRegion region = exported.get(serverId);
        if (region == null) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region on this tcp fabric");
        }
        region.server.handleMessages(handler);
    }

    /**
     * Runs {@code revoke} for every client memory server {@code serverId}, exported here, fences from now on
     * (by {@link #fence} or a client's FENCE), after that client's connections are closed and before the fence
     * completes; a {@code revoke} that throws makes the fence fail. The {@code disni} fabric revokes the
     * client's RDMA keys this way.
     */
    public synchronized void whenFenced(int serverId, java.util.function.LongConsumer revoke) {
        TcpRegion region = exported.get(serverId);
        if (region == null) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region on this tcp fabric");
        }
        region.server.whenFenced(java.util.Objects.requireNonNull(revoke, "revoke"));
    }

    /** Connects to regions this fabric object exported. */
    @Override
    public RemoteMemory connect(int... serverIds) {
        if (serverIds.length == 0) {
            throw new IllegalArgumentException("connect needs at least one memory server id");
        }
        Map<Integer, String> endpoints = new LinkedHashMap<>();
        synchronized (this) {
            for (int id : serverIds) {
                TcpRegion region = exported.get(id);
                if (region == null) {
                    throw new IllegalArgumentException("memory server " + id + " has not exported a region on this tcp fabric;"
                            + " connect to another process's region with its endpoint");
                }
                endpoints.put(id, region.endpoint());
            }
        }
        return connect(endpoints);
    }

    /**
     * Connects to memory servers at their advertised {@code host:port} endpoints, greeting each to check that
     * it is the server it claims to be. Throws {@link IllegalArgumentException} for a malformed endpoint or a
     * server that cannot be reached within the connect timeout.
     */
    @Override
    public RemoteMemory connect(Map<Integer, String> endpoints) {
        return connect(endpoints, 0);
    }

    /**
     * As {@link #connect(Map)}, greeting each memory server as client {@code clientId}: the identity a memory
     * server can fence (0: anonymous, cannot be fenced). Throws {@link dev.dex.rdma.FencedException} when a
     * memory server has fenced that identity already.
     */
    @Override
    public RemoteMemory connect(Map<Integer, String> endpoints, long clientId) {
        if (endpoints.isEmpty()) {
            throw new IllegalArgumentException("connect needs at least one memory server id");
        }
        Map<Integer, InetSocketAddress> addresses = new HashMap<>();
        for (Map.Entry<Integer, String> entry : endpoints.entrySet()) {
            int id = entry.getKey();
            if (id < 0 || id > GlobalAddress.MAX_SERVER_ID) {
                throw new IllegalArgumentException("memory server id " + id + " outside [0, " + GlobalAddress.MAX_SERVER_ID + "]");
            }
            addresses.put(id, TcpEndpoint.parse(id, entry.getValue()));
        }
        synchronized (this) {
            if (closed) {
                throw new IllegalArgumentException("the tcp fabric is closed");
            }
        }
        TcpRemoteMemory[] client = new TcpRemoteMemory[1];
        client[0] = new TcpRemoteMemory(addresses, settings, io, latencyNs, clientId, replication.failoverWait(),
                () -> clients.remove(client[0]));
        synchronized (this) {
            if (!closed) {
                clients.add(client[0]);
                return client[0];
            }
        }
        // The fabric closed while this client connected; it would outlive its event loops.
        client[0].close();
        throw new IllegalArgumentException("the tcp fabric is closed");
    }

    /**
     * Fences client {@code clientId} on memory server {@code serverId}, exported here: closes its connections,
     * waits until they are closed (nothing more of that client is applied) and refuses its greeting from now on.
     */
    @Override
    public java.util.Set<Long> connectedClients(int serverId) {
        TcpRegion region;
        synchronized (this) {
            region = exported.get(serverId);
        }
        return region == null ? java.util.Set.of() : region.server.connectedClients();
    }

    @Override
    public java.util.Map<Long, Long> hungUpClients(int serverId) {
        TcpRegion region;
        synchronized (this) {
            region = exported.get(serverId);
        }
        // A replica that does not serve clients (a backup, one replaced or waiting) dropped them itself: no hang-up counts.
        return region == null || region.server.replica.clientRefusal() != null ? java.util.Map.of()
                : region.server.fences.hungUpClients();
    }

    @Override
    public boolean fence(int serverId, long clientId) {
        if (clientId == 0) {
            throw new IllegalArgumentException("client 0 (anonymous) cannot be fenced");
        }
        TcpRegion region;
        synchronized (this) {
            region = exported.get(serverId);
        }
        if (region == null) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region on this tcp fabric");
        }
        region.server.fence(clientId);
        return true;
    }

    /**
     * Whether memory server {@code serverId}, exported here, fenced {@code clientId}. Only tests ask (the fence
     * tests of rdma and index-core); a node learns that a fence is in place from {@link #fence} returning.
     */
    public synchronized boolean isFenced(int serverId, long clientId) {
        TcpRegion region = exported.get(serverId);
        return region != null && region.server.isFenced(clientId);
    }

    @Override
    public void close() {
        List<TcpRegion> regions;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            regions = List.copyOf(exported.values());
        }
        for (TcpRemoteMemory client : List.copyOf(clients)) {
            client.close();
        }
        for (TcpRegion region : regions) {
            region.close();
        }
        if (files != null) {
            files.close();
        }
        io.shutdown();
    }

    // ---- replica groups (docs/replication.md): whoever keeps the group map tells each replica its part

    /** What memory server {@code serverId}'s replica, exported here, says of itself. */
    public ReplicaStatus replicaStatus(int serverId) {
        return server(serverId).replica.status();
    }

    /**
     * Makes the replica of {@code serverId} exported here a backup in view {@code view}: it refuses clients (those
     * connected are closed) and takes a primary's stream; its region counts for nothing until that primary copied it
     * or found it holding the stream's prefix.
     *
     * @throws IllegalStateException for a primary, or a replica in a newer view
     */
    public void becomeBackup(int serverId, long view) {
        server(serverId).replica.becomeBackup(view);
    }

    /**
     * Makes the replica of {@code serverId} exported here the primary of view {@code view}, streaming to the backups at
     * {@code backups} (their endpoints). A replica that was not in a group starts a new stream (its backups are
     * copied); a backup must be complete and continues its stream, after waiting out its old primary's lease.
     *
     * @throws IllegalStateException for a backup whose copy is not complete, a primary, or a replaced primary
     */
    public void becomePrimary(int serverId, long view, java.util.List<String> backups) {
        server(serverId).replica.becomePrimary(view, backups);
    }

    /**
     * Makes the sole replica of {@code serverId} exported here refuse clients until {@link #becomePrimary} or
     * {@link #becomeBackup}: a memory node of a replicated server starts so, since a kept region may be older than what
     * its group has answered since.
     */
    public void standBy(int serverId) {
        server(serverId).replica.standBy();
    }

    /** A primary's new view with exactly {@code backups}: missing ones join (copied if need be), others are dropped. */
    public void installView(int serverId, long view, java.util.List<String> backups) {
        server(serverId).replica.installView(view, backups);
    }

    private RegionServer server(int serverId) {
        TcpRegion region;
        synchronized (this) {
            region = exported.get(serverId);
        }
        if (region == null) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region on this tcp fabric");
        }
        return region.server;
    }

    /** Bytes of answers memory server {@code serverId} has queued and not yet written (for tests). */
    synchronized long pendingAnswerBytes(int serverId) {
        TcpRegion region = exported.get(serverId);
        if (region == null) {
            throw new IllegalArgumentException("memory server " + serverId + " is not exported by this fabric");
        }
        return region.server.pendingAnswerBytes();
    }

    private final class TcpRegion implements ExportedRegion {
        private final int serverId;
        private final Region region;
        private final RegionServer server;
        /** The region file's export when the region lives in a file; null when it lives in this process. */
        private final ExportedRegion backing;

        TcpRegion(int serverId, Region region, RegionServer server, ExportedRegion backing) {
            this.serverId = serverId;
            this.region = region;
            this.server = server;
            this.backing = backing;
        }

        @Override
        public boolean fresh() {
            return backing == null || backing.fresh();
        }

        @Override
        public void detach() {
            if (stopServing() && backing != null) {
                backing.detach();
            }
        }

        /** Stops the region server, once; false when already stopped. */
        private boolean stopServing() {
            synchronized (TcpFabric.this) {
                if (!exported.remove(serverId, this)) {
                    return false;
                }
            }
            server.close();
            return true;
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
        public String endpoint() {
            return server.endpoint();
        }

        @Override
        public dev.dex.rdma.MemorySideWrites memorySideWrites() {
            return (offset, length, apply) -> {
                ReplicationStream stream = server.replica.stream;
                if (stream != null) {
                    try {
                        stream.change(offset, length, apply);
                    } catch (NotPrimaryException replaced) {
                        throw new IllegalStateException(replaced.getMessage());
                    }
                } else if (server.replica.clientRefusal() != null) {
                    throw new IllegalStateException(server.replica.clientRefusal());
                } else {
                    apply.run();
                }
            };
        }

        @Override
        public void close() {
            if (stopServing() && backing != null) {
                backing.close();
            }
        }
    }
}
