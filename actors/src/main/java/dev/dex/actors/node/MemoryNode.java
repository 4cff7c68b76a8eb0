package dev.dex.actors.node;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;

import dev.dex.actors.CborSerializable;
import dev.dex.actors.DexMetrics;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.core.offload.SubtreeExecutor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.MemoryFullException;
import dev.dex.rdma.RemoteMemory;

/**
 * A memory node (role {@code memory}): exports its region through the fabric, registers with the
 * Receptionist, hands out chunks, and runs offloaded operations on a bounded pool of memory-side threads
 * (paper §6), replying from those threads. Memory server 0 also formats the tree (an empty root and the
 * partition table) in its fresh region.
 *
 * <p>Reads, writes and compare-and-swap of compute nodes never pass through this actor: they are
 * one-sided verbs on the fabric. Over the {@code tcp} fabric, offloads do not either: they are messages on the
 * compute nodes' fabric connections, run by the region server's event loops.
 *
 * <p>Fencing (docs/durability.md): when the cluster downs a compute node, this node fences its fabric
 * identity (its member's unique id) where the fabric can ({@code tcp}: its connections are closed and its
 * greetings refused), and refuses its offload messages on every fabric. An offload that arrives or waits
 * past its deadline is refused rather than executed late, after the compute side gave up on it.
 */
public final class MemoryNode extends AbstractBehavior<MemoryNode.Command> {
    /** How compute nodes find memory nodes. */
    public static final ServiceKey<Command> KEY = ServiceKey.create(Command.class, "dex-memory-node");
    /** How soon a fence of a downed compute node that failed is tried again. */
    static final java.time.Duration FENCE_RETRY = java.time.Duration.ofSeconds(1);
    /** How often a backup looks at its stream, and how often a backup that lost its primary says so again. */
    static final java.time.Duration WATCH_PERIOD = java.time.Duration.ofMillis(50);
    static final java.time.Duration SUSPECT_AGAIN = java.time.Duration.ofMillis(500);

    /**
     * Messages a memory node accepts. Only the messages that may come from another process are serializable
     * ({@link CborSerializable}, or a binding of their own to {@link dev.dex.actors.partition.BatchSerializer});
     * the actor's internal messages are not, so no other process can forge them (a forged completion could, say,
     * drive a count of work in flight negative).
     *
     * <p>Sealed, so that the list below is the actor's whole protocol: no class elsewhere can become one of its
     * messages.
     */
    public sealed interface Command permits Describe, AllocateChunk, Offload, Peers, PeerDescribed, MemberGone, Replicate, Replicated,
            WatchPrimary, FenceMember, StillAbsent {
    }

    /**
     * Fence the compute node {@code member} (its address) of unique id {@code uid} now, before it is downed
     * ({@link FenceThenDown}): answered with {@link MemberFenced}.
     */
    public record FenceMember(String member, long uid, ActorRef<MemberFenced> replyTo) implements Command, CborSerializable {
    }

    /** Whether memory node {@code node} fenced {@code member}; if not, why ({@code error}). */
    public record MemberFenced(String member, long uid, String node, boolean fenced, String error) implements CborSerializable {
    }

    /** Asks which memory server this node is. */
    public record Describe(ActorRef<Description> replyTo) implements Command, CborSerializable {
    }

    /**
     * @param endpoint where compute nodes reach the region through the fabric ({@code host:port} for tcp;
     *                 empty for fabrics that find regions by server id)
     */
    public record Description(int serverId, long regionBytes, String endpoint, ActorRef<Command> node, Replica replica)
            implements CborSerializable {
        public Description {
            replica = replica == null ? Replica.SOLE : replica;
        }

        /** A memory node that is not in a replica group. */
        public Description(int serverId, long regionBytes, String endpoint, ActorRef<Command> node) {
            this(serverId, regionBytes, endpoint, node, Replica.SOLE);
        }

        /** Whether compute nodes may use this node's region: the only copy of its server, or its group's primary. */
        public boolean servesClients() {
            return Replica.SOLE_ROLE.equals(replica.role()) || Replica.PRIMARY_ROLE.equals(replica.role());
        }
    }

