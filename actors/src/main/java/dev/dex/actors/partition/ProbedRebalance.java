package dev.dex.actors.partition;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import org.apache.pekko.actor.ActorIdentity;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Identify;
import org.apache.pekko.actor.RootActorPath;
import org.apache.pekko.cluster.Cluster;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.UniqueAddress;
import org.apache.pekko.cluster.sharding.ShardCoordinator;
import org.apache.pekko.cluster.sharding.ShardCoordinator$Internal$RegionStopped;
import org.apache.pekko.event.Logging;
import org.apache.pekko.event.LoggingAdapter;
import org.apache.pekko.pattern.Patterns;

import scala.collection.immutable.IndexedSeq;
import scala.concurrent.Future;
import scala.jdk.javaapi.CollectionConverters;
import scala.jdk.javaapi.FutureConverters;

import com.typesafe.config.Config;

/**
 * Pekko's least-shard allocation, with rebalance rounds of its own: each balances the map in one pass
 * ({@link #balance}), at most a {@link RoundLimit} of partitions, and starts only when every shard region and every
 * cluster member answers a probe: a rebalance does not wait on a node that died and is not yet known to be dead.
 *
 * <p>Why. A rebalance (a {@code RebalanceWorker} of the coordinator) asks every region to acknowledge the start
 * of the handoff, then asks the shard's region to hand it off and waits for the shard to stop; meanwhile the
 * coordinator holds every request for that shard's home, so the partition serves nothing. A region that died
 * never acknowledges: the move waits until the cluster removes the node (the failure detector's verdict, the
 * downing, the removal: 6-10 s with {@code dex-cluster.conf}), even when the partition moves between two live
 * nodes. Worse, if the dead region is the one the shard moves away from, its removal counts as the missing
 * acknowledgement; the worker then sends the handoff to the dead region and waits for a termination it has
 * already consumed, until {@code handoff-timeout} (60 s here, so that a live handoff can write a large cache
 * back). Pekko's own strategy does not rebalance while a member is unreachable, but a crashed node counts as
 * reachable until the failure detector's verdict, and rounds run every second while a join settles (each moves at
 * most a {@link RoundLimit} of partitions, so a large move needs several). So when the delegate proposes
 * shards to move, this strategy first sends {@link Identify} to every region, and to every cluster member's system
 * guardian (clients' sharding proxies acknowledge moves too, and are no regions), and proposes nothing this round
 * unless all of them answer within the probe timeout; the next round asks again, until the dead node is unreachable
 * (then Pekko's strategy waits) or removed. One round's probes are out at a time: a tick meanwhile proposes
 * nothing. The probe cannot see a node that dies after its answer and before the worker's first message, up to
 * the probe timeout later (see below for what bounds that case). A member that is alive but keeps missing
 * the timeout holds rebalancing back; every {@value #WARN_AFTER}th round in a row is logged as a warning. The
 * member probe relies on {@code /system} answering Identify, which Artery's untrusted mode would forbid. A probe
 * timeout of zero turns the probe off (Pekko's least-shard choice, unchanged).
 *
 * <p>A move away from a region that died after its probe answer, or with the probe off, is cut short at the next
 * round after the node's removal. Pekko 1.7's worker counts the region's removal as its acknowledgement, sends the
 * handoff to the dead region, and then waits for a termination it has already consumed, until the handoff timeout.
 * But the coordinator passes every {@code RegionStopped} it receives on to its workers as a termination, even for a
 * region it no longer knows. So at each rebalance round (which is given the coordinator's whole state) this strategy
 * compares the coordinator's regions with those of the last round, and tells the coordinator {@code RegionStopped} of
 * each region that is gone and whose member is out of the cluster or down; at every round for a handoff timeout,
 * since a worker still waiting for other regions' acknowledgements hands off to the dead region only later. A region
 * leaves the coordinator's state only once it terminated or stopped, so the message changes nothing else, and a
 * worker stuck on that region finishes at once, as Pekko's own does when the termination comes after the handoff.
 * Allocations are not compared: they are given the regions without those shutting down gracefully (alive, handing
 * their shards off) and those in their removal margin, none of which may be told stopped.
 *
 * <p>Built on Pekko's {@code ActorSystemDependentAllocationStrategy} and least-shard strategy, internal API of Pekko
 * 1.7 (the version pinned in the root pom). The delegate, the improved least-shard strategy, only allocates (the
 * region with fewest partitions); the rounds are {@link #balance}'s, limited by {@code dex.compute.rebalance-rounds}
 * and {@code rebalance-round-minimum} and {@code -maximum}, so {@code pekko.cluster.sharding.least-shard-allocation-strategy} is not read.
 * A round waits, as Pekko's does, until the last one's moves are done, no member is unreachable and none joining.
 *
 * <p><b>A graceful leave, a few partitions at a time.</b> While a compute node leaves gracefully it is listed as draining
 * ({@link LeaveDrain}). Its region then gets no partition (an allocation is the delegate's among the other regions),
 * and each round proposes up to {@code group} of the draining regions' partitions (and no more than the round's limit),
 * less those still moving, and nothing else: the delegate's own choice would move partitions of the staying
 * nodes towards the emptying region's place. With no region to drain to, nothing moves. When no region drains, the
 * delegate decides among the regions that do not drain.
 *
 * <p>Allocation of a new shard is otherwise the delegate's, unchanged.
 *
 * <pre>
 * Concurrency: the coordinator calls it from its own actor, one call at a time, but a round's result may complete
 * after the next call: the probes' answers complete on the ask pattern's threads. {@code probing} (set by the call
 * that sends probes, cleared when they are all in) keeps rounds from overlapping; the postponement count is atomic;
 * the fields start() sets are volatile (the coordinator may restart on this node and start it again). {@code known},
 * {@code departed} and {@code seen} are touched only by the coordinator's calls, one at a time; they are synchronized because a
 * restarted coordinator is another actor, whose first call is not ordered after the old one's last by any actor's
 * mailbox.
 * </pre>
 */
