package dev.dex.actors.partition;

import java.time.Duration;
import java.util.HashSet;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.IntSupplier;
import java.util.function.Supplier;

import org.apache.pekko.Done;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.sharding.ShardRegion;
import org.apache.pekko.cluster.sharding.typed.GetShardRegionState;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.cluster.typed.Cluster;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A graceful leave that hands a compute node's partitions over a few at a time, each serving until its own handoff.
 *
 * <p>Why. Pekko's own graceful shutdown of a shard region hands every shard off in one go: every partition of the
 * node stops at once, the survivors take all of them cold at once, and a client whose operations are spread over
 * all partitions sees nothing complete for the length of the handoff round (docs/cluster.md, "A graceful leave").
 *
 * <p>How. In the first phase of the node's coordinated shutdown ({@code before-service-unbind}), before the region's
 * own shutdown, the node lists itself as <em>draining</em> with the Receptionist under {@link #DRAINING}. Every
 * compute node keeps the listed addresses ({@link #draining}), so whichever node runs the shard coordinator
 * knows them: {@link ProbedRebalance} then proposes, at each rebalance round, up to
 * {@link Settings#group()} of the draining regions' partitions (and nothing else), and never allocates a partition
 * to a draining region. The leaving node polls its own region's partitions until none is left, then lets its
 * router refuse what still comes ({@link PartitionRouter}'s {@code Leaving}) and the shutdown goes on: the region's
 * own shutdown finds nothing to hand off. The drain is skipped (today's all-at-once handoff follows) when the node is
 * not {@code Up} (it was downed, or it is leaving by {@code Cluster.leave}, which Pekko runs the shutdown for only once
 * the node is already exiting), when no other compute node is up and not draining itself (nowhere to drain to; also
 * when every compute node is stopped at once), when the whole cluster is being stopped ({@link #CLUSTER_STOP}), or
 * when {@link Settings#group()} is 0. A drain that has not ended by {@link Settings#timeout()} gives up: the
 * region's shutdown hands the rest off together, as before.
 *
 * <p>The listing spreads by the Receptionist's gossip ({@code dex-cluster.conf}: every 250 ms); the first round comes
 * at the coordinator's next rebalance tick ({@code pekko.cluster.sharding.rebalance-interval}, 1 s), so a node with
 * {@code p} partitions leaves in about {@code 1 s * ceil(p / group)} plus a round.
 *
 * <pre>
 * Concurrency: the drain is an actor ({@link #drain}); its result completes a future on the actor's thread. The
 * registry's set of draining addresses is replaced whole by its subscriber actor and read by the coordinator's
 * strategy on any thread: a volatile reference to an immutable set.
 * </pre>
 */
public final class LeaveDrain {
    /** A compute node that drains lists a marker actor under this key for as long as it runs. */
    static final ServiceKey<Void> DRAINING = ServiceKey.create(Void.class, "dex-draining-compute-node");
    /** How often the leaving node counts the partitions its region still holds. */
    static final Duration POLL = Duration.ofMillis(200);
    /** What the first shutdown phase must keep after the drain: the router's acknowledgement (2 s) and a poll. */
    public static final Duration ROUTER_ROOM = Duration.ofSeconds(3);
    private static final Logger LOG = LoggerFactory.getLogger(LeaveDrain.class);
    /** Names each drain's actor apart (a node drains once; tests may drain more often in one actor system). */
    private static final java.util.concurrent.atomic.AtomicInteger DRAINS = new java.util.concurrent.atomic.AtomicInteger();

    /**
     * The reason to give {@link CoordinatedShutdown#runAll} when every node of the cluster is being stopped: its
     * partitions are not drained to nodes that stop next.
     */
    public static final CoordinatedShutdown.Reason CLUSTER_STOP = new CoordinatedShutdown.Reason() {
        @Override
        public String toString() {
            return "the whole cluster stops";
        }
    };

    private LeaveDrain() {
    }

    /**
     * @param group   partitions handed off per rebalance round while a node leaves ({@code dex.compute.leave.handoff-group});
     *                0 hands them all off at once (Pekko's region shutdown)
     * @param timeout how long the leaving node waits for its partitions to be handed over before its region's shutdown
     *                hands the rest off together ({@code dex.compute.leave.drain-timeout})
     */
    public record Settings(int group, Duration timeout) {
        /**
         * At most 16 partitions a round (and no more than a rebalance round's limit, {@link ProbedRebalance.RoundLimit}:
         * 8 of 64 partitions on 3 nodes), for at most 20 s.
         */
        public static final Settings DEFAULTS = new Settings(16, Duration.ofSeconds(20));

        public Settings {
            if (group < 0) {
                throw new IllegalArgumentException("the leave's handoff group must not be negative: " + group);
            }
            if (timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("the leave's drain timeout must be positive: " + timeout);
            }
        }
    }

    /** The addresses of the compute nodes listed as draining now, as this node's Receptionist knows them. */
    public static Set<Address> draining(ActorSystem<?> system) {
        return system.registerExtension(Registry.ID).draining;
    }

    /** Keeps the draining addresses; one per actor system, created on first use. */
    static final class Registry implements Extension {
        static final ExtensionId<Registry> ID = new ExtensionId<>() {
            @Override
            public Registry createExtension(ActorSystem<?> system) {
                return new Registry(system);
            }
        };
        volatile Set<Address> draining = Set.of();

        private Registry(ActorSystem<?> system) {
            Address self = system.address();
            system.systemActorOf(Behaviors.<Receptionist.Listing>setup(context -> {
                context.getSystem().receptionist().tell(Receptionist.subscribe(DRAINING, context.getSelf()));
                return Behaviors.receiveMessage(listing -> {
                    // Unreachable ones too: a draining node that is briefly unreachable must not get partitions back.
                    Set<Address> addresses = new HashSet<>();
                    for (ActorRef<Void> marker : listing.getAllServiceInstances(DRAINING)) {
                        Address address = marker.path().address();
                        addresses.add(address.hasLocalScope() ? self : address);
                    }
                    draining = Set.copyOf(addresses);
                    return Behaviors.same();
                });
            }), "dex-draining-registry", Props.empty());
        }
    }

    /**
     * Adds the leave to {@code system}'s coordinated shutdown, first phase: drain the region of {@code type} (unless
     * skipped, see the class comment), then run {@code afterwards} (a compute node: its router's {@code Leaving}).
     *
     * @param held how many of the region's entities are still here (a compute node: the partitions its engine holds,
     *             a cheap count); null: the region's own state, whose query waits up to sharding's
     *             {@code shard-region-query-timeout} (3 s) for a shard in the middle of its handoff, and warns of it
     */
    public static void onShutdown(ActorSystem<?> system, EntityTypeKey<?> type, Settings settings, IntSupplier held,
                                  Supplier<CompletionStage<Done>> afterwards) {
        system.registerExtension(Registry.ID); // subscribed from the start, so a coordinator here knows of drains at once
        CoordinatedShutdown shutdown = CoordinatedShutdown.get(system);
        // The phase's own timeout cuts the task short: leave room for the router's acknowledgement (2 s) and a poll.
        Duration phase = Duration.ofMillis(shutdown.timeout(CoordinatedShutdown.PhaseBeforeServiceUnbind()).toMillis());
        Duration room = phase.minus(ROUTER_ROOM);
        Settings bounded;
        if (settings.timeout().compareTo(room) <= 0) {
            bounded = settings;
        } else if (room.isNegative() || room.isZero()) {
            bounded = new Settings(0, Duration.ofMillis(1)); // no room at all: no drain
        } else {
            bounded = new Settings(settings.group(), room);
        }
        if (bounded != settings) {
            LOG.warn("dex.compute.leave.drain-timeout ({} ms) does not fit the first shutdown phase's timeout ({} ms, less {} s for"
                    + " the router): a leave drains for {} ms at most; raise"
                    + " pekko.coordinated-shutdown.phases.before-service-unbind.timeout", settings.timeout().toMillis(),
                    phase.toMillis(), ROUTER_ROOM.toSeconds(), bounded.group() == 0 ? 0 : bounded.timeout().toMillis());
        }
        shutdown.addTask(CoordinatedShutdown.PhaseBeforeServiceUnbind(), "dex-partition-drain-then-leave", () -> {
            CompletionStage<Done> drained;
            try {
                drained = drain(system, type, bounded, held, shutdown.getShutdownReason());
            } catch (RuntimeException failure) {
                LOG.warn("leaving: the drain could not start ({}); the region's shutdown hands the partitions off together",
                        failure.toString());
                drained = CompletableFuture.completedFuture(Done.getInstance());
            }
            return drained.exceptionally(failure -> Done.getInstance()).thenCompose(done -> afterwards.get());
        });
    }

    /** Why the drain is skipped, or empty if it runs. */
    static Optional<String> skipped(ActorSystem<?> system, Settings settings, Optional<CoordinatedShutdown.Reason> reason) {
        if (settings.group() == 0) {
            return Optional.of("dex.compute.leave.handoff-group is 0");
        }
        if (reason.isPresent() && reason.get() == CLUSTER_STOP) {
            return Optional.of("the whole cluster stops");
        }
        Member self = Cluster.get(system).selfMember();
        if (self.status() != MemberStatus.up()) {
            return Optional.of("this node is " + self.status() + ", not Up");
        }
        if (receivers(system).isEmpty()) {
            return Optional.of("no other compute node is up and not leaving");
        }
        return Optional.empty();
    }

    /** The other compute nodes that are up and not draining: where partitions can go. */
    static Set<Address> receivers(ActorSystem<?> system) {
        Set<Address> draining = draining(system);
        Set<Address> receivers = new HashSet<>();
        Cluster cluster = Cluster.get(system);
        var state = cluster.state();
        for (Member member : state.getMembers()) {
            if (member.hasRole("compute") && member.status() == MemberStatus.up() && !member.equals(cluster.selfMember())
                    && !draining.contains(member.address()) && !state.getUnreachable().contains(member)) {
                receivers.add(member.address());
            }
        }
        return receivers;
    }

    /** Runs the drain (or skips it); completes when the region holds no partition, the drain gives up, or it is skipped. */
    static CompletionStage<Done> drain(ActorSystem<?> system, EntityTypeKey<?> type, Settings settings, IntSupplier held,
                                       Optional<CoordinatedShutdown.Reason> reason) {
        CompletableFuture<Done> drained = new CompletableFuture<>();
        int n = DRAINS.incrementAndGet();
        // Listed as draining even when the drain is skipped: a node that shuts down must get no partition from now on,
        // and must not count as a place to drain to.
        system.systemActorOf(Behaviors.<Void>setup(context -> {
            context.getSystem().receptionist().tell(Receptionist.register(DRAINING, context.getSelf()));
            return Behaviors.empty();
        }), "dex-leaving-" + n, Props.empty());
        Optional<String> skip = skipped(system, settings, reason);
        if (skip.isPresent()) {
            LOG.info("leaving: the partitions are handed off together by the shard region's shutdown ({})", skip.get());
            drained.complete(Done.getInstance());
            return drained;
        }
        system.systemActorOf(Behaviors.<Message>setup(context -> Behaviors.<Message>withTimers(timers -> {
            timers.startTimerWithFixedDelay(Tick.INSTANCE, POLL);
            return new Watcher(context, timers, type, settings, held, drained).behavior();
        })), "dex-leave-drain-" + n, Props.empty());
        return drained;
    }

    private sealed interface Message permits Tick, Held {
    }

    private enum Tick implements Message, NoSerializationVerificationNeeded {
        INSTANCE
    }

    private record Held(int partitions) implements Message, NoSerializationVerificationNeeded {
    }

    /**
     * Counts the partitions the region still holds every {@link #POLL}; ends the drain when none is left, when no node
     * to drain to remains, or at the timeout. Stays listed as draining until the actor system stops, so that no
     * partition is placed here again before the region's shutdown.
     */
    private static final class Watcher {
        private final ActorContext<Message> context;
        private final TimerScheduler<Message> timers;
        private final EntityTypeKey<?> type;
        private final IntSupplier held;
        private final Settings settings;
        private final CompletableFuture<Done> drained;
        private final ActorRef<ShardRegion.CurrentShardRegionState> states;
        private final long started = System.nanoTime();
        private int first = -1;
        private int last = -1;
        /** A query is out: the region answers it only once every shard answered or its query timeout passed (3 s). */
        private boolean asking;

        Watcher(ActorContext<Message> context, TimerScheduler<Message> timers, EntityTypeKey<?> type, Settings settings,
                IntSupplier held, CompletableFuture<Done> drained) {
            this.context = context;
            this.timers = timers;
            this.type = type;
            this.held = held;
            this.settings = settings;
            this.drained = drained;
            // A shard that does not answer the region's query in time (one in the middle of its handoff) is still here.
            this.states = context.messageAdapter(ShardRegion.CurrentShardRegionState.class,
                    state -> new Held(state.getShards().size() + state.getFailed().size()));
        }

        Behavior<Message> behavior() {
            return Behaviors.receive(Message.class)
                    .onMessageEquals(Tick.INSTANCE, this::onTick)
                    .onMessage(Held.class, held -> onHeld(held.partitions()))
                    .build();
        }

        private Behavior<Message> onTick() {
            if (held != null) {
                return onHeld(held.getAsInt());
            }
            if (!drained.isDone() && !asking) {
                asking = true;
                ClusterSharding.get(context.getSystem()).shardState().tell(new GetShardRegionState(type, states));
            }
            return Behaviors.same();
        }

        private Behavior<Message> onHeld(int partitions) {
            asking = false;
            if (drained.isDone()) {
                return Behaviors.same();
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            if (first < 0) {
                first = partitions;
                LOG.info("leaving: handing {} partitions over, up to {} per rebalance round; each serves here until"
                        + " its own handoff", partitions, settings.group());
            }
            if (partitions == 0) {
                LOG.info("leaving: all {} partitions handed over in {} s", first, String.format("%.1f", seconds));
                return done();
            }
            if (partitions != last) {
                LOG.info("leaving: {} of {} partitions still here after {} s", partitions, first,
                        String.format("%.1f", seconds));
            }
            last = partitions;
            if (receivers(context.getSystem()).isEmpty()) {
                LOG.info("leaving: no other compute node is up and not leaving; the region's shutdown hands the"
                        + " last {} partitions off together", partitions);
                return done();
            }
            if (seconds * 1e9 >= settings.timeout().toNanos()) {
                LOG.warn("leaving: {} partitions were still here after {} s (dex.compute.leave.drain-timeout); the"
                        + " region's shutdown hands them off together", partitions, settings.timeout().toSeconds());
                return done();
            }
            return Behaviors.same();
        }

        private Behavior<Message> done() {
            timers.cancelAll();
            drained.complete(Done.getInstance());
            return Behaviors.same();
        }
    }
}