    /**
     * The node's part in its server's replica group (docs/replication.md).
     *
     * @param role     SOLE (no group), PRIMARY, BACKUP or DEMOTED (a primary that was replaced)
     * @param view     the newest view it took part in
     * @param applied  the number of the last change in its region
     * @param complete whether it holds every change of its stream up to {@code applied} (a backup that may become primary)
     * @param copyLeft bytes of a copy to it not received yet
     * @param primaryLost a complete backup's: why it thinks its primary is gone (its stream closed or went silent); null
     *                 otherwise
     * @param regionId the identity of its region, the same across restarts on a kept region (0: none)
     * @param freshRegion its region was formatted by this run: an empty index, no older state of the server
     * @param keptRole a node that has taken no part since it started on a kept region: PRIMARY or BACKUP when that region
     *                 held every change its group answered in view {@code keptView} (docs/replication.md, "The whole group
     *                 restarts"); null otherwise
     */
    public record Replica(String role, long view, long applied, boolean complete, long copyLeft, String primaryLost,
                          long regionId, boolean freshRegion, String keptRole, long keptView) implements CborSerializable {
        public static final String SOLE_ROLE = "SOLE";
        public static final String PRIMARY_ROLE = "PRIMARY";
        public static final String BACKUP_ROLE = "BACKUP";
        public static final String DEMOTED_ROLE = "DEMOTED";
        public static final Replica SOLE = new Replica(SOLE_ROLE, 0, 0, true, 0, null);

        /** A replica with no region identity and nothing kept. */
        public Replica(String role, long view, long applied, boolean complete, long copyLeft, String primaryLost) {
            this(role, view, applied, complete, copyLeft, primaryLost, 0, true, null, 0);
        }
    }

    /**
     * From the cluster's replica coordinator: take a part in the group of this node's server (docs/replication.md).
     *
     * @param op      {@link #BECOME_BACKUP}, {@link #BECOME_PRIMARY} or {@link #INSTALL_VIEW}
     * @param backups the endpoints of the view's backups (for a primary)
     */
    public record Replicate(String op, long view, List<String> backups, ActorRef<Replicated> replyTo)
            implements Command, CborSerializable {
        public static final String BECOME_BACKUP = "become-backup";
        public static final String BECOME_PRIMARY = "become-primary";
        public static final String INSTALL_VIEW = "install-view";

        public Replicate {
            backups = backups == null ? List.of() : List.copyOf(backups);
        }
    }

    /** The answer to {@link Replicate}: the node as it is after it (or the failure's reason in {@code error}). */
    public record Replicated(Description description, String error) implements Command, CborSerializable {
    }

    /** Asks for a chunk of this node's region (for transports without one-sided atomics). */
    public record AllocateChunk(ActorRef<ChunkGranted> replyTo) implements Command, CborSerializable {
    }

    /** A chunk's global address, or an error (memory full). */
    public record ChunkGranted(long address, String error) implements CborSerializable {
    }

    /**
     * An offloaded operation, a lookup or a write in one message (see {@link OffloadRequest}).
     *
     * @param partition the partition the sender holds and the operation is in
     * @param epoch    the sender's owner epoch of that partition: the memory node runs the offload only for the
     *                 partition's current owner, and only for a key inside it ({@code OwnershipTable})
     * @param deadline wall-clock milliseconds after which the memory node must not start it (the compute
     *                 side stops waiting later than that); 0 for none
     */
    public record Offload(long id, int phase, int op, int partition, long epoch, long key, long value, long start, long deadline,
                          ActorRef<OffloadResult> replyTo, long[] keyRest)
            implements Command, CborSerializable {
        public Offload {
            keyRest = keyRest == null ? new long[0] : keyRest;
        }

        /** An offload of an 8-byte key. */
        public Offload(long id, int phase, int op, int partition, long epoch, long key, long value, long start, long deadline,
                       ActorRef<OffloadResult> replyTo) {
            this(id, phase, op, partition, epoch, key, value, start, deadline, replyTo, new long[0]);
        }

        /** The key's words: {@code key}, then {@code keyRest} (a key wider than 8 bytes). */
        long[] words() {
            long[] words = new long[1 + keyRest.length];
            words[0] = key;
            System.arraycopy(keyRest, 0, words, 1, keyRest.length);
            return words;
        }
    }