public final class ProbedRebalance implements ShardCoordinator.ActorSystemDependentAllocationStrategy {
    /** Rounds postponed in a row after which each further one is a warning (and every this many, after). */
    static final int WARN_AFTER = 5;
    private final Duration probeTimeout;
    /** Where the coordinator that uses this strategy lives, on this node. */
    private final String coordinatorPath;
    /**
     * The regions of the coordinator's state at the last round, each with the member it was seen on (null: this node's,
     * or its member was not known); a node restarted at the same address is another member.
     */
    private final Map<ActorRef, UniqueAddress> known = new HashMap<>();
    /** Regions gone from the coordinator's state since, each told to the coordinator as stopped for a while. */
    private final Map<ActorRef, Departed> departed = new HashMap<>();
    /**
     * Every partition this coordinator has seen, held or allocated: those it does not hold now were handed off and have
     * no home until a request for them comes ({@link #pending}).
     */
    private final Set<String> seen = new java.util.HashSet<>();
    private volatile long handOffTimeoutNanos;
    /** Set while a round's probes are out: a tick meanwhile proposes nothing (its snapshot would be stale). */
    private final AtomicBoolean probing = new AtomicBoolean();
    private final AtomicInteger postponedInARow = new AtomicInteger();
    // Set by start(), before the coordinator's first call, and again if the coordinator restarts on this node.
    private volatile ShardCoordinator.ShardAllocationStrategy delegate;
    /**
     * Partitions of draining regions a round may move at most (less those still moving), and no more than the round's
     * limit ({@link RoundLimit}); 0: none.
     */
    private final int group;
    /** What a round may move; from dex.compute.rebalance-round* at start() unless given. */
    private volatile RoundLimit roundLimit;
    private volatile dev.dex.actors.DexMetrics metrics;
    /** The addresses of the draining compute nodes; null until start() when not given. */
    private volatile Supplier<Set<Address>> draining;
    private volatile Address selfAddress;
    private volatile ActorSystem system;
    private volatile LoggingAdapter log;

