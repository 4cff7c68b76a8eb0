package dev.dex.rdma.local;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import dev.dex.rdma.DirectRemoteMemory;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionFormat;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.GatedRemoteMemory;
import dev.dex.rdma.replica.RegionCopier;
import dev.dex.rdma.replica.ReplicaSet;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.replica.ViewGate;

/**
 * The {@code local} transport: regions are off-heap buffers of this JVM. Compute and memory sides are
 * objects in one process; an optional latency per verb (spun, in nanoseconds) emulates the round trip
 * of RDMA (about 2 µs).
 *
 * <p>With {@code replicas} above 1, every exported server is held by that many regions, a primary and its backups, and
 * a client writes every change to all of them itself ({@link ReplicatedRemoteMemory}, the compute-side write path of
 * docs/replication.md). {@link #killPrimary}, {@link #dropBackup} and {@link #addReplica} make the view changes a
 * coordinator makes, and every client follows them.
 *
 * <p>Concurrency: the sets of regions and of groups are concurrent maps; export, connect and close may race freely.
 * A group serialises its own view changes.
 */
public final class LocalFabric implements Fabric, dev.dex.rdma.replica.GroupFabric {
    private final long latencyNs;
    private final int segmentShift;
    private final Map<Integer, LocalRegion> regions = new ConcurrentHashMap<>();
    private final int replicas;
    private final Map<Integer, LocalGroup> groups = new ConcurrentHashMap<>();
    /** Replicas exported one per memory node of the cluster ({@link #exportReplica}), by endpoint. */
    private final Map<String, LocalReplicaRegion> replicaRegions = new ConcurrentHashMap<>();
    private final java.util.concurrent.atomic.AtomicLong replicaNames = new java.util.concurrent.atomic.AtomicLong();
    private volatile long copyRate = 256L << 20;
    private volatile java.time.Duration failoverWait = java.time.Duration.ofSeconds(3);
    /** The region behind every connection to a gone replica (never read or written: its gates are retired). */
    private Region nothing;

    /** A fabric with no injected latency. */
    public LocalFabric() {
        this(0);
    }

    /** @param latencyNs latency spun before every verb, 0 for none */
    public LocalFabric(long latencyNs) {
        this(latencyNs, Region.DEFAULT_SEGMENT_SHIFT);
    }

    /**
     * @param latencyNs    latency spun before every verb, 0 for none
     * @param segmentShift regions in segments of {@code 2^segmentShift} bytes (1 GiB by default); small segments
     *                     let tests of transports that split transfers at segment boundaries cross many of them
     */
    public LocalFabric(long latencyNs, int segmentShift) {
        this(latencyNs, segmentShift, 1);
    }

    /**
     * @param latencyNs    latency spun before every verb (on each replica), 0 for none
     * @param segmentShift as for {@link #LocalFabric(long, int)}
     * @param replicas     regions that hold each exported server, 1 to 3 (1: no replication, the verbs as before)
     */
    public LocalFabric(long latencyNs, int segmentShift, int replicas) {
        if (replicas < 1 || replicas > 3) {
            throw new IllegalArgumentException("replicas must be 1, 2 or 3: " + replicas);
        }
        this.replicas = replicas;
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        if (segmentShift < 12 || segmentShift > Region.DEFAULT_SEGMENT_SHIFT) {
            throw new IllegalArgumentException("segment shift must be in [12, " + Region.DEFAULT_SEGMENT_SHIFT + "]: " + segmentShift);
        }
        this.latencyNs = latencyNs;
        this.segmentShift = segmentShift;
    }

    @Override
    public String transport() {
        return "local";
    }

