package dev.dex.actors.node;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.typed.Cluster;

import dev.dex.actors.CborSerializable;
import dev.dex.actors.DexMetrics;
import dev.dex.actors.partition.EngineWorkers;
import dev.dex.actors.partition.LeaveDrain;
import dev.dex.actors.partition.Partition;
import dev.dex.actors.partition.PartitionRouter;
import dev.dex.actors.partition.ProbedRebalance;
import dev.dex.core.cache.CacheStats;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.offload.MessageOffloadChannel;
import dev.dex.core.offload.OffloadChannel;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbSnapshot;

/**
 * A compute node (role {@code compute}): finds the memory nodes through the Receptionist, connects the
 * fabric to them, opens the DEX engine and its worker threads, and starts the sharded {@link Partition}
 * entities, which sharding places on compute nodes. Answers the partition table (for clients) and its
 * status (partitions held, verbs, cache).
 *
 * <p>Start-up never gives up: a memory node that does not describe itself in time is asked again, and a
 * pool that cannot be connected or opened yet is tried again, after pauses that grow ({@link Backoff}),
 * each attempt logged, until it works or the node stops (docs/cluster.md, "Start-up").
 */
public final class ComputeNode {
    /** How clients and tools find compute nodes. */
    public static final ServiceKey<Command> KEY = ServiceKey.create(Command.class, "dex-compute-node");

    /**
     * Messages a compute node accepts. Only the messages that may come from another process are serializable
     * ({@link CborSerializable}, or a binding of their own to {@link dev.dex.actors.partition.BatchSerializer});
     * the actor's internal messages are not, so no other process can forge them (a forged completion could, say,
     * drive a count of work in flight negative).
     *
     * <p>Sealed, so that the list below is the actor's whole protocol: no class elsewhere can become one of its
     * messages.
     */
    public sealed interface Command permits GetPartitionTable, GetStatus, MemoryNodes, Described, DescribeAgain, Retry, Checkpoint,
            CheckpointDone, HealthTick, Repaired, Fenced, Engines, Relocated, Groups {
    }

    /** A new version of the replica groups' map (docs/replication.md): compute nodes follow each server's primary. */
    private record Groups(ReplicaGroups groups) implements Command, org.apache.pekko.actor.NoSerializationVerificationNeeded {
    }

    public record GetPartitionTable(ActorRef<PartitionTableReply> replyTo) implements Command, CborSerializable {
    }

    /**
     * The partition table: the inclusive upper bounds of all partitions but the last, their ids in key order (null: 0 to
     * n - 1), and its version (docs/partition-splits.md).
     */
    public record PartitionTableReply(long[] upperBounds, int[] ids, long version) implements CborSerializable {
        /** The table these describe. */
        public dev.dex.core.partition.PartitionTable table() {
            return ids == null ? dev.dex.core.partition.PartitionTable.ofUpperBounds(upperBounds)
                    : dev.dex.core.partition.PartitionTable.of(upperBounds, ids);
        }
    }

    public record GetStatus(ActorRef<Status> replyTo) implements Command, CborSerializable {
    }

    /**
     * What a compute node holds and did: partitions, verbs per kind, cache hit ratio, offloads, and the memory servers
     * it uses whose memory node is out of the cluster as it last looked (empty while all are members), and, for replicated
     * servers that lost every replica, why each is lost ({@code memoryServersLost}, naming the replicas). And the operations
     * per second of each partition held ({@code partitionRates}, in that order) over its last window of
     * {@code loadWindowSeconds} ({@code dex.compute.load-window}; 0 with no rates before the first window closed, or if
     * the rates do not match the partitions).
     */
    public record Status(String address, List<Integer> partitionsHeld, long reads, long writes, long atomics, long twoSided,
                         long bytes, double cacheHitRatio, long offloads, List<Integer> memoryServersOut,
                         List<String> memoryServersLost, String jvm, long jvmAllocatedBytes, List<Double> partitionRates,
                         double loadWindowSeconds, long tableVersion, long splits, long merges) implements CborSerializable {
        public Status {
            memoryServersOut = memoryServersOut == null ? List.of() : List.copyOf(memoryServersOut);
            memoryServersLost = memoryServersLost == null ? List.of() : List.copyOf(memoryServersLost);
            partitionRates = partitionRates == null ? List.of() : List.copyOf(partitionRates);
            if (partitionsHeld == null || partitionRates.size() != partitionsHeld.size()) { // not measured, or malformed
                partitionRates = List.of();
                loadWindowSeconds = 0;
            }
        }

        /** A status of this JVM ({@link JvmAllocation}). */
        public Status(String address, List<Integer> partitionsHeld, long reads, long writes, long atomics, long twoSided,
                      long bytes, double cacheHitRatio, long offloads, List<Integer> memoryServersOut, List<String> memoryServersLost) {
            this(address, partitionsHeld, reads, writes, atomics, twoSided, bytes, cacheHitRatio, offloads, memoryServersOut,
                    memoryServersLost, JvmAllocation.jvm(), JvmAllocation.allocatedBytes(), List.of(), 0, 0, 0, 0);
        }
    }