    /**
     * @param probeTimeout how long a region or member may take to answer before the round moves nothing; zero: no probe
     * @param coordinatorPath the path of the coordinator that uses this strategy, on this node ({@link #coordinatorPath})
     */
    public ProbedRebalance(Duration probeTimeout, String coordinatorPath) {
        this(probeTimeout, coordinatorPath, LeaveDrain.Settings.DEFAULTS.group());
    }

    /**
     * @param group partitions of draining compute nodes one round may move ({@code dex.compute.leave.handoff-group});
     *              the draining nodes are those {@link LeaveDrain#draining} lists on this node
     */
    public ProbedRebalance(Duration probeTimeout, String coordinatorPath, int group) {
        this(probeTimeout, coordinatorPath, group, null);
    }

    /** With the draining addresses from {@code draining} instead of {@link LeaveDrain#draining} (null: from there). */
    ProbedRebalance(Duration probeTimeout, String coordinatorPath, int group, Supplier<Set<Address>> draining) {
        this(probeTimeout, coordinatorPath, group, draining, null);
    }

    /** With {@code roundLimit} instead of the one configured (null: the configured one). */
    ProbedRebalance(Duration probeTimeout, String coordinatorPath, int group, Supplier<Set<Address>> draining,
                    RoundLimit roundLimit) {
        if (probeTimeout.isNegative()) {
            throw new IllegalArgumentException("the rebalance probe timeout must not be negative: " + probeTimeout);
        }
        if (group < 0) {
            throw new IllegalArgumentException("the leave's handoff group must not be negative: " + group);
        }
        this.probeTimeout = probeTimeout;
        this.coordinatorPath = coordinatorPath;
        this.group = group;
        this.draining = draining;
        this.roundLimit = roundLimit;
    }

    /**
     * What one rebalance round may move: a node's share of the partitions (all of them over the regions, rounded up)
     * in {@code rounds} rounds, within {@code [minimum, maximum]} ({@code dex.compute.rebalance-rounds},
     * {@code rebalance-round-minimum}, {@code rebalance-round-maximum}). A join takes about a share to its new node and
     * a leave gives one away, so either settles in {@code rounds} rounds wherever the maximum does not bind. A round
     * stops the partitions it moves together, the longer the more it moves (docs/cluster.md, "Rebalance rounds"): the
     * maximum bounds that stop where a node's share is large.
     */
    public record RoundLimit(int rounds, int minimum, int maximum) {
        /** A share in three rounds, 8 to 16 a round: 8 of 64 partitions on 3 nodes, 11 of 1,024 on 33. */
        public static final RoundLimit DEFAULTS = new RoundLimit(3, 8, 16);

        public RoundLimit {
            if (rounds < 1) {
                throw new IllegalArgumentException("dex.compute.rebalance-rounds must be at least 1: " + rounds);
            }
            if (minimum < 1) {
                throw new IllegalArgumentException("dex.compute.rebalance-round-minimum must be at least 1: " + minimum);
            }
            if (maximum < minimum) {
                throw new IllegalArgumentException("dex.compute.rebalance-round-maximum (" + maximum
                        + ") must be at least dex.compute.rebalance-round-minimum (" + minimum + ")");
            }
        }

        /** The configured limit of {@code config} (its {@code dex.compute} keys), or {@link #DEFAULTS} where they are absent. */
        public static RoundLimit of(Config config) {
            String rounds = "dex.compute.rebalance-rounds";
            String minimum = "dex.compute.rebalance-round-minimum";
            String maximum = "dex.compute.rebalance-round-maximum";
            return new RoundLimit(config.hasPath(rounds) ? config.getInt(rounds) : DEFAULTS.rounds,
                    config.hasPath(minimum) ? config.getInt(minimum) : DEFAULTS.minimum,
                    config.hasPath(maximum) ? config.getInt(maximum) : DEFAULTS.maximum);
        }