    /** The Receptionist's memory nodes: each other one is asked which server it is. */
    private record Peers(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    private record PeerDescribed(ActorRef<Command> peer, Description description, Throwable failure)
            implements Command, NoSerializationVerificationNeeded {
    }

    /**
     * Every {@link #WATCH_PERIOD} on a replicated server: a backup that lost its primary's stream asks the coordinator to
     * fail over, a primary whose link to a gating backup broke asks it to drop that backup (docs/replication.md,
     * "Failover").
     */
    private enum WatchPrimary implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /** Clients without a member when this node came up, looked at again ({@link AbsentClients}). */
    private record StillAbsent(Set<Long> clients) implements Command, NoSerializationVerificationNeeded {
    }

    /** A member the cluster downed or removed after downing. */
    private record MemberGone(ClusterEvent.MemberEvent event) implements Command, NoSerializationVerificationNeeded {
    }

    public record OffloadResult(long id, int status, boolean found, long value, long[] path, long[] versions,
                                int pathLength) implements CborSerializable {
        /** An answer that carries only {@code status} (the request was not run, or failed). */
        static OffloadResult refused(long id, int status) {
            return new OffloadResult(id, status, false, 0, new long[0], new long[0], 0);
        }
    }

    /**
     * @param serverId       this memory server's id (0 formats the tree)
     * @param regionBytes    region size
     * @param chunkBytes     chunk size (power of two)
     * @param offloadThreads memory-side threads for offloaded operations
     * @param offloadQueue   offloaded requests queued before more are rejected
     * @param partitions     the initial partition table server 0 stores (equal width over the key range)
     * @param subtreeLevel   M
     * @param format         start from a fresh region even where the fabric keeps one ({@code shm}, {@code tcp} with
     *                       a region directory), discarding its data; otherwise a restarted memory node reattaches
     *                       to its region. Either way a server id another memory node serves on the host is refused.
     * @param keyBytes       the width of the keys of a tree server 0 formats (a reattached tree keeps its own)
     * @param replicas       memory nodes that hold this server ({@code dex.memory.replicas}, 1 to 3; docs/replication.md)
     */
    public record Settings(int serverId, long regionBytes, int chunkBytes, int offloadThreads, int offloadQueue,
                           PartitionTable partitions, int subtreeLevel, boolean format, int keyBytes, int replicas) {
        public Settings {
            if (replicas < 1 || replicas > 3) {
                throw new IllegalArgumentException("dex.memory.replicas must be 1, 2 or 3: " + replicas);
            }
        }

        /** Settings of a memory node that is not in a replica group ({@code dex.memory.replicas = 1}). */
        public Settings(int serverId, long regionBytes, int chunkBytes, int offloadThreads, int offloadQueue,
                        PartitionTable partitions, int subtreeLevel, boolean format, int keyBytes) {
            this(serverId, regionBytes, chunkBytes, offloadThreads, offloadQueue, partitions, subtreeLevel, format, keyBytes, 1);
        }
    }

    private static final org.slf4j.Logger REPLICA_LOG = org.slf4j.LoggerFactory.getLogger(ReplicaControl.class);

    private final Settings settings;
    private final MemoryRegion memoryRegion;
    /** Whether this actor opened {@link #memoryRegion} and closes it when it stops. */
    private final boolean ownsRegion;
    private final ExportedRegion region;
    private final RemoteMemory own;
    private final ThreadPoolExecutor offloadPool;
    private final ThreadLocal<SubtreeExecutor> executors;
    /** This node's metrics (offloads run, by outcome). */
    private final DexMetrics metrics;
    private final Fabric fabric;
    /** Incarnations of compute nodes the cluster downed, each fenced once (read by the actor only). */
    private final Set<org.apache.pekko.cluster.UniqueAddress> fencedMembers = new HashSet<>();
    /**
     * Addresses of downed compute nodes, whose offloads are refused (an offload's reply address names no
     * incarnation); an address that joins again with a new incarnation is taken out.
     */
    private final Set<Address> downed = new HashSet<>();
    /** Other memory nodes asked (or being asked) which server they are. */
    private final Set<ActorRef<Command>> peersAsked = new HashSet<>();
    /** The replica coordinator's proxy, for a replicated server; null otherwise. */
    private final ActorRef<ReplicaCoordinator.Command> coordinator;
    /** When this backup last told the coordinator it lost its primary, and of which view it last logged it. */
    private long suspectedAtNanos;
    private long suspectedView = -1;
    /** What this primary last reported of its backups' links, to log a change once. */
    private java.util.Map<String, String> reportedBackups = java.util.Map.of();

    private MemoryNode(ActorContext<Command> context, org.apache.pekko.actor.typed.javadsl.TimerScheduler<Command> timers,
                       MemoryRegion memoryRegion, boolean ownsRegion) {
        super(context);
        context.setLoggerName(MemoryNode.class); // as ReplicaCoordinator's: not from the stack of its first use
        this.memoryRegion = memoryRegion;
        this.ownsRegion = ownsRegion;
        this.settings = memoryRegion.settings();
        this.fabric = memoryRegion.fabric();
        this.region = memoryRegion.region();
        this.own = memoryRegion.own();
        AtomicInteger threadIds = new AtomicInteger();
        this.offloadPool = new ThreadPoolExecutor(settings.offloadThreads(), settings.offloadThreads(), 0, TimeUnit.SECONDS,
                new ArrayBlockingQueue<>(settings.offloadQueue()), task -> {
                    Thread thread = new Thread(task, "dex-memory-" + settings.serverId() + "-offload-" + threadIds.getAndIncrement());
                    thread.setDaemon(true);
                    return thread;
                });
        this.executors = ThreadLocal.withInitial(() -> new SubtreeExecutor(settings.serverId(), region.region(),
                region.memorySideWrites()));
        this.metrics = DexMetrics.get(context.getSystem());
        ActorRef<ClusterEvent.MemberEvent> members = context.messageAdapter(ClusterEvent.MemberEvent.class, MemberGone::new);
        Cluster.get(context.getSystem()).subscriptions().tell(Subscribe.create(members, ClusterEvent.MemberEvent.class));
        if (settings.replicas() > 1) {
            // The replica groups' map lives in Distributed Data on every voter (docs/replication.md): this node holds a
            // copy, so that a majority can answer while a compute node is away.
            org.apache.pekko.cluster.ddata.typed.javadsl.DistributedData.get(context.getSystem());
            coordinator = ReplicaCoordinator.start(context.getSystem(), settings.replicas()); // a proxy: not a compute node
            timers.startTimerWithFixedDelay(WatchPrimary.INSTANCE, WATCH_PERIOD);
        } else {
            coordinator = null;
        }
        if (FenceThenDown.applies(context.getSystem(), fabric.transport())) {
            context.spawn(FenceThenDown.create(() -> fabric.hungUpClients(settings.serverId())), "fence-then-down");
        }
        context.getSystem().receptionist().tell(Receptionist.register(KEY, context.getSelf()));
        context.getSystem().receptionist().tell(Receptionist.subscribe(KEY,
                context.messageAdapter(Receptionist.Listing.class, Peers::new)));
        context.getLog().info("memory node {} exported {} bytes over {}{}", settings.serverId(), settings.regionBytes(),
                fabric.transport(), region.endpoint().isEmpty() ? "" : " at " + region.endpoint());
    }

    /**
     * A memory node exporting its region through {@code fabric}. A message that fails the actor (a bug, since every
     * message is validated on arrival) is logged and the node goes on serving: stopping would give the region
     * up under the compute nodes using it. A failure to start (the region cannot be exported) stops it.
     */
    public static Behavior<Command> create(Settings settings, Fabric fabric) {
        return Behaviors.supervise(Behaviors.<Command>setup(context -> Behaviors.withTimers(timers ->
                        new MemoryNode(context, timers, MemoryRegion.open(settings, fabric), true))))
                .onFailure(RuntimeException.class, SupervisorStrategy.resume());
    }

    /**
     * A memory node serving {@code region}, which its process opened and keeps when the actor stops: the process
     * starts another actor system on it when the cluster downed this one (docs/replication.md, "Downing").
     */
    public static Behavior<Command> create(MemoryRegion region) {
        return Behaviors.supervise(Behaviors.<Command>setup(context -> Behaviors.withTimers(timers ->
                        new MemoryNode(context, timers, region, false))))
                .onFailure(RuntimeException.class, SupervisorStrategy.resume());
    }

    @Override
    public Receive<Command> createReceive() {
        return newReceiveBuilder()
                .onMessage(Describe.class, this::onDescribe)
                .onMessage(AllocateChunk.class, this::onAllocateChunk)
                .onMessage(Offload.class, this::onOffload)
                .onMessage(MemberGone.class, this::onMemberEvent)
                .onMessage(Peers.class, this::onPeers)
                .onMessage(PeerDescribed.class, this::onPeerDescribed)
                .onMessage(Replicate.class, this::onReplicate)
                .onMessage(WatchPrimary.class, watch -> onWatchPrimary())
                .onMessage(Replicated.class, replicated -> dropped("a Replicated answer sent to a memory node"))
                .onMessage(FenceMember.class, this::onFenceMember)
                .onMessage(StillAbsent.class, still -> {
                    fenceClientsWithoutMember(still.clients());
                    return this;
                })
                .onSignal(PostStop.class, signal -> onPostStop())
                .build();
    }

    private Behavior<Command> onDescribe(Describe describe) {
        if (describe.replyTo() == null) {
            return dropped("a Describe without a reply address");
        }
        describe.replyTo().tell(description());
        return this;
    }

    private Description description() {
        return description(getContext().getSelf());
    }

    /** This node's description; reads only settings and the fabric, so any thread may call it. */
    private Description description(ActorRef<Command> self) {
        return description(self, ReplicaControl.status(fabric, region, settings.serverId()));
    }

    private Description description(ActorRef<Command> self, Replica replica) {
        return new Description(settings.serverId(), settings.regionBytes(), region.endpoint(), self, replica);
    }

    /**
     * A replica group change: off the actor's thread (a promotion waits out the old primary's lease, a join connects to
     * the backups), answered with the node's description after it.
     */
    private Behavior<Command> onReplicate(Replicate replicate) {
        if (replicate.replyTo() == null || replicate.op() == null) {
            return dropped("a Replicate without an operation or a reply address");
        }
        java.util.concurrent.Executor blocking = getContext().getSystem().dispatchers()
                .lookup(org.apache.pekko.actor.typed.DispatcherSelector.blocking());
        ActorRef<Replicated> replyTo = replicate.replyTo();
        ActorRef<Command> self = getContext().getSelf();
        int serverId = settings.serverId();
        java.util.concurrent.CompletableFuture.runAsync(() -> ReplicaControl.apply(fabric, region, settings.serverId(), replicate), blocking)
                .whenComplete((done, failure) -> {
                    Throwable cause = failure instanceof java.util.concurrent.CompletionException c && c.getCause() != null
                            ? c.getCause() : failure;
                    if (cause != null) {
                        REPLICA_LOG.warn("memory server {}: {} in view {} failed: {}", serverId, replicate.op(), replicate.view(),
                                cause.getMessage());
                    }
                    replyTo.tell(new Replicated(description(self), cause == null ? null : String.valueOf(cause.getMessage())));
                });
        return this;
    }

    /**
     * A complete backup whose primary's stream closed or went silent tells the coordinator, which fails over unless the
     * primary's node still answers it; said again every {@link #SUSPECT_AGAIN} while it lasts. Much sooner than the
     * cluster's failure detector, and safe however wrong: a backup becomes primary only a lease after the old primary's
     * last acknowledgement (docs/replication.md).
     */
    private Behavior<Command> onWatchPrimary() {
        long now = System.nanoTime();
        if (now - suspectedAtNanos < SUSPECT_AGAIN.toNanos()) {
            return this;
        }
        java.util.Map<String, String> lost = ReplicaControl.lostBackups(fabric, region, settings.serverId());
        if (!lost.isEmpty()) {
            // A primary: its answers wait for these backups until a view leaves them out.
            suspectedAtNanos = now;
            if (!lost.equals(reportedBackups)) {
                REPLICA_LOG.warn("memory server {}: the link to backup(s) {} broke; asking the coordinator to drop them",
                        settings.serverId(), lost);
            }
            reportedBackups = lost;
            coordinator.tell(ReplicaControl.backupsSuspected(region, description(getContext().getSelf()), lost));
            return this;
        }
        reportedBackups = java.util.Map.of();
        Replica replica = ReplicaControl.status(fabric, region, settings.serverId());
        if (replica.primaryLost() == null) {
            return this;
        }
        suspectedAtNanos = now;
        if (suspectedView != replica.view()) {
            suspectedView = replica.view();
            REPLICA_LOG.warn("memory server {}: {}; asking the coordinator to fail over", settings.serverId(), replica.primaryLost());
        }
        coordinator.tell(ReplicaControl.primarySuspected(region, description(getContext().getSelf(), replica)));
        return this;
    }

    private Behavior<Command> onAllocateChunk(AllocateChunk request) {
        if (request.replyTo() == null) {
            return dropped("an AllocateChunk without a reply address");
        }
        try {
            request.replyTo().tell(new ChunkGranted(own.chunkAllocator().allocateChunk(settings.serverId()), null));
        } catch (MemoryFullException e) {
            request.replyTo().tell(new ChunkGranted(0, e.getMessage()));
        }
        return this;
    }

    /** Fences a compute node that {@link FenceThenDown} found unreachable, before it downs it. */
    private Behavior<Command> onFenceMember(FenceMember request) {
        if (request.replyTo() == null || request.member() == null) {
            return dropped("a FenceMember without a member or a reply address");
        }
        String node = getContext().getSystem().address().toString();
        org.apache.pekko.cluster.UniqueAddress member;
        try {
            member = new org.apache.pekko.cluster.UniqueAddress(
                    org.apache.pekko.actor.AddressFromURIString.parse(request.member()), request.uid());
        } catch (RuntimeException malformed) {
            request.replyTo().tell(new MemberFenced(request.member(), request.uid(), node, false, malformed.toString()));
            return this;
        }
        long client = Fabrics.clientId(member);
        try {
            boolean fenced = fabric.fence(settings.serverId(), client);
            if (fenced) {
                // Not added to fencedMembers: its downing, which follows, fences it again (the same set, nothing more) and
                // marks it downed, so that its offloads are refused on every fabric.
                getContext().getLog().info("compute node {} is fenced before its downing; its fabric connections are closed"
                        + " and it is refused from now on (client {})", member.address(), Long.toHexString(client));
            }
            request.replyTo().tell(new MemberFenced(request.member(), request.uid(), node, fenced,
                    fenced ? null : "the " + fabric.transport() + " fabric cannot fence"));
        } catch (RuntimeException failed) {
            request.replyTo().tell(new MemberFenced(request.member(), request.uid(), node, false, failed.toString()));
        }
        return this;
    }

    /**
     * A compute node the cluster downed (or removed after downing) is fenced: before sharding hands its
     * partitions to another node (which waits for its removal), nothing it sends through this node's fabric
     * or offload path is applied any more.
     */
    private Behavior<Command> onMemberEvent(MemberGone gone) {
        Member member = gone.event().member();
        if (gone.event() instanceof ClusterEvent.MemberUp && member.uniqueAddress().equals(
                Cluster.get(getContext().getSystem()).selfMember().uniqueAddress())) {
            fenceClientsWithoutMember(null);
            return this;
        }
        if (gone.event() instanceof ClusterEvent.MemberJoined || gone.event() instanceof ClusterEvent.MemberUp
                || gone.event() instanceof ClusterEvent.MemberWeaklyUp) {
            downed.remove(member.address()); // a new incarnation at that address; the old one stays fenced
            return this;
        }
        boolean isDowned = gone.event() instanceof ClusterEvent.MemberDowned
                || gone.event() instanceof ClusterEvent.MemberRemoved removed && removed.previousStatus() == MemberStatus.down();
        if (!isDowned || !member.hasRole("compute") || !fencedMembers.add(member.uniqueAddress())) {
            return this;
        }
        downed.add(member.address());
        long client = Fabrics.clientId(member.uniqueAddress());
        try {
            boolean fenced = fabric.fence(settings.serverId(), client);
            getContext().getLog().info("compute node {} was downed: {}", member.address(), fenced
                    ? "its fabric connections are closed and it is refused from now on (client " + Long.toHexString(client) + ")"
                    : "its offloads are refused; the " + fabric.transport() + " fabric cannot revoke its one-sided access");
        } catch (RuntimeException failed) {
            // Not in place (a key the device did not deregister, say): try again, until it is.
            fencedMembers.remove(member.uniqueAddress());
            getContext().scheduleOnce(FENCE_RETRY, getContext().getSelf(), gone);
            getContext().getLog().error("compute node {} was downed but could not be fenced (trying again in {} ms): {}",
                    member.address(), FENCE_RETRY.toMillis(), failed.toString());
        }
        return this;
    }

    /** {@link AbsentClients}: the clients without a member at this node's Up are looked at again after a grace. */
    private void fenceClientsWithoutMember(Set<Long> seenAbsent) {
        Set<Long> absent = AbsentClients.withoutMember(fabric, settings.serverId(),
                Cluster.get(getContext().getSystem()).state().getMembers());
        if (seenAbsent == null) {
            if (!absent.isEmpty()) {
                getContext().scheduleOnce(AbsentClients.GRACE, getContext().getSelf(), new StillAbsent(absent));
            }
            return;
        }
        absent.retainAll(seenAbsent);
        AbsentClients.fence(fabric, settings.serverId(), absent, getContext().getLog());
    }

    private Behavior<Command> onPeers(Peers peers) {
        for (ActorRef<Command> peer : peers.listing().getServiceInstances(KEY)) {
            if (!peer.equals(getContext().getSelf()) && peersAsked.add(peer)) {
                getContext().ask(Description.class, peer, java.time.Duration.ofSeconds(10), Describe::new,
                        (description, failure) -> new PeerDescribed(peer, description, failure));
            }
        }
        return this;
    }

    /**
     * Two memory nodes claiming one server id would each serve their own region under the same addresses
     * (across hosts nothing else notices): the younger of the two refuses to serve and ends its process.
     */
    private Behavior<Command> onPeerDescribed(PeerDescribed described) {
        if (described.failure() != null) {
            peersAsked.remove(described.peer()); // asked again with the next listing
            return this;
        }
        if (described.description().serverId() != settings.serverId() || settings.replicas() > 1) {
            return this; // with replica groups, several memory nodes hold one server: the coordinator gives each its part
        }
        Cluster cluster = Cluster.get(getContext().getSystem());
        Member self = cluster.selfMember();
        Member other = null;
        for (Member member : cluster.state().getMembers()) {
            if (member.address().equals(described.peer().path().address())) {
                other = member;
            }
        }
        boolean younger = other != null ? other.isOlderThan(self)
                : described.peer().path().address().toString().compareTo(self.address().toString()) < 0;
        if (!younger) {
            getContext().getLog().warn("memory node {} at {} claims server id {} too; it is the younger and stops",
                    described.peer().path(), described.peer().path().address(), settings.serverId());
            return this;
        }
        getContext().getLog().error("memory server {} is served already by {}: this memory node refuses to serve the same"
                + " id and stops; give it another --server-id (dex.memory.server-id)", settings.serverId(),
                described.peer().path().address());
        getContext().getSystem().terminate();
        return Behaviors.stopped();
    }

    /** A message no answer can be given to: logged (it is malformed, or forged) and dropped. */
    private Behavior<Command> dropped(String what) {
        getContext().getLog().warn("{} was dropped", what);
        return this;
    }

    private Behavior<Command> onOffload(Offload offload) {
        if (offload.replyTo() == null) {
            return dropped("an Offload without a reply address");
        }
        if (downed.contains(offload.replyTo().path().address())) {
            getContext().getLog().debug("an offload from downed compute node {} is refused", offload.replyTo().path().address());
            metrics.memoryOffload("rejected");
            offload.replyTo().tell(OffloadResult.refused(offload.id(), OffloadRequest.REJECTED));
            return this;
        }
        OffloadRequest request;
        try {
            request = OffloadRequest.received(offload.phase(), offload.op(), offload.partition(), offload.epoch(), offload.words(),
                    offload.value(), offload.start());
        } catch (IllegalArgumentException bad) {
            getContext().getLog().debug("offload {} from {} refused: {}", offload.id(), offload.replyTo().path().address(), bad.getMessage());
            metrics.memoryOffload("refused");
            offload.replyTo().tell(OffloadResult.refused(offload.id(), OffloadRequest.STALE));
            return this;
        }
        try {
            offloadPool.execute(() -> run(request, offload));
        } catch (RejectedExecutionException full) {
            metrics.memoryOffload("rejected");
            offload.replyTo().tell(OffloadResult.refused(offload.id(), OffloadRequest.REJECTED));
        }
        return this;
    }

    /** On a memory-side thread: runs the request on the region and replies. */
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(MemoryNode.class);

    private static void runOn(SubtreeExecutor executor, OffloadRequest request, Offload offload, DexMetrics metrics) {
        if (offload.deadline() != 0 && System.currentTimeMillis() > offload.deadline()) {
            // The compute side stops waiting soon (or has): executed now, the operation could race its fallback.
            metrics.memoryOffload("late");
            offload.replyTo().tell(OffloadResult.refused(offload.id(), OffloadRequest.REJECTED));
            return;
        }
        int status;
        try {
            executor.run(request);
            status = request.status();
            if (executor.refusal() != null && SubtreeExecutor.warnNow()) {
                LOG.warn("offload {} from {} refused: {} (at most one such line a second)", offload.id(),
                        offload.replyTo().path().address(), executor.refusal());
            }
        } catch (RuntimeException e) {
            status = OffloadRequest.STALE;
        }
        metrics.memoryOffload(status == OffloadRequest.OK ? "ok" : status == OffloadRequest.NEEDS_SPLIT ? "needs_split" : "refused");
        int length = status == OffloadRequest.OK ? request.pathLength() : 0;
        long[] path = new long[length];
        long[] versions = new long[length];
        for (int i = 0; i < length; i++) {
            path[i] = request.pathNode(i);
            versions[i] = request.pathVersion(i);
        }
        offload.replyTo().tell(new OffloadResult(offload.id(), status, request.found(), request.value(), path, versions, length));
    }

    private void run(OffloadRequest request, Offload offload) {
        runOn(executors.get(), request, offload, metrics);
    }

    /**
     * Stops the offload threads; a region this actor opened is closed (its data kept where the fabric can: {@code shm},
     * {@code tcp} with a region directory), one its process opened stays exported.
     */
    private Behavior<Command> onPostStop() {
        offloadPool.shutdownNow();
        try {
            // An offload still running touches the region: unmapping it under that thread would crash the JVM.
            if (!offloadPool.awaitTermination(10, TimeUnit.SECONDS)) {
                getContext().getLog().error("offloaded operations still run after 10 s; the region stays mapped");
                if (ownsRegion) {
                    own.close();
                }
                return this;
            }
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
        if (ownsRegion) {
            memoryRegion.close();
        }
        return this;
    }
}
