package dev.dex.actors;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

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

import dev.dex.core.cache.CacheStats;
import dev.dex.core.cache.DexConfig;
import dev.dex.core.cache.DexEngine;
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
 */
public final class ComputeNode {
    /** How clients and tools find compute nodes. */
    public static final ServiceKey<Command> KEY = ServiceKey.create(Command.class, "dex-compute-node");

    /** Messages a compute node accepts. */
    public interface Command extends CborSerializable {
    }

    public record GetPartitionTable(ActorRef<PartitionTableReply> replyTo) implements Command {
    }

    /** The inclusive upper bounds of all partitions but the last. */
    public record PartitionTableReply(long[] upperBounds) implements CborSerializable {
    }

    public record GetStatus(ActorRef<Status> replyTo) implements Command {
    }

    /** What a compute node holds and did: partitions, verbs per kind, cache hit ratio, offloads. */
    public record Status(String address, List<Integer> partitionsHeld, long reads, long writes, long atomics, long twoSided,
                         long bytes, double cacheHitRatio, long offloads) implements CborSerializable {
    }

    private record MemoryNodes(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    private record Described(MemoryNode.Description description, Throwable failure)
            implements Command, NoSerializationVerificationNeeded {
    }

    private enum Retry implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /**
     * @param memoryNodes    memory nodes to wait for before opening the engine
     * @param engine         the engine's configuration (mode, cache, admission, offloading)
     * @param workerThreads  threads that run operations
     * @param offloadTimeout how long an offloaded request may stay unanswered before the engine falls back
     */
    public record Settings(int memoryNodes, DexConfig engine, int workerThreads, Duration offloadTimeout) {
    }

    private final ActorContext<Command> context;
    private final TimerScheduler<Command> timers;
    private final Settings settings;
    private final Fabric fabric;
    private final Map<Integer, ActorRef<MemoryNode.Command>> memory = new HashMap<>();
    private final Map<Integer, String> endpoints = new HashMap<>();

    private ComputeNode(ActorContext<Command> context, TimerScheduler<Command> timers, Settings settings, Fabric fabric) {
        this.context = context;
        this.timers = timers;
        this.settings = settings;
        this.fabric = fabric;
    }

    public static Behavior<Command> create(Settings settings, Fabric fabric) {
        return Behaviors.setup(context -> Behaviors.withTimers(timers -> {
            ActorRef<Receptionist.Listing> listings = context.messageAdapter(Receptionist.Listing.class, MemoryNodes::new);
            context.getSystem().receptionist().tell(Receptionist.subscribe(MemoryNode.KEY, listings));
            return new ComputeNode(context, timers, settings, fabric).waiting();
        }));
    }

    private Behavior<Command> waiting() {
        return Behaviors.receive(Command.class)
                .onMessage(MemoryNodes.class, this::onMemoryNodes)
                .onMessage(Described.class, this::onDescribed)
                .onMessage(Retry.class, retry -> tryOpen())
                .onMessage(GetStatus.class, get -> {
                    get.replyTo().tell(new Status(context.getSystem().address().toString(), List.of(), 0, 0, 0, 0, 0, Double.NaN, 0));
                    return Behaviors.same();
                })
                .build();
    }

    private Behavior<Command> onMemoryNodes(MemoryNodes nodes) {
        for (ActorRef<MemoryNode.Command> node : nodes.listing().getServiceInstances(MemoryNode.KEY)) {
            if (!memory.containsValue(node)) {
                context.ask(MemoryNode.Description.class, node, Duration.ofSeconds(5), MemoryNode.Describe::new, Described::new);
            }
        }
        return Behaviors.same();
    }

    private Behavior<Command> onDescribed(Described described) {
        if (described.failure() != null) {
            context.getLog().warn("a memory node did not describe itself: {}", described.failure().toString());
            return Behaviors.same();
        }
        memory.put(described.description().serverId(), described.description().node());
        endpoints.put(described.description().serverId(), described.description().endpoint());
        return memory.size() >= settings.memoryNodes() ? tryOpen() : Behaviors.same();
    }

    /** Connects and opens the engine; retries while memory server 0 has not formatted the tree yet. */
    private Behavior<Command> tryOpen() {
        int[] ids = memory.keySet().stream().mapToInt(Integer::intValue).sorted().toArray();
        RemoteMemory connection;
        DexEngine engine;
        try {
            connection = fabric.connect(endpoints);
        } catch (IllegalArgumentException notYet) {
            timers.startSingleTimer(Retry.INSTANCE, Duration.ofMillis(200));
            return Behaviors.same();
        }
        // Over a fabric that carries messages (tcp), offloads travel on the verbs' own connections; otherwise as
        // messages to the memory node actors.
        ActorOffloadChannel actorChannel = connection instanceof MessageSender ? null
                : new ActorOffloadChannel(memory, context.getSystem().scheduler(), settings.offloadTimeout(), context);
        OffloadChannel channel = actorChannel != null ? actorChannel : new MessageOffloadChannel((MessageSender) connection);
        try {
            engine = DexEngine.open(connection, settings.engine(), channel);
        } catch (IllegalStateException notFormatted) {
            connection.close();
            timers.startSingleTimer(Retry.INSTANCE, Duration.ofMillis(200));
            return Behaviors.same();
        }
        if (actorChannel != null) {
            actorChannel.replyTo(context.spawn(actorChannel.replyBehavior(), "offload-replies"));
        }
        EngineWorkers workers = new EngineWorkers(engine, settings.workerThreads(), "dex-compute");
        ClusterSharding.get(context.getSystem()).init(
                Entity.of(Partition.TYPE_KEY, entity -> Partition.create(Integer.parseInt(entity.getEntityId()), workers))
                        .withMessageExtractor(new Partition.RangeExtractor(engine.partitions()))
                        .withStopMessage(Partition.Handoff.INSTANCE)
                        .withRole("compute"));
        context.getSystem().receptionist().tell(Receptionist.register(KEY, context.getSelf()));
        context.getLog().info("compute node ready: {} memory nodes, {} partitions, engine {}", ids.length,
                engine.partitions().count(), settings.engine().mode());
        return ready(engine, workers, connection, channel);
    }

    private Behavior<Command> ready(DexEngine engine, EngineWorkers workers, RemoteMemory connection, OffloadChannel channel) {
        return Behaviors.receive(Command.class)
                .onMessage(GetPartitionTable.class, get -> {
                    get.replyTo().tell(new PartitionTableReply(engine.partitions().upperBounds()));
                    return Behaviors.same();
                })
                .onMessage(GetStatus.class, get -> {
                    List<Integer> held = new ArrayList<>();
                    for (int p = 0; p < engine.partitions().count(); p++) {
                        if (engine.holds(p)) {
                            held.add(p);
                        }
                    }
                    VerbSnapshot verbs = engine.verbs();
                    CacheStats stats = engine.stats();
                    get.replyTo().tell(new Status(context.getSystem().address().toString(), held, verbs.reads(), verbs.writes(),
                            verbs.atomics(), verbs.twoSided(), verbs.bytes(), stats.hitRatio(), stats.offloads()));
                    return Behaviors.same();
                })
                .onMessage(MemoryNodes.class, nodes -> Behaviors.same())
                .onMessage(Described.class, described -> Behaviors.same())
                .onMessage(Retry.class, retry -> Behaviors.same())
                .onSignal(PostStop.class, stop -> {
                    workers.close();
                    channel.close();
                    connection.close();
                    return Behaviors.same();
                })
                .build();
    }
}