        /** The partitions a round may move, of {@code shards} in all over {@code regions} shard regions. */
        public int of(int shards, int regions) {
            int share = regions == 0 ? shards : (shards + regions - 1) / regions;
            return Math.min(maximum, Math.max(minimum, (share + rounds - 1) / rounds));
        }
    }

    /**
     * The path of the shard coordinator of {@code typeName} on the node of {@code system}, as Pekko 1.7's sharding
     * guardian names it: the guardian, the coordinator's singleton manager, the singleton, the coordinator.
     */
    public static String coordinatorPath(org.apache.pekko.actor.typed.ActorSystem<?> system, String typeName) {
        return "/system/" + system.settings().config().getString("pekko.cluster.sharding.guardian-name") + "/"
                + URLEncoder.encode(typeName, StandardCharsets.UTF_8) + "Coordinator/singleton/coordinator";
    }

    @Override
    public void start(ActorSystem system) {
        if (roundLimit == null) {
            roundLimit = RoundLimit.of(system.settings().config());
        }
        this.system = system;
        // Only its allocation is used: the least-shard region. Rebalance rounds are this strategy's own (balance).
        ShardCoordinator.ShardAllocationStrategy made = ShardCoordinator.leastShardAllocationStrategy(1, 1.0);
        if (made instanceof ShardCoordinator.ActorSystemDependentAllocationStrategy dependent) {
            dependent.start(system);
        } else if (made instanceof ShardCoordinator.StartableAllocationStrategy startable) {
            startable.start();
        }
        delegate = made;
        log = Logging.getLogger(system, ProbedRebalance.class);
        synchronized (this) {
            // A coordinator restarted on this node reads its state anew; what the last one saw says nothing about it.
            known.clear();
            departed.clear();
            seen.clear();
        }
        handOffTimeoutNanos = system.settings().config().getDuration("pekko.cluster.sharding.handoff-timeout").toNanos();
        selfAddress = Cluster.get(system).selfAddress();
        if (draining == null) {
            org.apache.pekko.actor.typed.ActorSystem<?> typed = org.apache.pekko.actor.typed.javadsl.Adapter.toTyped(system);
            draining = () -> LeaveDrain.draining(typed);
        }
        metrics = dev.dex.actors.DexMetrics.get(org.apache.pekko.actor.typed.javadsl.Adapter.toTyped(system));
    }

    /** The partitions one round may move, by {@link #roundLimit}, with {@code allocations} as they are. */
    private int roundLimit(Map<ActorRef, IndexedSeq<String>> allocations) {
        return roundLimit.of(allocations.values().stream().mapToInt(IndexedSeq::size).sum(), allocations.size());
    }

    /**
     * The partitions to move so that every region ends with the rounded-down or rounded-up share of all of them, at
     * most {@code limit}: each region above its target gives its excess. The regions that hold the most keep the
     * rounded-up targets (fewest moves; ties in the order given). Taken round-robin from the givers, so a round that
     * cannot move all of it takes from every one. Where they go is the allocation's choice, the region with fewest,
     * which fills the regions below their targets. Unlike Pekko's least-shard rounds (the regions above the rounded-up
     * share first, then one partition per full region towards those two below it), one pass reaches the balanced map,
     * so a join or leave needs no extra round for the remainder.
     */
    static List<String> balance(Map<ActorRef, IndexedSeq<String>> allocations, int limit) {
        return balance(allocations, limit, 0);
    }