    @Override
    public ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        if (Integer.numberOfTrailingZeros(chunkLength) > segmentShift) {
            throw new IllegalArgumentException("chunk length " + chunkLength + " exceeds this fabric's segments of "
                    + (1L << segmentShift) + " bytes");
        }
        if (replicas > 1) {
            LocalGroup group = new LocalGroup(serverId, regionLength, chunkLength, replicas, latencyNs, segmentShift);
            if (groups.putIfAbsent(serverId, group) != null) {
                throw new IllegalArgumentException("memory server " + serverId + " already exported on this fabric");
            }
            return new LocalRegion(serverId, group.primaryRegion(), () -> groups.remove(serverId, group));
        }
        Region region = Region.offHeap(regionLength, segmentShift);
        RegionFormat.format(region, chunkLength);
        LocalRegion exported = new LocalRegion(serverId, region, null);
        if (regions.putIfAbsent(serverId, exported) != null) {
            throw new IllegalArgumentException("memory server " + serverId + " already exported on this fabric");
        }
        return exported;
    }

    @Override
    public RemoteMemory connect(int... serverIds) {
        if (serverIds.length == 0) {
            throw new IllegalArgumentException("connect needs at least one memory server id");
        }
        if (replicas > 1) {
            return connectReplicated(serverIds);
        }
        int max = 0;
        for (int id : serverIds) {
            max = Math.max(max, id);
        }
        Region[] byId = new Region[max + 1];
        for (int id : serverIds) {
            LocalRegion exported = regions.get(id);
            if (exported == null) {
                throw new IllegalArgumentException("memory server " + id + " has not exported a region on this local fabric");
            }
            byId[id] = exported.region;
        }
        return new DirectRemoteMemory(byId, latencyNs, () -> { });
    }

    private RemoteMemory connectReplicated(int... serverIds) {
        int max = java.util.Arrays.stream(serverIds).max().orElseThrow();
        long[] regionLengths = new long[max + 1];
        long[] chunkLengths = new long[max + 1];
        Map<Integer, ReplicaSet> sets = new java.util.HashMap<>();
        Map<Integer, LocalGroup> connected = new java.util.HashMap<>();
        for (int id : serverIds) {
            LocalGroup group = groups.get(id);
            if (group == null) {
                throw new IllegalArgumentException("memory server " + id + " has not exported a region on this local fabric");
            }
            connected.put(id, group);
            regionLengths[id] = group.regionLength();
            chunkLengths[id] = group.chunkLength();
        }
        connected.forEach((id, group) -> sets.put(id, group.connectSet()));
        ReplicatedRemoteMemory[] client = new ReplicatedRemoteMemory[1];
        // Nobody drops a backup on a client's word here: the caller of dropBackup is the coordinator.
        client[0] = new ReplicatedRemoteMemory(sets, regionLengths, chunkLengths, ReplicatedRemoteMemory.DEFAULT_MIRROR_TIMEOUT,
                (server, view, replica, cause) -> { }, () -> connected.values().forEach(group -> group.unfollow(client[0])));
        connected.forEach((id, group) -> {
            group.follow(client[0]);
            // A view change between taking the set and following: install the newer view (an equal one is ignored).
            client[0].install(id, group.connectSet());
        });
        return client[0];
    }

    /**
     * Exports a new, zeroed and formatted replica of memory server {@code serverId}, one of several memory nodes of the
     * cluster that hold it (docs/replication.md): named by a new endpoint, given its part by the replica coordinator, and
     * written by compute nodes through {@link #connectGroups}. Independent of this fabric's own {@code replicas}.
     */
    @Override
    public LocalReplicaRegion exportReplica(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        Region region = Region.offHeap(regionLength, segmentShift);
        RegionFormat.format(region, chunkLength);
        String endpoint = "local-replica-" + serverId + "-" + replicaNames.incrementAndGet();
        LocalReplicaRegion replica = new LocalReplicaRegion(this, serverId, endpoint, region, chunkLength);
        replicaRegions.put(endpoint, replica);
        return replica;
    }

    /** The replica exported here at {@code endpoint}, or null. */
    LocalReplicaRegion replica(String endpoint) {
        return replicaRegions.get(endpoint);
    }

    /** The other replicas of {@code replica}'s server exported here. */
    java.util.List<LocalReplicaRegion> othersOf(LocalReplicaRegion replica) {
        return replicaRegions.values().stream().filter(r -> r != replica && r.serverId() == replica.serverId()).toList();
    }

    void forget(LocalReplicaRegion replica) {
        replicaRegions.remove(replica.endpoint(), replica);
    }

    /** How fast a primary copies its region to a backup that joins, in bytes per second (0: no limit). */
    public void copyRate(long bytesPerSecond) {
        if (bytesPerSecond < 0) {
            throw new IllegalArgumentException("the copy rate must be >= 0 bytes per second: " + bytesPerSecond);
        }
        this.copyRate = bytesPerSecond;
    }

    public long copyRate() {
        return copyRate;
    }

    /**
     * How long a compute node's verb that failed in a view of a replica group waits for a newer view, to run again there
     * ({@link #connectGroups}; 0: fails at once).
     */
    public void failoverWait(java.time.Duration wait) {
        if (wait.isNegative()) {
            throw new IllegalArgumentException("the failover wait must be >= 0: " + wait);
        }
        this.failoverWait = wait;
    }

    /**
     * The replica at {@code endpoint} dies now, as with its host: every verb on it fails from now on (its memory node's
     * actor system may take a while to stop). False when no replica is there.
     */
    public boolean killReplica(String endpoint) {
        LocalReplicaRegion replica = replicaRegions.get(endpoint);
        if (replica == null) {
            return false;
        }
        replica.close();
        return true;
    }

    /** A connection to {@code region} alone, holding server {@code serverId}, with {@code latencyNs} per verb. */
    static RemoteMemory direct(int serverId, Region region, long latencyNs) {
        Region[] byId = new Region[serverId + 1];
        byId[serverId] = region;
        return new DirectRemoteMemory(byId, latencyNs, () -> { });
    }

    /** As {@link #direct}, its verbs sent in {@code view} through {@code gate}. */
    static RemoteMemory gated(int serverId, Region region, ViewGate gate, long view, long latencyNs) {
        return new GatedRemoteMemory(direct(serverId, region, latencyNs), gate, view);
    }

    /** A connection to {@code replica} alone, sending its verbs in {@code view} (a copy's). */
    RemoteMemory replicaConnection(LocalReplicaRegion replica, long view) {
        return gated(replica.serverId(), replica.region(), replica.gate(), view, latencyNs);
    }

    /** A connection to {@code replica} alone, past every gate: its memory node's own (the tree's format). */
    public RemoteMemory connectOwn(LocalReplicaRegion replica) {
        return direct(replica.serverId(), replica.region(), latencyNs);
    }

    /**
     * Server {@code serverId}'s replicas in {@code view}, as one compute node reaches them: the primary and the backups by
     * endpoint. A replica that is gone from this fabric (its memory node stopped before the map left it out) fails every
     * verb, so every change fails until a view without it comes.
     */
    public ReplicaSet replicaSet(int serverId, dev.dex.rdma.replica.ReplicaEndpoints endpoints) {
        java.util.List<ReplicaSet.Replica> backups = new java.util.ArrayList<>();
        for (String backup : endpoints.backups()) {
            backups.add(replicaOrGone(serverId, backup, endpoints.view()));
        }
        return new ReplicaSet(endpoints.view(), replicaOrGone(serverId, endpoints.primary(), endpoints.view()), backups);
    }

    /** The replica at {@code endpoint} as a client reaches it in {@code view}, with the order its clients converge in. */
    private ReplicaSet.Replica replicaOrGone(int serverId, String endpoint, long view) {
        LocalReplicaRegion replica = replicaRegions.get(endpoint);
        if (replica != null && replica.serverId() == serverId) {
            return new ReplicaSet.Replica(endpoint, replicaConnection(replica, view), ReplicaSet.State.COMPLETE, replica.words());
        }
        return new ReplicaSet.Replica(endpoint, goneConnection(serverId, endpoint, view), ReplicaSet.State.COMPLETE);
    }

    /** A connection to a replica that is gone: a retired gate, over one small region no verb ever reaches. */
    private RemoteMemory goneConnection(int serverId, String endpoint, long view) {
        ViewGate gone = new ViewGate(serverId, endpoint, view);
        gone.retire("memory server " + serverId + "'s replica " + endpoint + " is gone from this local fabric");
        return gated(serverId, nothing(), gone, view, latencyNs);
    }

    private synchronized Region nothing() {
        if (nothing == null) {
            nothing = Region.offHeap(2L * RegionHeaderDescriptor.MIN_CHUNK_LENGTH, segmentShift);
            RegionFormat.format(nothing, RegionHeaderDescriptor.MIN_CHUNK_LENGTH);
        }
        return nothing;
    }

    private LocalReplicaRegion replicaOf(int serverId, String endpoint) {
        LocalReplicaRegion replica = replicaRegions.get(endpoint);
        if (replica == null || replica.serverId() != serverId) {
            throw new IllegalArgumentException("no replica of memory server " + serverId + " at " + endpoint + " on this local fabric");
        }
        return replica;
    }

    /**
     * Connects a compute node to replicated servers, each in the view given: a client that writes every replica of the
     * view ({@link ReplicatedRemoteMemory}); {@link ReplicatedRemoteMemory#install} with {@link #replicaSet} moves it to a
     * later view.
     */
    public ReplicatedRemoteMemory connectGroups(Map<Integer, dev.dex.rdma.replica.ReplicaEndpoints> views,
                                                ReplicatedRemoteMemory.BackupFailures failures) {
        int max = views.keySet().stream().mapToInt(Integer::intValue).max().orElseThrow(
                () -> new IllegalArgumentException("connect needs at least one memory server"));
        long[] regionLengths = new long[max + 1];
        long[] chunkLengths = new long[max + 1];
        Map<Integer, ReplicaSet> sets = new java.util.HashMap<>();
        views.forEach((id, endpoints) -> {
            LocalReplicaRegion primary = replicaOf(id, endpoints.primary());
            regionLengths[id] = primary.region().length();
            chunkLengths[id] = primary.chunkLength();
            sets.put(id, replicaSet(id, endpoints));
        });
        return new ReplicatedRemoteMemory(sets, regionLengths, chunkLengths, ReplicatedRemoteMemory.DEFAULT_MIRROR_TIMEOUT, failoverWait,
                failures, () -> { });
    }

    /** As {@link #connectGroups(Map, ReplicatedRemoteMemory.BackupFailures)}: a local client has no identity. */
    @Override
    public ReplicatedRemoteMemory connectGroups(Map<Integer, dev.dex.rdma.replica.ReplicaEndpoints> views, long clientId,
                                                ReplicatedRemoteMemory.BackupFailures failures) {
        return connectGroups(views, failures);
    }

    /** As {@link #replicaSet(int, dev.dex.rdma.replica.ReplicaEndpoints)}: a local client has no identity. */
    @Override
    public ReplicaSet replicaSet(int serverId, dev.dex.rdma.replica.ReplicaEndpoints endpoints, long clientId) {
        return replicaSet(serverId, endpoints);
    }

    /** The group of a server exported with replicas. */
    private LocalGroup group(int serverId) {
        LocalGroup group = groups.get(serverId);
        if (group == null) {
            throw new IllegalArgumentException(replicas == 1 ? "this local fabric keeps one replica per server"
                    : "memory server " + serverId + " has not exported a region on this local fabric");
        }
        return group;
    }

    /**
     * Server {@code serverId}'s primary dies: its verbs fail, and its first complete backup becomes primary in a new
     * view, which every client installs.
     *
     * @throws IllegalStateException when the server has no complete backup (nothing changes)
     */
    public void killPrimary(int serverId) {
        group(serverId).killPrimary();
    }

    /** Server {@code serverId}'s backup at {@code index} (0 the first) dies, or is left out: a new view without it. */
    public void dropBackup(int serverId, int index) {
        group(serverId).dropBackup(index);
    }

    /**
     * Adds a replica of {@code serverId} and copies its region while clients write (at most {@code bytesPerSecond},
     * 0 for no limit); returns once the replica is a complete backup in a new view.
     */
    public void addReplica(int serverId, long bytesPerSecond, RegionCopier.Progress progress) {
        group(serverId).addReplica(bytesPerSecond, progress);
    }

    /** Server {@code serverId}'s group in words: its view, primary and backups. */
    public String describeGroup(int serverId) {
        return group(serverId).describe();
    }

    /** Every replica's region of {@code serverId}, primary first (tests compare them). */
    public java.util.List<Region> replicaRegions(int serverId) {
        return group(serverId).regions();
    }

    @Override
    public void close() {
        regions.clear();
        groups.clear();
        replicaRegions.clear();
    }

    private final class LocalRegion implements ExportedRegion {
        private final int serverId;
        private final Region region;
        private final Runnable closeGroup;

        LocalRegion(int serverId, Region region, Runnable closeGroup) {
            this.serverId = serverId;
            this.region = region;
            this.closeGroup = closeGroup;
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
        public void close() {
            if (closeGroup != null) {
                closeGroup.run();
            } else {
                regions.remove(serverId, this);
            }
        }
    }
}
