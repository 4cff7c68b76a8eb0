package dev.dex.rdma.disni;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.ReplicaEndpoints;
import dev.dex.rdma.replica.ReplicaSet;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.replica.ViewGate;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * The {@code disni} transport: reads and writes are one-sided RDMA READ and WRITE work requests through DiSNI;
 * compare-and-swap and fetch-and-add, and the regions themselves, belong to a <em>control</em> fabric (in
 * production the {@code tcp} fabric), because DiSNI 2.1 never passes an atomic work request's arguments to
 * the native side (docs/rdma-disni.md tells the details).
 *
 * <p>{@link #export} exports the region on the control fabric, makes it reachable over RDMA and listens for RDMA
 * clients. The returned region's {@link ExportedRegion#endpoint() endpoint} is a descriptor text with the RDMA
 * address, each segment's remote address and length, and the control fabric's own endpoint; it names no rkey:
 * <pre>
 * disni:2;server=3;rdma=10.0.0.5:7471;shift=30;segments=0x7f3a00000000/1073741824;control=10.0.0.5:7470
 * </pre>
 * A memory node advertises it; compute nodes pass it to {@link #connect(Map, long)}, which connects the control
 * fabric to the control endpoints (greeting as the client's identity), asks each server for RDMA keys of this
 * client's own ({@link RdmaGrants}: a registration of the region per client, asked for on the control
 * connection) and opens one RDMA connection per server. {@link #connect(int...)} connects to regions this
 * fabric object exported, and takes its keys directly.
 *
 * <p>Fencing ({@link #fence}, and a client's {@link RemoteMemory#fence} through a {@code tcp} control fabric):
 * the control fabric closes the client's control connections and refuses its greetings, and the region
 * deregisters every key the client was granted, so the device applies none of its READs and WRITEs from then
 * on; docs/rdma-disni.md tells what that relies on.
 *
 * <p>The JVM needs {@code --add-exports java.base/sun.nio.ch=ALL-UNNAMED} and
 * {@code -Djava.library.path=} the directory of {@code libdisni.so}; {@link RdmaDevices} checks both and
 * the device.
 *
 * <p>This object owns the control fabric: {@link #close()} closes it, after the clients and regions this
 * fabric opened.
 *
 * <p>Replicas of a replica group (docs/rdma-disni.md, "Views"): a memory node moves its region's replica to a view
 * with {@link #advanceView}, which revokes the keys of older views and refuses their atomics; a compute node connects
 * in a view ({@link #connect(Map, long, long)}), or to whole groups ({@link #connectGroups}, {@link #replicaSet}).
 *
 * <p>Concurrency: export and close are serialised on this object; connect, fence and advanceView run concurrently with
 * them and with themselves ({@link RdmaGrants} keeps the keys of a region thread-safe, its {@link ViewGate} and
 * {@link ViewAtomics} its atomics in a view). A client connected while the fabric closes is closed and its connect
 * fails.
 */
public final class DisniFabric implements Fabric, dev.dex.rdma.replica.GroupFabric {
    private static final Logger LOG = LoggerFactory.getLogger(DisniFabric.class);
    private final Fabric control;
    private final DisniSettings settings;
    private final RdmaTransport transport;
    private final Map<Integer, DisniRegion> regions = new ConcurrentHashMap<>();
    private final Set<DisniRemoteMemory> clients = ConcurrentHashMap.newKeySet();
    /** How replicas exported here beat, suspect and copy ({@link #exportReplica}). */
    private volatile dev.dex.rdma.tcp.ReplicaSettings replication = dev.dex.rdma.tcp.ReplicaSettings.DEFAULTS;
    /** The region behind the stand-in of a replica that cannot be reached ({@link #goneReplica}); made on first use. */
    /** The compute side of replica groups: connections per view and read leases. */
    final GroupClients groups = new GroupClients(this);
    private volatile boolean closed;

    /**
     * A fabric on this machine's RDMA device.
     *
     * @param control  carries atomics and owns the regions; closed with this fabric (left to the caller if this
     *                 constructor throws)
     * @param settings where to listen, timeouts and sizes
     * @throws IllegalStateException with {@link RdmaDevices#reason()} when this JVM cannot use RDMA
     */
    public DisniFabric(Fabric control, DisniSettings settings) {
        this(control, settings, deviceTransport(settings));
    }

    DisniFabric(Fabric control, DisniSettings settings, RdmaTransport transport) {
        this.control = Objects.requireNonNull(control, "control fabric");
        this.settings = Objects.requireNonNull(settings, "settings");
        this.transport = Objects.requireNonNull(transport, "transport");
    }

    private static RdmaTransport deviceTransport(DisniSettings settings) {
        Objects.requireNonNull(settings, "settings");
        if (!RdmaDevices.available()) {
            throw new IllegalStateException("the disni fabric cannot run in this JVM: " + RdmaDevices.reason());
        }
        return new DisniTransport(settings);
    }

    @Override
    public String transport() {
        return "disni";
    }

    /**
     * Exports the region on the control fabric and registers it for RDMA.
     *
     * @throws IllegalArgumentException     for bad lengths or a server id already exported
     * @throws dev.dex.rdma.FabricException when the RDMA device refuses the registration or the listener
     * @throws IllegalStateException        after {@link #close()}
     */
    @Override
    public synchronized ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        if (closed) {
            throw new IllegalStateException("this disni fabric is closed");
        }
        ExportedRegion base = control.export(serverId, regionLength, chunkLength);
        RdmaTransport.Registration registration = null;
        try {
            Region region = base.region();
            if (region.segmentCount() > RdmaGrants.MAX_SEGMENTS) {
                throw new IllegalArgumentException("a region of " + region.segmentCount() + " segments is more than the "
                        + RdmaGrants.MAX_SEGMENTS + " whose keys one grant can carry; use larger segments");
            }
            registration = transport.register(region);
            RdmaRegionDescriptor descriptor = new RdmaRegionDescriptor(serverId, registration.host(), registration.port(),
                    region.segmentShift(), registration.segments(), base.endpoint());
            DisniRegion exported = new DisniRegion(base, registration, descriptor);
            if (regions.putIfAbsent(serverId, exported) != null) {
                throw new IllegalArgumentException("memory server " + serverId + " already exported on this disni fabric");
            }
            try {
                if (control instanceof TcpFabric tcp) {
                    // Clients on other hosts ask for their keys on their control connection, which names who they
                    // are; a fence of the control fabric (at downing, or a new owner's FENCE) revokes the keys too.
                    // The revocation is in place before the first key is handed out.
                    tcp.whenFenced(serverId, exported::fence);
                    tcp.handleMessages(serverId, exported.messages);
                }
            } catch (RuntimeException e) {
                regions.remove(serverId, exported);
                throw e;
            }
            return exported;
        } catch (RuntimeException e) {
            if (registration != null) {
                registration.close();
            }
            base.close();
            throw e;
        }
    }

    /**
     * Exports memory server {@code serverId}'s region as one replica of its group ({@link DisniReplicaRegion}): the
     * replica coordinator gives it its part, and it talks to the other replicas' memory nodes on the control fabric.
     *
     * @throws IllegalArgumentException as {@link #export}
     */
    @Override
    public DisniReplicaRegion exportReplica(int serverId, long regionLength, int chunkLength) {
        DisniRegion exported = (DisniRegion) export(serverId, regionLength, chunkLength);
        try {
            DisniReplicaRegion replica = new DisniReplicaRegion(this, exported, replication);
            exported.replica = replica;
            return replica;
        } catch (RuntimeException e) {
            exported.close();
            throw e;
        }
    }

    /** Sets how replicas exported from now on beat, suspect their primary and copy (dex.fabric.tcp.replication). */
    public void replication(dev.dex.rdma.tcp.ReplicaSettings settings) {
        this.replication = Objects.requireNonNull(settings, "replication settings");
    }

    /** How replicas exported here beat, suspect and copy, and how long a refused verb waits for a newer view. */
    public dev.dex.rdma.tcp.ReplicaSettings replication() {
        return replication;
    }

    /**
     * A connection on the control fabric to the memory node of {@code endpoint} (a replica of server {@code serverId}),
     * as an anonymous client: a {@link MessageSender} for the replicas' own messages.
     */
    RemoteMemory controlLink(int serverId, String endpoint) {
        return controlLink(serverId, endpoint, 0);
    }

    /** As {@link #controlLink(int, String)}, greeting as {@code clientId} (0: anonymous). */
    RemoteMemory controlLink(int serverId, String endpoint, long clientId) {
        Map<Integer, String> at = Map.of(serverId, descriptorOf(serverId, endpoint).controlEndpoint());
        RemoteMemory link = clientId == 0 ? control.connect(at) : control.connect(at, clientId);
        if (!(link instanceof MessageSender)) {
            link.close();
            throw new IllegalStateException("the " + control.transport() + " control fabric carries no messages between memory nodes");
        }
        return link;
    }

    /**
     * Connects to regions this fabric object exported, as an anonymous client.
     *
     * @throws IllegalArgumentException when a server has no region on this fabric or cannot be reached
     */
    @Override
    public RemoteMemory connect(int... serverIds) {
        if (serverIds.length == 0) {
            throw new IllegalArgumentException("connect needs at least one memory server id");
        }
        SortedMap<Integer, RdmaRegionDescriptor> servers = new TreeMap<>();
        for (int id : serverIds) {
            DisniRegion exported = regions.get(id);
            if (exported == null) {
                throw new IllegalArgumentException("memory server " + id + " has not exported a region on this disni fabric");
            }
            servers.put(id, exported.descriptor);
        }
        return open(servers, 0, -1);
    }

    /**
     * Connects to memory servers by the endpoints they advertise, as an anonymous client (whose keys cannot be
     * revoked but by the region's close).
     *
     * @param endpoints each server's {@link ExportedRegion#endpoint()} on a {@code disni} fabric, by server id
     * @throws IllegalArgumentException when an endpoint is malformed or describes another server, or a server
     *                                  cannot be reached
     */
    @Override
    public RemoteMemory connect(Map<Integer, String> endpoints) {
        return connect(endpoints, 0);
    }

    /**
     * As {@link #connect(Map)}, as client {@code clientId}: the control connections greet with it, and each
     * memory server grants this client RDMA keys of its own, which a {@link #fence} of the identity revokes.
     *
     * @throws dev.dex.rdma.FencedException when a memory server has fenced that identity already
     */
    @Override
    public RemoteMemory connect(Map<Integer, String> endpoints, long clientId) {
        return open(descriptorsOf(endpoints), clientId, -1);
    }

    private static SortedMap<Integer, RdmaRegionDescriptor> descriptorsOf(Map<Integer, String> endpoints) {
        if (endpoints.isEmpty()) {
            throw new IllegalArgumentException("connect needs at least one memory server endpoint");
        }
        SortedMap<Integer, RdmaRegionDescriptor> servers = new TreeMap<>();
        for (Map.Entry<Integer, String> entry : endpoints.entrySet()) {
            servers.put(entry.getKey(), descriptorOf(entry.getKey(), entry.getValue()));
        }
        return servers;
    }

    static RdmaRegionDescriptor descriptorOf(Integer id, String endpoint) {
        Objects.requireNonNull(id, "memory server id");
        RdmaRegionDescriptor descriptor;
        try {
            descriptor = RdmaRegionDescriptor.parse(endpoint);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("endpoint of memory server " + id + ": " + e.getMessage(), e);
        }
        if (descriptor.serverId() != id) {
            throw new IllegalArgumentException("endpoint of memory server " + id + " describes memory server " + descriptor.serverId());
        }
        return descriptor;
    }

    /**
     * As {@link #connect(Map, long)}, for replicas of replica groups in view {@code view} (docs/replication.md): the keys
     * are granted in that view and revoked when a replica moves past it ({@link #advanceView}), atomics run on each
     * replica's memory node in that view ({@link ViewAtomics}), and a verb a replica refused because it is in a newer
     * view throws {@link dev.dex.rdma.replica.StaleViewException}: the client is to install the newer view, connect in
     * it and send the verb again there.
     *
     * @throws dev.dex.rdma.replica.StaleViewException when a replica is in a newer view already
     * @throws dev.dex.rdma.FencedException            when a memory server has fenced that identity already
     */
    public RemoteMemory connect(Map<Integer, String> endpoints, long clientId, long view) {
        if (view < 0) {
            throw new IllegalArgumentException("a view is >= 0: " + view);
        }
        return open(descriptorsOf(endpoints), clientId, view);
    }

    /**
     * Connects a compute node to replicated servers, each in the view given: a client that writes every replica of the
     * view itself (docs/replication.md, "The compute-side write path"); see {@link GroupClients#connectGroups}.
     */
    public ReplicatedRemoteMemory connectGroups(Map<Integer, ReplicaEndpoints> views, long clientId, java.time.Duration failoverWait,
                                                ReplicatedRemoteMemory.BackupFailures failures) {
        return groups.connectGroups(views, clientId, failoverWait, failures);
    }

    /** As above, with the failover wait of {@link #replication()}. */
    @Override
    public ReplicatedRemoteMemory connectGroups(Map<Integer, ReplicaEndpoints> views, long clientId,
                                                ReplicatedRemoteMemory.BackupFailures failures) {
        return connectGroups(views, clientId, replication.failoverWait(), failures);
    }

    /** Server {@code serverId}'s replicas in a view, as client {@code clientId} reaches them: {@link GroupClients#replicaSet}. */
    @Override
    public ReplicaSet replicaSet(int serverId, ReplicaEndpoints endpoints, long clientId) {
        return groups.replicaSet(serverId, endpoints, clientId);
    }

    /**
     * Server {@code serverId}'s replica, exported here, becomes a backup in {@code view}: the stamps of older views are
     * its copy's ({@link ViewAtomics}, "Stamps"). Called before its gate moves there.
     */
    void stampsFrom(int serverId, long view) {
        DisniRegion exported = regions.get(serverId);
        if (exported == null) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region on this disni fabric");
        }
        exported.atomics.stampsFrom(view);
    }

    /**
     * Moves memory server {@code serverId}'s replica, exported here, to view {@code next} of its group: once this returns,
     * no atomic of an older view runs on it any more, and the device applies no READ or WRITE with a key of an older view.
     *
     * @throws IllegalArgumentException for a server not exported here, or a view older than the replica's
     * @throws RuntimeException         when a key of an older view could not be revoked: the replica's atomics are in
     *                                  {@code next}, but a client of an older view may still READ and WRITE it. Until an
     *                                  advance to {@code next} returns (it tries the key again), the replica must not count
     *                                  as moved: no copy to a new backup may start, and no promotion may be reported
     */
    public void advanceView(int serverId, long next) {
        DisniRegion exported = regions.get(serverId);
        if (exported == null) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region on this disni fabric");
        }
        exported.gate.advance(next);
        exported.grants.advanceView(next);
    }

    /**
     * Fences client {@code clientId} on memory server {@code serverId}, exported here: the control fabric closes
     * its control connections and refuses its greetings, and every RDMA key the client was granted is
     * deregistered, so the device applies none of its READs and WRITEs from then on.
     *
     * @return whether the control fabric refuses the client's atomics too (true over {@code tcp})
     * @throws IllegalArgumentException for client 0 or a server not exported here
     * @throws RuntimeException         when a key could not be revoked (the fence is not in place)
     */
    /** The clients connected to the control fabric's server (every disni client has a control connection). */
    @Override
    public java.util.Set<Long> connectedClients(int serverId) {
        return control.connectedClients(serverId);
    }

    /** The clients that hung up their control connection (a process that dies ends it too). */
    @Override
    public java.util.Map<Long, Long> hungUpClients(int serverId) {
        return control.hungUpClients(serverId);
    }

    @Override
    public boolean fence(int serverId, long clientId) {
        if (clientId == 0) {
            throw new IllegalArgumentException("client 0 (anonymous) cannot be fenced");
        }
        DisniRegion exported = regions.get(serverId);
        if (exported == null) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region on this disni fabric");
        }
        boolean controlFenced = control.fence(serverId, clientId);
        // The tcp control revoked the keys within its fence already; a control that cannot fence did not.
        exported.fence(clientId);
        return controlFenced;
    }

    /** Closes the clients and regions this fabric opened, stops listening, then closes the control fabric. */
    @Override
    public void close() {
        List<AutoCloseable> toClose = new ArrayList<>();
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            toClose.add(groups);
            toClose.addAll(clients);
            toClose.addAll(regions.values());
        }
        toClose.add(transport);
        toClose.add(control);
        RuntimeException failure = null;
        for (AutoCloseable resource : toClose) {
            try {
                resource.close();
            } catch (Exception e) {
                RuntimeException wrapped = e instanceof RuntimeException runtime ? runtime : new IllegalStateException(e);
                if (failure == null) {
                    failure = wrapped;
                } else {
                    failure.addSuppressed(wrapped);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    private RemoteMemory open(SortedMap<Integer, RdmaRegionDescriptor> servers, long clientId, long view) {
        if (closed) {
            throw new IllegalArgumentException("this disni fabric is closed");
        }
        Map<Integer, String> controlEndpoints = new TreeMap<>();
        servers.forEach((id, descriptor) -> controlEndpoints.put(id, descriptor.controlEndpoint()));
        RemoteMemory controlMemory = clientId == 0 ? control.connect(controlEndpoints) : control.connect(controlEndpoints, clientId);
        OneSidedVerbs verbs = null;
        Keys keys = new Keys(controlMemory, clientId, view);
        DisniRemoteMemory memory;
        try {
            // Connecting needs only the address; the keys come after, so an unreachable server costs no grant.
            verbs = transport.connect(servers.values());
            SortedMap<Integer, RdmaRegionDescriptor> granted = new TreeMap<>();
            servers.forEach((id, descriptor) -> granted.put(id, descriptor.withRkeys(keys.grant(id, descriptor))));
            memory = new DisniRemoteMemory(granted, verbs, controlMemory, settings.maxTransfer(), keys::release, clients::remove,
                    view, view < 0 ? null : keys);
        } catch (RuntimeException e) {
            if (verbs != null) {
                verbs.close();
            }
            try {
                keys.release();
            } finally {
                controlMemory.close();
            }
            throw e;
        }
        clients.add(memory);
        if (closed) {
            memory.close();
            throw new IllegalArgumentException("this disni fabric is closed");
        }
        return memory;
    }

    /**
     * The keys one client was granted, by memory server: from a region of this fabric object directly, from
     * another process's over the control connection (whose greeting names the client). Released when the
     * client closes, before its control connection does.
     */
    private final class Keys implements ViewAtomics.Client {
        private final RemoteMemory controlMemory;
        private final long clientId;
        /** The view the keys are asked in, or -1 (plain grants of view 0). */
        private final long view;
        private final Map<Integer, RdmaGrants.Granted> granted = new TreeMap<>();
        private final Map<Integer, DisniRegion> local = new java.util.concurrent.ConcurrentHashMap<>();

        Keys(RemoteMemory controlMemory, long clientId, long view) {
            this.controlMemory = controlMemory;
            this.clientId = clientId;
            this.view = view;
        }

        int[] grant(int serverId, RdmaRegionDescriptor descriptor) {
            DisniRegion exported = regions.get(serverId);
            RdmaGrants.Granted keys;
            if (exported != null && exported.descriptor.equals(descriptor)) {
                keys = exported.grants.grant(clientId, Math.max(view, 0));
                local.put(serverId, exported);
            } else if (controlMemory instanceof MessageSender sender) {
                keys = RdmaGrants.request(sender, serverId, descriptor.segments().size(), view);
            } else {
                throw new IllegalArgumentException("memory server " + serverId + " lies in another process, and the "
                        + control.transport() + " control fabric carries no messages to ask it for RDMA keys");
            }
            granted.put(serverId, keys);
            return keys.rkeys();
        }

        /** Gives every key back; a server that cannot be reached keeps them until the client is fenced. */
        void release() {
            for (Map.Entry<Integer, RdmaGrants.Granted> entry : granted.entrySet()) {
                int serverId = entry.getKey();
                try {
                    DisniRegion exported = local.get(serverId);
                    if (exported != null) {
                        exported.grants.release(clientId, entry.getValue().id());
                    } else {
                        RdmaGrants.requestRelease((MessageSender) controlMemory, serverId, entry.getValue().id());
                    }
                } catch (RuntimeException unreachable) {
                    LOG.debug("memory server {} keeps the RDMA keys of a closed client: {}", serverId, unreachable.toString());
                }
            }
            granted.clear();
        }

        @Override
        public long atomic(int serverId, byte kind, long inView, long offset, long a, long b, long[] stamp) {
            DisniRegion exported = local.get(serverId);
            return exported != null ? exported.atomics.run(clientId, kind, inView, offset, a, b, 0, stamp)
                    : ViewAtomics.request((MessageSender) controlMemory, serverId, kind, inView, offset, a, b, 0, stamp);
        }

        @Override
        public boolean setIfNewer(int serverId, long inView, long offset, long value, long stampView, long stampSeq) {
            DisniRegion exported = local.get(serverId);
            return (exported != null ? exported.atomics.run(clientId, ViewAtomics.NEWER, inView, offset, value, stampView, stampSeq, null)
                    : ViewAtomics.request((MessageSender) controlMemory, serverId, ViewAtomics.NEWER, inView, offset, value, stampView,
                    stampSeq, null)) == 1;
        }

        @Override
        public long view(int serverId) {
            DisniRegion exported = local.get(serverId);
            return exported != null ? exported.grants.view() : RdmaGrants.requestView((MessageSender) controlMemory, serverId);
        }
    }

    /** A region exported on the control fabric and reachable over RDMA with keys granted per client. */
    private final class DisniRegion implements ExportedRegion {
        final RdmaRegionDescriptor descriptor;
        final RdmaGrants grants;
        /** The view the region is in as a replica, for the atomics its memory node runs ({@link ViewAtomics}). */
        final ViewGate gate;
        final ViewAtomics atomics;
        /** What the control fabric's message channel serves for this region: key requests, atomics in a view, replicas' own. */
        final MessageHandler messages;
        /** The replica this region is, when exported as one ({@link #exportReplica}); its messages go to it. */
        volatile DisniReplicaRegion replica;
        private final ExportedRegion base;
        private final RdmaTransport.Registration registration;
        private final String endpoint;
        private final AtomicBoolean released = new AtomicBoolean();

        DisniRegion(ExportedRegion base, RdmaTransport.Registration registration, RdmaRegionDescriptor descriptor) {
            this.base = base;
            this.registration = registration;
            this.descriptor = descriptor;
            this.endpoint = descriptor.encode();
            this.grants = new RdmaGrants(descriptor.serverId(), registration);
            this.gate = new ViewGate(descriptor.serverId(), endpoint, 0);
            this.atomics = new ViewAtomics(descriptor.serverId(), base.region(), gate, grants::isFenced);
            this.messages = new MessageHandler() {
                @Override
                public int handle(DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
                    return handle(0, message, offset, length, reply);
                }

                @Override
                public int handle(long client, DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
                    if (ViewAtomics.isAtomic(message, offset, length)) {
                        return atomics.handle(client, message, offset, length, reply);
                    }
                    if (ReadLeases.isRequest(message, offset, length)) {
                        DisniReplicaRegion to = replica; // any client may ask: a lease gives no access
                        return ReadLeases.answer(to == null ? ReadLeases.Grant.notNow("the region is no replica")
                                : to.grantRead(ReadLeases.view(message, offset)), reply);
                    }
                    if (DisniReplicaRegion.isReplicaMessage(message, offset, length)) {
                        DisniReplicaRegion to = replica;
                        if (to == null) {
                            throw new IllegalArgumentException("memory server " + descriptor.serverId() + "'s region is no replica");
                        }
                        if (client != 0) {
                            // Memory nodes link to each other anonymously; a compute node greets as itself.
                            throw new IllegalArgumentException("replica messages come from memory nodes, not from client "
                                    + Long.toHexString(client));
                        }
                        return to.handle(message, offset, length, reply);
                    }
                    return grants.handle(client, message, offset, length, reply);
                }

                @Override
                public boolean blocking() {
                    return true;
                }
            };
        }

        @Override
        public int serverId() {
            return descriptor.serverId();
        }

        @Override
        public Region region() {
            return base.region();
        }

        /** The {@link RdmaRegionDescriptor} text of this region. */
        @Override
        public String endpoint() {
            return endpoint;
        }

        /** Fences {@code client}: marks it and revokes its keys, then waits for its atomics in a view still running. */
        void fence(long client) {
            try {
                grants.fence(client);
            } finally {
                atomics.drainFenced(); // the mark comes first in grants.fence, also when a revocation throws
            }
        }

        /** Removes the region from the fabric, refuses atomics, revokes every grant, then closes it on the control fabric. */
        @Override
        public void close() {
            if (released.compareAndSet(false, true)) {
                regions.remove(descriptor.serverId(), this);
                DisniReplicaRegion of = replica;
                if (of != null) {
                    of.stopThreads();
                }
                gate.retire("memory server " + descriptor.serverId() + "'s region " + endpoint + " is closed");
                try {
                    grants.close();
                } finally {
                    try {
                        registration.close();
                    } finally {
                        base.close();
                    }
                }
            }
        }
    }
}