    /**
     * As {@link #balance(Map, int)}, with {@code pending} more partitions that have no home now: an earlier round handed
     * them off and no request has come for them since, so the coordinator has not allocated them again. Each will go
     * to the region with fewest when it is asked for, so they are counted there (one by one on the region with fewest)
     * before the targets are taken. Without them, a round that came before the last round's partitions were asked for
     * again saw fewer partitions, lower targets, and the same regions above them: in a crowded JVM, where those
     * requests wait seconds for the coordinator's writes, a join of a 17th node moved 184 partitions in 12 rounds where
     * 60 in 4 balance the map.
     */
    static List<String> balance(Map<ActorRef, IndexedSeq<String>> allocations, int limit, int pending) {
        int held = allocations.values().stream().mapToInt(IndexedSeq::size).sum();
        int shards = held + Math.max(0, pending);
        int regions = allocations.size();
        List<String> chosen = new ArrayList<>();
        if (regions < 2 || held == 0 || limit <= 0) {
            return chosen;
        }
        List<List<String>> byLoad = new ArrayList<>();
        allocations.values().forEach(shardsHeld -> byLoad.add(CollectionConverters.asJava(shardsHeld)));
        // Where the allocation will put the partitions without a home: each on the region with fewest (counted so far).
        int[] counted = new int[regions];
        for (int i = 0; i < regions; i++) {
            counted[i] = byLoad.get(i).size();
        }
        for (int p = 0; p < shards - held; p++) {
            int fewest = 0;
            for (int i = 1; i < regions; i++) {
                if (counted[i] < counted[fewest]) {
                    fewest = i;
                }
            }
            counted[fewest]++;
        }
        Integer[] order = new Integer[regions];
        for (int i = 0; i < regions; i++) {
            order[i] = i;
        }
        java.util.Arrays.sort(order, (a, b) -> Integer.compare(counted[b], counted[a]));
        int floor = shards / regions;
        int roundedUp = shards % regions;
        List<java.util.Iterator<String>> givers = new ArrayList<>();
        for (int rank = 0; rank < regions; rank++) {
            int target = floor + (rank < roundedUp ? 1 : 0);
            List<String> its = byLoad.get(order[rank]);
            int excess = Math.min(counted[order[rank]] - target, its.size());
            if (excess > 0) {
                givers.add(its.subList(its.size() - excess, its.size()).iterator());
            }
        }
        boolean more = true;
        while (more && chosen.size() < limit) {
            more = false;
            for (java.util.Iterator<String> giver : givers) {
                if (giver.hasNext() && chosen.size() < limit) {
                    chosen.add(giver.next());
                    more = true;
                }
            }
        }
        return chosen;
    }

    @Override
    public Future<ActorRef> allocateShard(ActorRef requester, String shardId,
                                          scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> current) {
        synchronized (this) {
            seen.add(shardId);
        }
        // Not a place to look for departed regions: the coordinator leaves regions that are shutting down out of it.
        Set<Address> drainingNow = draining.get();
        if (!drainingNow.isEmpty()) {
            scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> staying = withoutDraining(current, drainingNow);
            if (!staying.isEmpty()) {
                return delegate.allocateShard(requester, shardId, staying);
            }
        }
        return delegate.allocateShard(requester, shardId, current);
    }

    /**
     * Pekko's condition for a rebalance round, which a drain's round (not the delegate's) must check itself: no member
     * unreachable (a move would wait for its acknowledgement) and none joining.
     */
    private boolean aGoodTimeToMove() {
        var state = Cluster.get(system).state();
        if (!state.getUnreachable().isEmpty()) {
            return false;
        }
        for (Member member : state.getMembers()) {
            if (member.status() == org.apache.pekko.cluster.MemberStatus.joining()
                    || member.status() == org.apache.pekko.cluster.MemberStatus.weaklyUp()) {
                return false;
            }
        }
        return true;
    }