    private record MemoryNodes(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    private record Described(ActorRef<MemoryNode.Command> node, int attempt, MemoryNode.Description description,
                             Throwable failure) implements Command, NoSerializationVerificationNeeded {
    }

    private record DescribeAgain(ActorRef<MemoryNode.Command> node, int attempt)
            implements Command, NoSerializationVerificationNeeded {
    }

    private enum Retry implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    private enum Checkpoint implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    private enum CheckpointDone implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /** The periodic look at the engine's health: repairs what failed verbs left, and leaves when writes keep failing. */
    private enum HealthTick implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /** A repair run on a worker ended; {@code failure} is null when it worked. */
    private record Repaired(Throwable failure) implements Command, NoSerializationVerificationNeeded {
    }

    /** A memory node fenced this compute node: nothing it sends is applied any more. */
    private enum Fenced implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    private record Engines(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    /** A memory server's link was pointed at {@code endpoint} (off the actor's thread); {@code failure} null when it was. */
    private record Relocated(int server, String endpoint, String before, boolean moved, Throwable failure, String node)
            implements Command, NoSerializationVerificationNeeded {
    }

    /**
     * @param memoryNodes     memory nodes to wait for before opening the engine
     * @param engine          the engine's configuration (mode, cache, admission, offloading)
     * @param workerThreads   threads that run operations
     * @param offloadTimeout  how long an offloaded request may stay unanswered before the engine falls back
     * @param describeTimeout how long a memory node may take to describe itself before it is asked again
     * @param handshake       pauses between attempts to describe a memory node and to connect and open the tree
     * @param redoLog         whether writes are logged before they are acknowledged, and the log length
     * @param checkpointInterval how often the partitions held write their dirty pages back and move their logs'
     *                        checkpoints (bounds how much a takeover replays and how long a page stays dirty)
     * @param rebalanceProbeTimeout how long every shard region and member may take to answer a probe before a round of
     *                        sharding's rebalance moves nothing ({@link ProbedRebalance})
     * @param writeBackTimeout how long the engine's writes may keep failing before the node reports itself not ready
     *                        and leaves the cluster
     * @param replicas        memory nodes per memory server ({@code dex.memory.replicas}): above 1 the node uses only each
     *                        group's primary, as the replica groups' map names it, and runs the group coordinator's singleton
     * @param leave           how a graceful leave hands the node's partitions over ({@link LeaveDrain})
     * @param mergeSweep      how long a partition's deletes must have stopped before its leaves are swept ({@link MergeSweep}; 0: never)
     */
    public record Settings(int memoryNodes, DexEngineSettings engine, int workerThreads, Duration offloadTimeout,
                           Duration describeTimeout, Backoff handshake, RedoLogSettings redoLog, Duration checkpointInterval,
                           Duration rebalanceProbeTimeout, Duration writeBackTimeout, int replicas, LeaveDrain.Settings leave,
                           Duration mergeSweep) {
        /** Memory servers of one replica each ({@code dex.memory.replicas = 1}); a leave's default handoff group. */
        public Settings(int memoryNodes, DexEngineSettings engine, int workerThreads, Duration offloadTimeout,
                        Duration describeTimeout, Backoff handshake, RedoLogSettings redoLog, Duration checkpointInterval,
                        Duration rebalanceProbeTimeout, Duration writeBackTimeout) {
            this(memoryNodes, engine, workerThreads, offloadTimeout, describeTimeout, handshake, redoLog, checkpointInterval,
                    rebalanceProbeTimeout, writeBackTimeout, 1, LeaveDrain.Settings.DEFAULTS, MergeSweep.DEFAULT);
        }

        /** With the default handshake settings and the redo log on. */
        public Settings(int memoryNodes, DexEngineSettings engine, int workerThreads, Duration offloadTimeout) {
            this(memoryNodes, engine, workerThreads, offloadTimeout, Duration.ofSeconds(5), Backoff.DEFAULTS);
        }

        /** With the redo log on, checkpoints every 5 s, 400 ms for a rebalance probe, a write-back timeout of 10 s. */
        public Settings(int memoryNodes, DexEngineSettings engine, int workerThreads, Duration offloadTimeout,
                        Duration describeTimeout, Backoff handshake) {
            this(memoryNodes, engine, workerThreads, offloadTimeout, describeTimeout, handshake, RedoLogSettings.ON,
                    Duration.ofSeconds(5), Duration.ofMillis(400), Duration.ofSeconds(10));
        }
    }

    /** How compute nodes learn which engine instances are still members: one registration per engine. */
    static final ServiceKey<Void> ENGINES = ServiceKey.create(Void.class, "dex-engine-instance");
    private static final String ENGINE_PREFIX = "engine-";

    private final ActorContext<Command> context;
    private final TimerScheduler<Command> timers;
    private final Settings settings;
    /** When this node splits a partition it holds ({@code dex.compute.split}). */
    private final dev.dex.actors.partition.SplitPolicy splitPolicy;
    private final Fabric fabric;
    private final Map<Integer, ActorRef<MemoryNode.Command>> memory = new HashMap<>();
    private final Map<Integer, String> endpoints = new HashMap<>();
    /** The memory nodes of the Receptionist's latest listing. */
    private Set<ActorRef<MemoryNode.Command>> listed = Set.of();
    /** Memory nodes asked to describe themselves, or waiting to be asked again. */
    private final Set<ActorRef<MemoryNode.Command>> asking = new HashSet<>();
    private int openAttempts;
    /** The adapter both Receptionist subscriptions answer through. */
    private ActorRef<Receptionist.Listing> listings;
    /** Engine instances in the latest listing; one that leaves it is gone for good. */
    private final Set<Long> instancesSeen = new HashSet<>();
    /** A periodic checkpoint is running on the workers; the next tick waits for it. */
    private boolean checkpointRunning;

    private ComputeNode(ActorContext<Command> context, TimerScheduler<Command> timers, Settings settings, Fabric fabric) {
        this.context = context;
        this.timers = timers;
        this.settings = settings;
        this.splitPolicy = dev.dex.actors.partition.SplitPolicy.from(context.getSystem().settings().config());
        this.sweep = new MergeSweep(settings.mergeSweep());
        this.fabric = fabric;
    }

    public static Behavior<Command> create(Settings settings, Fabric fabric) {
        return Behaviors.setup(context -> Behaviors.withTimers(timers -> {
            context.setLoggerName(ComputeNode.class); // as ReplicaCoordinator's: not from the stack of its first use
            // One adapter per message class: listings of both keys come through it, told apart by their key.
            ActorRef<Receptionist.Listing> listings = context.messageAdapter(Receptionist.Listing.class,
                    listing -> listing.isForKey(ENGINES) ? new Engines(listing) : new MemoryNodes(listing));
            context.getSystem().receptionist().tell(Receptionist.subscribe(MemoryNode.KEY, listings));
            ComputeNode node = new ComputeNode(context, timers, settings, fabric);
            node.listings = listings;
            if (settings.replicas() > 1) {
                ReplicaCoordinator.start(context.getSystem(), settings.replicas());
                ReplicaGroups.subscribe(context, Groups::new);
            }
            return node.waiting();
        }));
    }

    private Behavior<Command> waiting() {
        return Behaviors.receive(Command.class)
                .onMessage(MemoryNodes.class, this::onMemoryNodes)
                .onMessage(Described.class, this::onDescribed)
                .onMessage(DescribeAgain.class, this::onDescribeAgain)
                .onMessage(Retry.class, retry -> tryOpen())
                .onMessage(Groups.class, this::onGroups)
                .onMessage(GetStatus.class, get -> {
                    get.replyTo().tell(new Status(context.getSystem().address().toString(), List.of(), 0, 0, 0, 0, 0, Double.NaN, 0, List.of(),
                            List.of()));
                    return Behaviors.same();
                })
                .build();
    }

    private Behavior<Command> onDescribeAgain(DescribeAgain again) {
        if (listed.contains(again.node()) && !memory.containsValue(again.node())) {
            describe(again.node(), again.attempt());
        } else {
            asking.remove(again.node());
        }
        return Behaviors.same();
    }

    private Behavior<Command> onMemoryNodes(MemoryNodes nodes) {
        listed = Set.copyOf(nodes.listing().getServiceInstances(MemoryNode.KEY));
        for (ActorRef<MemoryNode.Command> node : listed) {
            if (!memory.containsValue(node) && asking.add(node)) {
                describe(node, 1);
            }
        }
        return Behaviors.same();
    }

    private void describe(ActorRef<MemoryNode.Command> node, int attempt) {
        context.ask(MemoryNode.Description.class, node, settings.describeTimeout(), MemoryNode.Describe::new,
                (description, failure) -> new Described(node, attempt, description, failure));
    }

    /** A description, or a failure to get one: then ask again after a pause, as long as the node is listed. */
    private Behavior<Command> onDescribed(Described described) {
        ActorRef<MemoryNode.Command> node = described.node();
        if (described.failure() != null) {
            if (!listed.contains(node)) {
                asking.remove(node);
                context.getLog().info("memory node {} left before it described itself", node.path());
                return Behaviors.same();
            }
            Duration pause = settings.handshake().after(described.attempt());
            context.getLog().warn("memory node {} did not describe itself (attempt {}): {}; asking again in {} ms", node.path(),
                    described.attempt(), described.failure().toString(), pause.toMillis());
            timers.startSingleTimer(node, new DescribeAgain(node, described.attempt() + 1), pause);
            return Behaviors.same();
        }
        asking.remove(node);
        if (!follows(described.description())) {
            return Behaviors.same();
        }
        if (described.attempt() > 1) {
            context.getLog().info("memory node {} described itself at attempt {}", node.path(), described.attempt());
        }
        memory.put(described.description().serverId(), described.description().node());
        endpoints.put(described.description().serverId(), described.description().endpoint());
        return memory.size() >= settings.memoryNodes() ? tryOpen() : Behaviors.same();
    }

    /**
     * Connects and opens the engine. Until that works (memory server 0 has not formatted the tree yet, a
     * region is not exported or not reachable yet), tries again after a pause, logging each attempt.
     */
    private Behavior<Command> tryOpen() {
        int[] ids = memory.keySet().stream().mapToInt(Integer::intValue).sorted().toArray();
        openAttempts++;
        RemoteMemory connection = null;
        ActorOffloadChannel actorChannel = null;
        OffloadChannel channel;
        DexEngine engine;
        try {
            GroupsClient.Pool pool = GroupsClient.open(fabric, settings, groups, ids, endpoints,
                    Fabrics.clientId(Cluster.get(context.getSystem()).selfMember().uniqueAddress()), context.getSystem().log());
            connection = pool.connection();
            replicated = pool.replicated();
            // Over a fabric that carries messages (tcp), offloads travel on the verbs' own connections; otherwise as
            // messages to the memory node actors.
            actorChannel = connection instanceof MessageSender ? null
                    : new ActorOffloadChannel(memory, context.getSystem().scheduler(), settings.offloadTimeout(), context);
            channel = actorChannel != null ? actorChannel : new MessageOffloadChannel((MessageSender) connection);
            engine = DexEngine.open(connection, pool.engine(), channel, settings.redoLog());
        } catch (RuntimeException notYet) {
            if (actorChannel != null) {
                actorChannel.close();
            }
            if (connection != null) {
                connection.close();
            }
            replicated = null;
            Duration pause = settings.handshake().after(openAttempts);
            // Not formatted yet, or a region not exported yet: expected while the cluster starts.
            boolean starting = notYet instanceof IllegalStateException || notYet instanceof IllegalArgumentException;
            String message = "the memory pool cannot be opened yet (attempt {}): {}; trying again in {} ms";
            if (starting) {
                context.getLog().info(message, openAttempts, notYet.getMessage(), pause.toMillis());
            } else {
                context.getLog().warn(message, openAttempts, notYet.toString(), pause.toMillis());
            }
            timers.startSingleTimer(Retry.INSTANCE, Retry.INSTANCE, pause);
            return Behaviors.same();
        }
        if (actorChannel != null) {
            actorChannel.replyTo(context.spawn(actorChannel.replyBehavior(), "offload-replies"));
        }
        // Any compute node can now tell whether a remote lock of this instance has a living holder: the instance's
        // member is in the registry, and the cluster's membership says whether a member is still in the cluster.
        Cluster cluster = Cluster.get(context.getSystem());
        try {
            engine.registerInstance(Fabrics.clientId(cluster.selfMember().uniqueAddress()));
        } catch (RuntimeException notNow) {
            context.getLog().warn("engine instance {} could not be registered ({}); other nodes will not take its remote"
                    + " locks over should it die without leaving", engine.instanceId(), notNow.toString());
        }
        engine.instanceLiveness(uid -> Fabrics.isMember(cluster, uid));
        com.typesafe.config.Config config = context.getSystem().settings().config();
        EngineWorkers workers = new EngineWorkers(engine, settings.workerThreads(), "dex-compute",
                config.getDuration("dex.compute.load-window"), config.getBoolean("dex.compute.warm-on-acquire"));
        ActorRef<Command> self = context.getSelf();
        workers.onFenced(() -> self.tell(Fenced.INSTANCE));
        ActorRef<Partition.Command> region = ClusterSharding.get(context.getSystem()).init(
                Entity.of(Partition.TYPE_KEY, entity -> Partition.create(Integer.parseInt(entity.getEntityId()), workers, entity.getShard()))
                        .withMessageExtractor(new Partition.IdExtractor())
                        .withStopMessage(Partition.Handoff.INSTANCE)
                        .withAllocationStrategy(new ProbedRebalance(settings.rebalanceProbeTimeout(),
                                ProbedRebalance.coordinatorPath(context.getSystem(), Partition.TYPE_KEY.name()),
                                settings.leave().group()))
                        .withRole("compute"));
        // Clients send this node the batches of all the partitions it serves in one message (PartitionRouter).
        // A graceful leave hands the partitions over a few per rebalance round, then the router refuses what still comes.
        ActorRef<PartitionRouter.Command> router = context.spawn(PartitionRouter.create(region), "partition-router");
        LeaveDrain.onShutdown(context.getSystem(), Partition.TYPE_KEY, settings.leave(), () -> workers.held().size(),
                () -> PartitionRouter.leave(context.getSystem(), router));
        // Batches sharding drops while a partition moves are answered NOT_HELD at once, not left to time out.
        context.spawn(DroppedBatches.create(context.getSystem().address().toString()), "dropped-batches");
        context.getSystem().receptionist().tell(Receptionist.register(KEY, context.getSelf()));
        // The engine instance is a member as long as this registration is listed; a compute node that is
        // removed from the cluster disappears from the listing, and its remote locks may be taken over.
        ActorRef<Void> instance = context.spawn(Behaviors.empty(), ENGINE_PREFIX + engine.instanceId());
        context.getSystem().receptionist().tell(Receptionist.register(ENGINES, instance));
        context.getSystem().receptionist().tell(Receptionist.subscribe(ENGINES, listings));
        if (engine.logsWrites()) {
            timers.startTimerWithFixedDelay(Checkpoint.INSTANCE, Checkpoint.INSTANCE, settings.checkpointInterval());
        }
        timers.startTimerWithFixedDelay(HealthTick.INSTANCE, HealthTick.INSTANCE, HEALTH_INTERVAL);
        context.getLog().info("compute node ready: {} memory nodes, {} partitions, engine {} (instance {}), redo log {}", ids.length,
                engine.partitions().count(), settings.engine().mode(), engine.instanceId(), engine.logsWrites() ? "on" : "off");
        this.actorChannel = actorChannel;
        return ready(engine, workers, connection, channel);
    }

    /** Offloads as actor messages (fabrics without messages of their own); null over tcp. Set once ready. */
    private ActorOffloadChannel actorChannel;

    /**
     * Once ready, a memory node that (re)appears in the listing describes itself again: one that restarted on its
     * kept region (docs/replication.md, "A memory node restarts") may answer at another fabric endpoint, which the
     * connection moves to, and is another actor, which offload messages go to from now on. Its region must be the one
     * the connection found at the start (the fabric checks its incarnation); a memory server this node did not open
     * the pool with is not used until the node restarts.
     */
    private Behavior<Command> onDescribedWhileReady(Described described, RemoteMemory connection) {
        if (described.failure() != null) {
            return onDescribed(described); // asked again after a pause, while listed
        }
        asking.remove(described.node());
        MemoryNode.Description description = described.description();
        int server = description.serverId();
        if (!follows(description)) {
            return Behaviors.same();
        }
        if (!memory.containsKey(server)) {
            context.getLog().warn("memory server {} at {} joined after this compute node opened the memory pool; it is not used"
                    + " until this node restarts", server, description.node().path().address());
            return Behaviors.same();
        }
        memory.put(server, description.node());
        if (actorChannel != null) {
            actorChannel.serverAt(server, description.node());
        }
        String before = endpoints.put(server, description.endpoint());
        // Off the actor's thread: the link's lock may be held by a worker reconnecting (up to the connect timeout).
        java.util.concurrent.Executor blocking = context.getSystem().dispatchers()
                .lookup(org.apache.pekko.actor.typed.DispatcherSelector.blocking());
        String endpoint = description.endpoint();
        String node = description.node().path().address().toString();
        context.pipeToSelf(java.util.concurrent.CompletableFuture.supplyAsync(() -> connection.relocate(server, endpoint), blocking),
                (moved, failure) -> new Relocated(server, endpoint, before, moved != null && moved, failure, node));
        return Behaviors.same();
    }

    /** With replica groups on {@code local}: this node's connection, which writes every replica of each view. */
    private dev.dex.rdma.replica.ReplicatedRemoteMemory replicated;

    /** The replica groups' map as this node last heard of it. */
    private ReplicaGroups groups = ReplicaGroups.EMPTY;
    /** Per memory server, the newest view of its group whose primary this node follows (replicas above 1). */
    private final Map<Integer, Long> views = new HashMap<>();

    /**
     * Whether this node uses the region of the memory node {@code description} describes: with replica groups, only a
     * group's primary, and only of a view no older than the one followed (a backup, or a replaced primary, serves no
     * client); otherwise every memory node.
     */
    private boolean follows(MemoryNode.Description description) {
        if (settings.replicas() <= 1) {
            return true;
        }
        MemoryNode.Replica replica = description.replica();
        if (!MemoryNode.Replica.PRIMARY_ROLE.equals(replica.role())
                || replica.view() < views.getOrDefault(description.serverId(), 0L)) {
            ReplicaGroups.Group group = groups.group(description.serverId());
            if (group != null && group.primary().node().equals(description.node())) {
                // The map names it primary before it is told (the map is stored first): ask again shortly.
                timers.startSingleTimer(description.node(), new DescribeAgain(description.node(), 1), Duration.ofMillis(100));
            }
            return false;
        }
        views.put(description.serverId(), replica.view());
        return true;
    }

    /**
     * The replica groups' map changed: each server's primary that this node does not use yet is asked to describe itself,
     * and followed once it says it is primary (a promoted backup: {@link #onDescribedWhileReady} moves the connection to it).
     */
    private Behavior<Command> onGroups(Groups changed) {
        groups = changed.groups();
        context.getLog().info("replica groups: {}", groups.describe());
        GroupsClient.follow(replicated, fabric, groups, context.getSystem(), context.getLog());
        for (ReplicaGroups.Group group : changed.groups().groups()) {
            ActorRef<MemoryNode.Command> primary = group.primary().node();
            if (!primary.equals(memory.get(group.serverId())) && asking.add(primary)) {
                describe(primary, 1);
            }
        }
        return Behaviors.same();
    }

    private Behavior<Command> onRelocated(Relocated relocated) {
        if (relocated.failure() != null) {
            Throwable cause = relocated.failure() instanceof java.util.concurrent.CompletionException c && c.getCause() != null
                    ? c.getCause() : relocated.failure();
            context.getLog().error("memory server {} is back at {} but cannot be reached there: {}", relocated.server(),
                    relocated.endpoint(), cause.getMessage());
        } else {
            context.getLog().info("memory server {} is back ({}){}", relocated.server(), relocated.node(), relocated.moved()
                    ? ": its region is now reached at " + relocated.endpoint() + " (was " + relocated.before() + ")" : "");
        }
        return Behaviors.same();
    }

    /** How often the engine's health is looked at. */
    static final Duration HEALTH_INTERVAL = Duration.ofSeconds(1);

    /**
     * The health tick: while writes fail or remote locks wait to be released, a worker retries ({@link DexEngine#repair});
     * once writes have been failing for longer than the write-back timeout, the node reports itself not ready and
     * leaves, so that its partitions move to nodes that can write (with the redo log, nothing acknowledged is lost:
     * the next owner fences this node and replays).
     */
    private void onHealthTick(DexEngine engine, EngineWorkers workers, RemoteMemory connection) {
        long since = engine.writesFailingSinceNanos();
        long now = System.nanoTime();
        workers.load().roll(now);
        splitPolicy.tick(engine, workers, context.getLog(), !leavingForHealth
                && Cluster.get(context.getSystem()).selfMember().status() == org.apache.pekko.cluster.MemberStatus.up());
        GroupsClient.follow(replicated, fabric, groups, context.getSystem(), context.getLog()); // again: an install may have failed
        LostServers.Seen seen = lostServers.update(Cluster.get(context.getSystem()), fabric.transport(), settings.replicas(),
                memory, endpoints, groups, connection, context.getLog());
        List<Integer> out = seen.out();
        List<String> lost = seen.lost();
        // Not ready while a memory server is out: keys whose tree nodes or logs live there cannot be served.
        String problem = out.isEmpty() ? null : "memory server(s) " + out + " are out of the cluster: operations on the keys"
                + " and partitions they hold fail until they are back" + (lost.isEmpty() ? "" : "; " + String.join("; ", lost));
        if (!java.util.Objects.equals(problem, lastProblem) && !leavingForHealth) {
            NodeHealth.get(context.getSystem()).problem(problem);
            lastProblem = problem;
        }
        lastOut = out;
        lastLost = lost;
        long failingAlone = lostServers.failingAlone(memory.keySet(), out, now, engine, replicated);
        boolean tooLong = since != 0 && now - since > settings.writeBackTimeout().toNanos();
        if (tooLong && failingAlone == 0) {
            // Every compute node fails the same way while a memory node is out of the cluster (it restarts, or the
            // cluster downed it): leaving would move the partitions to nodes that cannot write either, and end the
            // service for good instead of for the restart. The node waits for the memory node and serves again once
            // its writes go through.
            if (!waitingForMemory) {
                waitingForMemory = true;
                context.getLog().warn("writes have failed for more than {} ms while memory server(s) {} are out of the cluster;"
                        + " this compute node waits for them rather than leave", settings.writeBackTimeout().toMillis(), out);
            }
        } else if (failingAlone != 0 && now - failingAlone > settings.writeBackTimeout().toNanos() && !leavingForHealth) {
            leavingForHealth = true;
            Throwable last = engine.lastWriteFailure();
            String why = (engine.writesFailingSinceNanos() != 0 ? "writes to the memory nodes have failed"
                    : "reads of a replicated memory server have found no read lease") + " for more than "
                    + settings.writeBackTimeout().toMillis() + " ms (" + (last == null ? "unknown" : last.getMessage()) + ")";
            NodeHealth.get(context.getSystem()).problem(why);
            context.getLog().error("this compute node is not ready: {}; it leaves the cluster so its partitions move to nodes"
                    + " that can write", why);
            Cluster cluster = Cluster.get(context.getSystem());
            cluster.manager().tell(org.apache.pekko.cluster.typed.Leave.create(cluster.selfMember().address()));
        }
        if (since == 0 && waitingForMemory) {
            waitingForMemory = false;
            context.getLog().info("writes to the memory nodes go through again");
        }
        sweep.tick(engine, workers, out.isEmpty() && !leavingForHealth);
        if ((since != 0 || engine.pendingUnlocks() > 0) && !repairRunning) {
            repairRunning = true;
            context.pipeToSelf(workers.submit(engine::repair), (left, failure) -> new Repaired(failure));
        }
    }

    private boolean repairRunning, leavingForHealth;
    /** Writes fail while a memory node is out of the cluster: logged once, until writes work again. */
    private boolean waitingForMemory;
    /** The memory servers out of the cluster at the last health tick, and what the node's health said of them. */
    private List<Integer> lastOut = List.of();
    private String lastProblem;
    private List<String> lastLost = List.of();
    /** Replicated memory servers that lost every replica, marked on the connection. */
    private final LostServers lostServers = new LostServers();
    private final MergeSweep sweep;

    private void onEngines(DexEngine engine, Engines engines) {
        Set<Long> now = new HashSet<>();
        for (ActorRef<Void> ref : engines.listing().getAllServiceInstances(ENGINES)) {
            String name = ref.path().name();
            if (name.startsWith(ENGINE_PREFIX)) {
                try {
                    now.add(Long.parseLong(name.substring(ENGINE_PREFIX.length())));
                } catch (NumberFormatException ignored) {
                    context.getLog().warn("an engine registration with an unexpected name: {}", ref.path());
                }
            }
        }
        for (Long seen : instancesSeen) {
            if (!now.contains(seen)) {
                context.getLog().info("engine instance {} left the cluster: its remote locks may be taken over", seen);
                engine.instanceGone(seen);
            }
        }
        instancesSeen.clear();
        instancesSeen.addAll(now);
    }

    private Behavior<Command> ready(DexEngine engine, EngineWorkers workers, RemoteMemory connection, OffloadChannel channel) {
        DexMetrics.get(context.getSystem()).engine(engine, workers.load());
        return Behaviors.receive(Command.class)
                .onMessage(GetPartitionTable.class, get -> {
                    dev.dex.core.partition.PartitionTable.Versioned served = engine.servedTable(false); // one snapshot
                    get.replyTo().tell(new PartitionTableReply(served.table().upperBounds(), served.table().ids(), served.version()));
                    return Behaviors.same();
                })
                .onMessage(GetStatus.class, get -> {
                    List<Integer> held = workers.held();
                    dev.dex.actors.PartitionLoad.Measured load = workers.load().last(held);
                    VerbSnapshot verbs = engine.verbs();
                    CacheStats stats = engine.stats();
                    get.replyTo().tell(new Status(context.getSystem().address().toString(), held, verbs.reads(), verbs.writes(),
                            verbs.atomics(), verbs.twoSided(), verbs.bytes(), stats.hitRatio(), stats.offloads(), lastOut,
                            lastLost, JvmAllocation.jvm(), JvmAllocation.allocatedBytes(), load.rates(), load.seconds(),
                            engine.servedTable(false).version(), workers.load().splits(), workers.load().merges()));
                    return Behaviors.same();
                })
                .onMessage(Engines.class, engines -> {
                    onEngines(engine, engines);
                    return Behaviors.same();
                })
                .onMessage(Checkpoint.class, tick -> {
                    if (!checkpointRunning) {
                        checkpointRunning = true;
                        context.pipeToSelf(workers.submit(engine::checkpointAll), (pages, failure) -> {
                            if (failure != null) {
                                context.getLog().warn("a periodic checkpoint failed: {}", failure.toString());
                                workers.noteFailure(failure);
                            }
                            return CheckpointDone.INSTANCE;
                        });
                    }
                    return Behaviors.same();
                })
                .onMessage(Fenced.class, fenced -> {
                    // Another compute node took over a partition of this one without a handoff (this node was
                    // cut off, paused or downed): it cannot serve anything any more. Leaving moves every
                    // partition it still holds to a node that can, whose takeover replays their logs.
                    context.getLog().error("a memory node fenced this compute node: nothing it writes is applied any more;"
                            + " it leaves the cluster (start it again to rejoin)");
                    Cluster cluster = Cluster.get(context.getSystem());
                    cluster.manager().tell(org.apache.pekko.cluster.typed.Leave.create(cluster.selfMember().address()));
                    return Behaviors.same();
                })
                .onMessage(HealthTick.class, tick -> {
                    onHealthTick(engine, workers, connection);
                    return Behaviors.same();
                })
                .onMessage(Repaired.class, repaired -> {
                    repairRunning = false;
                    if (repaired.failure() != null) {
                        context.getLog().debug("a repair after failed writes did not succeed yet: {}", repaired.failure().toString());
                    }
                    return Behaviors.same();
                })
                .onMessage(CheckpointDone.class, done -> {
                    checkpointRunning = false;
                    return Behaviors.same();
                })
                .onMessage(MemoryNodes.class, this::onMemoryNodes)
                .onMessage(Described.class, described -> onDescribedWhileReady(described, connection))
                .onMessage(DescribeAgain.class, this::onDescribeAgain)
                .onMessage(Relocated.class, relocated -> { // back: its lost mark goes now, not at the next tick
                    lastLost = lostServers.update(Cluster.get(context.getSystem()), fabric.transport(),
                            settings.replicas(), memory, endpoints, groups, connection, context.getLog()).lost();
                    return onRelocated(relocated);
                })
                .onMessage(Groups.class, this::onGroups)
                .onMessage(Retry.class, retry -> Behaviors.same())
                .onSignal(PostStop.class, stop -> {
                    DexMetrics.get(context.getSystem()).engineStopped(engine, workers.load());
                    if (!workers.closeAndWait()) {
                        // A worker is still inside an operation: closing the connection would unmap memory it
                        // uses (shm). The process is going away; its mappings go with it.
                        context.getLog().error("workers still run 10 s after the node stopped; the memory pool stays"
                                + " connected until the process exits");
                        return Behaviors.same();
                    }
                    channel.close();
                    connection.close();
                    return Behaviors.same();
                })
                .build();
    }
}