    /** The regions of {@code allocations} whose node is a member that is Up. */
    private Map<ActorRef, IndexedSeq<String>> ofMembersUp(Map<ActorRef, IndexedSeq<String>> allocations) {
        Set<Address> up = new java.util.HashSet<>();
        for (Member member : Cluster.get(system).state().getMembers()) {
            if (member.status() == org.apache.pekko.cluster.MemberStatus.up()) {
                up.add(member.address());
            }
        }
        Map<ActorRef, IndexedSeq<String>> chosen = new java.util.LinkedHashMap<>();
        allocations.forEach((region, shards) -> {
            if (up.contains(nodeOf(region))) {
                chosen.put(region, shards);
            }
        });
        return chosen;
    }

    /** The address of {@code region}'s node: this node's for a region here. */
    private Address nodeOf(ActorRef region) {
        Address address = region.path().address();
        return address.hasLocalScope() ? selfAddress : address;
    }

    private scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> withoutDraining(
            scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> current, Set<Address> drainingNow) {
        Map<ActorRef, IndexedSeq<String>> staying = new java.util.LinkedHashMap<>();
        CollectionConverters.asJava(current).forEach((region, shards) -> {
            if (!drainingNow.contains(nodeOf(region))) {
                staying.put(region, shards);
            }
        });
        return scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(staying));
    }

    /**
     * Up to {@link #group} partitions of draining regions and no more than a round's limit, less {@code inProgress},
     * in the order of the regions and their shards; empty if none is left there, or no region is left to take them. So
     * a leave takes as many rounds as a join of a node's share, with rounds no larger than a join's.
     */
    List<String> drainingShards(Map<ActorRef, IndexedSeq<String>> allocations, Set<String> inProgress, Set<Address> drainingNow) {
        List<String> chosen = new ArrayList<>();
        boolean anywhere = allocations.keySet().stream().anyMatch(region -> !drainingNow.contains(nodeOf(region)));
        int room = Math.min(group, roundLimit(allocations)) - inProgress.size();
        if (!anywhere || room <= 0) {
            return chosen;
        }
        for (Map.Entry<ActorRef, IndexedSeq<String>> entry : allocations.entrySet()) {
            if (drainingNow.contains(nodeOf(entry.getKey()))) {
                for (String shard : CollectionConverters.asJava(entry.getValue())) {
                    if (chosen.size() < room && !inProgress.contains(shard)) {
                        chosen.add(shard);
                    }
                }
            }
        }
        return chosen;
    }

    @Override
    public Future<scala.collection.immutable.Set<String>> rebalance(
            scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> current,
            scala.collection.immutable.Set<String> inProgress) {
        Map<ActorRef, IndexedSeq<String>> allocations = CollectionConverters.asJava(current);
        releaseDeparted(allocations.keySet());
        Set<Address> drainingNow = draining.get();
        CompletionStage<Set<String>> confirmed;
        if (allocations.keySet().stream().noneMatch(region -> drainingNow.contains(nodeOf(region)))) {
            // One round at a time, as Pekko's: the next one balances the map this one left. Among the regions of members
            // that are Up: a leaving member's region hands its partitions off by its own shutdown, and the coordinator
            // allocates nothing to it, so balancing towards it would only move partitions back where they were.
            Map<ActorRef, IndexedSeq<String>> up = ofMembersUp(allocations);
            int pending = pending(allocations);
            confirmed = !inProgress.isEmpty() || !aGoodTimeToMove() ? CompletableFuture.completedFuture(Set.of())
                    : confirm(allocations, new java.util.HashSet<>(balance(up, roundLimit(up), pending)));
        } else if (group == 0 || !aGoodTimeToMove()) {
            // group 0: not drained, their region's shutdown hands them off together. Meanwhile nothing moves.
            confirmed = CompletableFuture.completedFuture(Set.of());
        } else if (allocations.entrySet().stream()
                .noneMatch(entry -> drainingNow.contains(nodeOf(entry.getKey())) && !entry.getValue().isEmpty())) {
            // Drained, its region not yet shut down: the others balance among themselves, never towards it.
            Map<ActorRef, IndexedSeq<String>> staying = ofMembersUp(CollectionConverters.asJava(withoutDraining(current, drainingNow)));
            int pending = pending(allocations);
            confirmed = !inProgress.isEmpty() ? CompletableFuture.completedFuture(Set.of())
                    : confirm(allocations, new java.util.HashSet<>(balance(staying, roundLimit(staying), pending)));
        } else {
            confirmed = confirm(allocations,
                    new java.util.HashSet<>(drainingShards(allocations, CollectionConverters.asJava(inProgress), drainingNow)));
        }
        return FutureConverters.asScala(confirmed.thenApply(set -> {
            if (!set.isEmpty()) {
                metrics.rebalanceRound(set.size());
            }
            return CollectionConverters.asScala(set).toSet();
        }));
    }

    /**
     * How many partitions this coordinator has seen that {@code allocations} (its whole state) gives no home: handed off
     * by a round and not asked for since. (A coordinator that started with partitions in that state does not know them.)
     */
    private synchronized int pending(Map<ActorRef, IndexedSeq<String>> allocations) {
        int held = 0;
        for (IndexedSeq<String> shards : allocations.values()) {
            held += shards.size();
            seen.addAll(CollectionConverters.asJava(shards));
        }
        return seen.size() - held;
    }

    /**
     * Tells the coordinator {@code RegionStopped} of each region that was in its state at an earlier round and is
     * not any more, once the region's node is out of the cluster (or down), so that a rebalance worker waiting for
     * that region's shard to stop finishes now (see the class comment); at every round for a handoff timeout, since
     * a worker that was still waiting for other regions' acknowledgements then gets to that wait only later.
     * {@code regions} must be the coordinator's whole state, as a rebalance round gets it: the regions an allocation
     * gets leave out those shutting down gracefully and those in their removal margin, which are alive or may be.
     */
    private synchronized void releaseDeparted(Set<ActorRef> regions) {
        long now = System.nanoTime();
        known.forEach((region, member) -> {
            if (!regions.contains(region)) {
                departed.putIfAbsent(region, new Departed(member, now + handOffTimeoutNanos));
            }
        });
        departed.keySet().removeAll(regions);
        departed.values().removeIf(gone -> now - gone.until > 0);
        Iterable<Member> members = Cluster.get(system).state().getMembers();
        departed.forEach((region, gone) -> {
            if (outOfTheCluster(region, gone.member, members)) {
                if (!gone.announced) {
                    gone.announced = true;
                    log.info("shard region {} is gone and its node out of the cluster; telling the coordinator, so that no"
                            + " move from it waits for the handoff timeout", region.path());
                }
                system.actorSelection(coordinatorPath).tell(new ShardCoordinator$Internal$RegionStopped(region), ActorRef.noSender());
            }
        });
        known.keySet().retainAll(regions);
        for (ActorRef region : regions) {
            if (!known.containsKey(region)) { // computeIfAbsent would leave out a region whose member is null
                known.put(region, memberAt(region.path().address(), members));
            }
        }
    }

    /** The member at {@code address}, or null (this node's own address, or no member there). */
    private static UniqueAddress memberAt(Address address, Iterable<Member> members) {
        if (!address.hasLocalScope()) {
            for (Member member : members) {
                if (member.address().equals(address)) {
                    return member.uniqueAddress();
                }
            }
        }
        return null;
    }

    /** A region gone from the coordinator's state: the member it was seen on (or null), until when it is told, whether logged. */
    private static final class Departed {
        final UniqueAddress member;
        final long until;
        boolean announced;

        Departed(UniqueAddress member, long until) {
            this.member = member;
            this.until = until;
        }
    }

    /**
     * Whether the member {@code region} was seen on ({@code member}; null if it never was) is out of the cluster or
     * down: its regions have stopped for good. Never for this node's own region, whose stop is the coordinator's to see.
     */
    static boolean outOfTheCluster(ActorRef region, UniqueAddress member, Iterable<Member> members) {
        if (region.path().address().hasLocalScope()) {
            return false;
        }
        for (Member m : members) {
            if (member == null ? m.address().equals(region.path().address()) : m.uniqueAddress().equals(member)) {
                return m.status() == org.apache.pekko.cluster.MemberStatus.down();
            }
        }
        return true;
    }

    /** The proposed shards if every region and member answered the probe in time (or the probe is off), else none. */
    private CompletionStage<Set<String>> confirm(Map<ActorRef, IndexedSeq<String>> allocations, Set<String> proposed) {
        if (probeTimeout.isZero()) {
            return CompletableFuture.completedFuture(proposed);
        }
        if (proposed.isEmpty() || !probing.compareAndSet(false, true)) {
            return CompletableFuture.completedFuture(Set.of());
        }
        // The regions, which must hand off or acknowledge; and every member's system guardian, since sharding proxies
        // (clients) acknowledge too and are no regions: a member that does not answer at all may have crashed.
        List<String> names = new ArrayList<>();
        List<CompletableFuture<Boolean>> answers = new ArrayList<>();
        for (ActorRef region : allocations.keySet()) {
            names.add("the shard region of " + region.path().address());
            answers.add(exists(region));
        }
        for (Member member : Cluster.get(system).state().getMembers()) {
            names.add(member.address().toString());
            answers.add(answers(member.address()));
        }
        return CompletableFuture.allOf(answers.toArray(CompletableFuture[]::new)).thenApply(done -> {
            probing.set(false);
            List<String> silent = new ArrayList<>();
            for (int i = 0; i < names.size(); i++) {
                if (!answers.get(i).join()) {
                    silent.add(names.get(i));
                }
            }
            if (silent.isEmpty()) {
                postponedInARow.set(0);
                return proposed;
            }
            int rounds = postponedInARow.incrementAndGet();
            if (rounds % WARN_AFTER == 0) {
                log.warning("rebalancing postponed {} rounds in a row: {} did not answer within {} ms; partitions stay where"
                        + " they are until it answers or leaves the cluster", rounds, silent, probeTimeout.toMillis());
            } else {
                log.info("rebalance of partitions {} postponed: {} did not answer within {} ms (crashed?)",
                        new java.util.TreeSet<>(proposed), silent, probeTimeout.toMillis());
            }
            return Set.<String>of();
        });
    }

    /** Whether the node at {@code address} answers at all: its system guardian, within the probe timeout. */
    CompletableFuture<Boolean> answers(Address address) {
        return answers(system, address, probeTimeout);
    }

    /**
     * Whether the node at {@code address} answers at all within {@code timeout}: its system guardian's answer to an
     * {@link Identify} (also {@code FenceThenDown}'s check that its side is a majority right now).
     */
    public static CompletableFuture<Boolean> answers(ActorSystem system, Address address, Duration timeout) {
        return answered(Patterns.ask(system.actorSelection(new RootActorPath(address, "/").child("system")),
                new Identify("dex-probe"), timeout), false);
    }

    /** Whether {@code region} answers within the probe timeout that it exists (a stopped actor's answer is empty). */
    private CompletableFuture<Boolean> exists(ActorRef region) {
        return answered(Patterns.ask(region, new Identify("dex-rebalance-probe"), probeTimeout), true);
    }

    /** Whether an Identify was answered (with {@code mustExist}: by an actor that exists); a timeout is silence. */
    private static CompletableFuture<Boolean> answered(CompletionStage<Object> answer, boolean mustExist) {
        return answer.thenApply(a -> a instanceof ActorIdentity identity && (!mustExist || identity.getActorRef().isPresent()))
                .exceptionally(failure -> false).toCompletableFuture();
    }
}
