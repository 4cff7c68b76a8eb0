package dev.dex.actors.node;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.ddata.LWWRegister;
import org.apache.pekko.cluster.ddata.SelfUniqueAddress;
import org.apache.pekko.cluster.ddata.typed.javadsl.DistributedData;
import org.apache.pekko.cluster.ddata.typed.javadsl.Replicator;
import org.apache.pekko.cluster.ddata.typed.javadsl.ReplicatorMessageAdapter;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.ClusterSingleton;
import org.apache.pekko.cluster.typed.ClusterSingletonSettings;
import org.apache.pekko.cluster.typed.SingletonActor;
import org.apache.pekko.cluster.typed.Subscribe;

/**
 * Keeps the replica groups' map (docs/replication.md): which memory node is the primary of each memory server and which
 * hold its backups, in which view. A cluster singleton on the compute role; the map lives in Distributed Data
 * ({@link ReplicaGroups#KEY}), written with a majority before any replica is told its part, and read with a majority
 * when a coordinator starts, so that a coordinator that takes over after another knows every view the other decided.
 * Compute nodes subscribe to it and follow each server's primary.
 *
 * <p>It makes one change at a time, each a new view of one group: form a group (the first memory node of a server becomes
 * primary), promote the complete backup with the most changes when a primary is unreachable or gone (or a backup lost
 * its stream and the primary's node does not answer: {@link PrimarySuspected}), drop a backup that
 * is unreachable or gone, add a memory node of the server that is in no view as a backup (it is copied). The replicas
 * themselves make this safe whatever the coordinator knows late: a backup takes the stream of no older view, becomes
 * primary only when complete and a lease after the old primary's last acknowledgement, and a primary answers nothing
 * a gating backup has not acknowledged.
 *
 * <p>Concurrency: an actor; Distributed Data and the memory nodes answer with messages.
 */
public final class ReplicaCoordinator extends AbstractBehavior<ReplicaCoordinator.Command> {

    public sealed interface Command permits Listing, Described, Loaded, Stored, Acted, Tick, Reachability, GetGroups,
            PrimarySuspected, Confirmed {
    }

    private record Listing(Receptionist.Listing listing) implements Command {
    }

    private record Described(ActorRef<MemoryNode.Command> node, MemoryNode.Description description, Throwable failure)
            implements Command {
    }

    private record Loaded(Replicator.GetResponse<LWWRegister<ReplicaGroups>> response) implements Command {
    }

    private record Stored(Replicator.UpdateResponse<LWWRegister<ReplicaGroups>> response, ReplicaGroups groups,
                          List<Step> steps) implements Command {
    }

    private record Acted(Step step, MemoryNode.Replicated answer, Throwable failure, List<Step> rest) implements Command {
    }

    private enum Tick implements Command {
        INSTANCE
    }

    private record Reachability(Object event) implements Command {
    }

    /** Asks for the map as this coordinator knows it (for status). */
    public record GetGroups(ActorRef<ReplicaGroups> replyTo) implements Command, dev.dex.actors.CborSerializable {
    }

    /**
     * From a complete backup of a group's current view: its primary's stream closed or went silent (docs/replication.md,
     * "Failover"). The coordinator asks the primary's node; unless it answers as primary within {@link #CONFIRM}, the
     * primary counts as gone in that view, without waiting for the cluster's failure detector.
     */
    public record PrimarySuspected(MemoryNode.Description backup) implements Command, dev.dex.actors.CborSerializable {
    }

    private record Confirmed(int server, long view, String why, ActorRef<MemoryNode.Command> backup,
                             MemoryNode.Description answer, Throwable failure) implements Command {
    }

    /** One thing to ask of one memory node after the map is stored. */
    private record Step(ActorRef<MemoryNode.Command> node, String op, long view, List<String> backups) {
    }

    /**
     * A majority read or write gives up after this. A write goes to a majority first and to the other voters only after a
     * fifth of it, so a dead voter among the first costs a view change that fifth: kept short for failover.
     */
    private static final Duration MAJORITY = Duration.ofMillis(1500);
    private static final Duration STEP_TIMEOUT = Duration.ofSeconds(30);
    /**
     * How long a suspected primary's node has to answer before it counts as gone. Costs a killed primary's failover
     * nothing as long as it is below the lease (1 s by default): the backup waits out the lease from its last
     * acknowledgement anyway.
     */
    static final Duration CONFIRM = Duration.ofMillis(700);

    private final int replicas;
    private final TimerScheduler<Command> timers;
    private final ReplicatorMessageAdapter<Command, LWWRegister<ReplicaGroups>> replicator;
    private final SelfUniqueAddress self;
    private Set<ActorRef<MemoryNode.Command>> listed = Set.of();
    private final Map<ActorRef<MemoryNode.Command>, MemoryNode.Description> described = new HashMap<>();
    /** The map as stored; null until the majority read answered. */
    private ReplicaGroups groups;
    private boolean busy;
    /** Servers already reported as having no replica that can serve, so that it is logged once per loss. */
    private final Set<Integer> reportedLost = new HashSet<>();
    /** Servers whose primary was confirmed gone, with the view it was primary of. */
    private final Map<Integer, Long> primaryGone = new HashMap<>();
    /** Servers whose primary is being asked whether it still serves. */
    private final Set<Integer> confirming = new HashSet<>();
    /** Servers whose backup's report the primary answered (logged once), with the view. */
    private final Map<Integer, Long> dismissed = new HashMap<>();

    private ReplicaCoordinator(ActorContext<Command> context, TimerScheduler<Command> timers, int replicas,
                               ReplicatorMessageAdapter<Command, LWWRegister<ReplicaGroups>> replicator) {
        super(context);
        this.replicas = replicas;
        this.timers = timers;
        this.replicator = replicator;
        this.self = DistributedData.get(context.getSystem()).selfUniqueAddress();
        context.getSystem().receptionist().tell(Receptionist.subscribe(MemoryNode.KEY,
                context.messageAdapter(Receptionist.Listing.class, Listing::new)));
        Cluster.get(context.getSystem()).subscriptions().tell(Subscribe.create(
                context.messageAdapter(ClusterEvent.ReachabilityEvent.class, Reachability::new), ClusterEvent.ReachabilityEvent.class));
        Cluster.get(context.getSystem()).subscriptions().tell(Subscribe.create(
                context.messageAdapter(ClusterEvent.MemberRemoved.class, Reachability::new), ClusterEvent.MemberRemoved.class));
        timers.startTimerWithFixedDelay(Tick.INSTANCE, Duration.ofSeconds(1));
        replicator.askGet(replyTo -> new Replicator.Get<>(ReplicaGroups.KEY, new Replicator.ReadMajority(MAJORITY), replyTo), Loaded::new);
    }

    /** The coordinator's behavior, for memory servers of {@code replicas} replicas each (2 or 3). */
    public static Behavior<Command> create(int replicas) {
        return Behaviors.supervise(Behaviors.<Command>setup(context -> Behaviors.withTimers(timers ->
                DistributedData.<Command, LWWRegister<ReplicaGroups>>withReplicatorMessageAdapter(replicator ->
                        new ReplicaCoordinator(context, timers, replicas, replicator)))))
                .onFailure(RuntimeException.class, SupervisorStrategy.restart());
    }

    /** Starts the coordinator as a cluster singleton on the compute nodes (idempotent); returns its proxy. */
    public static ActorRef<Command> start(ActorSystem<?> system, int replicas) {
        return ClusterSingleton.get(system).init(SingletonActor.of(create(replicas), "dex-replica-coordinator")
                .withSettings(ClusterSingletonSettings.create(system).withRole("compute")));
    }

    @Override
    public Receive<Command> createReceive() {
        return newReceiveBuilder()
                .onMessage(Listing.class, this::onListing)
                .onMessage(Described.class, this::onDescribed)
                .onMessage(Loaded.class, this::onLoaded)
                .onMessage(Stored.class, this::onStored)
                .onMessage(Acted.class, this::onActed)
                .onMessage(Tick.class, tick -> onTick())
                .onMessage(Reachability.class, event -> reconcile())
                .onMessage(GetGroups.class, this::onGetGroups)
                .onMessage(PrimarySuspected.class, this::onSuspected)
                .onMessage(Confirmed.class, this::onConfirmed)
                .build();
    }

    private Behavior<Command> onGetGroups(GetGroups get) {
        if (get.replyTo() != null) {
            get.replyTo().tell(groups == null ? ReplicaGroups.EMPTY : groups);
        }
        return this;
    }

    private Behavior<Command> onSuspected(PrimarySuspected suspected) {
        MemoryNode.Description backup = suspected.backup();
        if (groups == null || backup == null || backup.node() == null) {
            return this;
        }
        int server = backup.serverId();
        ReplicaGroups.Group group = groups.group(server);
        if (group == null || backup.replica().view() != group.view()
                || group.backups().stream().noneMatch(replica -> replica.node().equals(backup.node()))) {
            return this; // of another view: the map moved on already
        }
        if (listed.contains(backup.node())) {
            described.put(backup.node(), backup);
        }
        Long gone = primaryGone.get(server);
        if (gone != null && gone == group.view()) {
            return reconcile();
        }
        if (confirming.add(server)) {
            long view = group.view();
            String why = backup.replica().primaryLost();
            getContext().ask(MemoryNode.Description.class, group.primary().node(), CONFIRM, MemoryNode.Describe::new,
                    (answer, failure) -> new Confirmed(server, view, why, backup.node(), answer, failure));
        }
        return this;
    }

    private Behavior<Command> onConfirmed(Confirmed confirmed) {
        confirming.remove(confirmed.server());
        ReplicaGroups.Group group = groups.group(confirmed.server());
        if (group == null || group.view() != confirmed.view()) {
            return this;
        }
        MemoryNode.Description answer = confirmed.answer();
        if (confirmed.failure() == null && answer != null && MemoryNode.Replica.PRIMARY_ROLE.equals(answer.replica().role())) {
            // Alive and serving (of this view, or of the one before if its new view's step is still on its way).
            if (dismissed.put(confirmed.server(), confirmed.view()) == null) {
                getContext().getLog().info("memory server {}: backup {} lost its primary's stream ({}), but {} answers as"
                        + " primary of view {}: no failover", confirmed.server(), confirmed.backup().path().address(),
                        confirmed.why(), group.primary().node().path().address(), answer.replica().view());
            }
            return this;
        }
        dismissed.remove(confirmed.server());
        primaryGone.put(confirmed.server(), confirmed.view());
        getContext().getLog().warn("memory server {}: backup {} lost its primary's stream ({}), and the primary {} {}",
                confirmed.server(), confirmed.backup().path().address(), confirmed.why(), group.primary().node().path().address(),
                confirmed.failure() != null ? "did not answer within " + CONFIRM.toMillis() + " ms"
                        : "answers as " + answer.replica().role() + " of view " + answer.replica().view());
        return reconcile();
    }

    private Behavior<Command> onListing(Listing listing) {
        listed = Set.copyOf(listing.listing().getServiceInstances(MemoryNode.KEY));
        described.keySet().retainAll(listed);
        listed.forEach(this::describe);
        return reconcile();
    }

    private void describe(ActorRef<MemoryNode.Command> node) {
        getContext().ask(MemoryNode.Description.class, node, Duration.ofSeconds(5), MemoryNode.Describe::new,
                (description, failure) -> new Described(node, description, failure));
    }

    private Behavior<Command> onDescribed(Described answer) {
        if (answer.failure() == null && listed.contains(answer.node())) {
            described.put(answer.node(), answer.description());
            MemoryNode.Description d = answer.description();
            ReplicaGroups.Group group = groups == null ? null : groups.group(d.serverId());
            if (group != null && group.primary().node().equals(d.node()) && MemoryNode.Replica.PRIMARY_ROLE.equals(d.replica().role())
                    && primaryGone.remove(d.serverId(), group.view())) {
                // It was taken for gone but serves: no failover for a suspicion it outlived.
                getContext().getLog().info("memory server {}: primary {} of view {} answers again", d.serverId(),
                        d.node().path().address(), group.view());
            }
        }
        return reconcile();
    }

    private Behavior<Command> onTick() {
        listed.forEach(this::describe);
        return reconcile();
    }

    private Behavior<Command> onLoaded(Loaded loaded) {
        if (loaded.response() instanceof Replicator.GetSuccess<LWWRegister<ReplicaGroups>> found) {
            groups = found.get(ReplicaGroups.KEY).getValue();
            getContext().getLog().info("replica groups read: {}", groups.describe());
        } else if (loaded.response() instanceof Replicator.NotFound<LWWRegister<ReplicaGroups>>) {
            groups = ReplicaGroups.EMPTY;
            getContext().getLog().info("no replica groups yet: the first memory node of each server becomes its primary");
        } else {
            getContext().getLog().warn("the replica groups could not be read from a majority ({}); trying again", loaded.response());
            replicator.askGet(replyTo -> new Replicator.Get<>(ReplicaGroups.KEY, new Replicator.ReadMajority(MAJORITY), replyTo),
                    Loaded::new);
            return this;
        }
        return reconcile();
    }

    // ---- decisions

    private Behavior<Command> reconcile() {
        if (groups == null || busy) {
            return this;
        }
        Set<Address> unreachable = new HashSet<>();
        for (Member member : Cluster.get(getContext().getSystem()).state().getUnreachable()) {
            unreachable.add(member.address());
        }
        Map<Integer, List<MemoryNode.Description>> byServer = new TreeMap<>();
        for (MemoryNode.Description description : described.values()) {
            if (alive(description.node(), unreachable)) {
                byServer.computeIfAbsent(description.serverId(), id -> new ArrayList<>()).add(description);
            }
        }
        Set<Integer> servers = new TreeSet<>(byServer.keySet());
        groups.groups().forEach(group -> servers.add(group.serverId()));
        for (int server : servers) {
            if (decide(server, groups.group(server), byServer.getOrDefault(server, List.of()), unreachable)) {
                return this; // one change at a time
            }
        }
        return this;
    }

    /** Starts at most one change for {@code server}; true when it did. */
    private boolean decide(int server, ReplicaGroups.Group group, List<MemoryNode.Description> here, Set<Address> unreachable) {
        if (group == null) {
            if (here.isEmpty()) {
                return false;
            }
            MemoryNode.Description first = here.stream().min(Comparator.comparing(d -> d.node().path().toString())).orElseThrow();
            change(new ReplicaGroups.Group(server, 1, ReplicaGroups.Replica.of(first), List.of()),
                    List.of(new Step(first.node(), MemoryNode.Replicate.BECOME_PRIMARY, 1, List.of())),
                    "memory server " + server + ": " + first.node().path().address() + " is primary of view 1");
            return true;
        }
        Long gone = primaryGone.get(server);
        if (!alive(group.primary().node(), unreachable) || gone != null && gone == group.view()) {
            MemoryNode.Description best = null;
            for (ReplicaGroups.Replica backup : group.backups()) {
                MemoryNode.Description d = described.get(backup.node());
                if (d != null && alive(backup.node(), unreachable) && d.replica().complete()
                        && MemoryNode.Replica.BACKUP_ROLE.equals(d.replica().role())
                        && (best == null || d.replica().applied() > best.replica().applied())) {
                    best = d;
                }
            }
            if (best == null) {
                if (reportedLost.add(server)) {
                    getContext().getLog().error("memory server {}: its primary {} is gone and no complete backup of view {} is"
                            + " reachable ({}); its part of the index is unavailable until one is", server,
                            group.primary().node().path().address(), group.view(), group.backups());
                }
                return false;
            }
            reportedLost.remove(server);
            long view = group.view() + 1;
            change(new ReplicaGroups.Group(server, view, ReplicaGroups.Replica.of(best), List.of()),
                    List.of(new Step(best.node(), MemoryNode.Replicate.BECOME_PRIMARY, view, List.of())),
                    "memory server " + server + ": primary " + group.primary().node().path().address() + " is gone; backup "
                            + best.node().path().address() + " (change " + best.replica().applied() + ") is primary of view " + view);
            return true;
        }
        List<ReplicaGroups.Replica> kept = new ArrayList<>();
        for (ReplicaGroups.Replica backup : group.backups()) {
            if (alive(backup.node(), unreachable)) {
                kept.add(backup);
            }
        }
        if (kept.size() < group.backups().size()) {
            long view = group.view() + 1;
            change(new ReplicaGroups.Group(server, view, group.primary(), kept),
                    List.of(new Step(group.primary().node(), MemoryNode.Replicate.INSTALL_VIEW, view, endpoints(kept))),
                    "memory server " + server + ": a backup is gone; view " + view + " keeps " + kept);
            return true;
        }
        MemoryNode.Description primary = described.get(group.primary().node());
        if (primary != null && !MemoryNode.Replica.PRIMARY_ROLE.equals(primary.replica().role())
                && MemoryNode.Replica.SOLE_ROLE.equals(primary.replica().role())) {
            // Stored, but the node did not take it (it failed, or the coordinator moved in between): ask again.
            change(group, List.of(new Step(group.primary().node(), MemoryNode.Replicate.BECOME_PRIMARY, group.view(),
                    endpoints(group.backups()))), "memory server " + server + ": asking " + group.primary() + " again to be primary");
            return true;
        }
        if (group.backups().size() < replicas - 1) {
            for (MemoryNode.Description candidate : here) {
                ActorRef<MemoryNode.Command> node = candidate.node();
                boolean inView = node.equals(group.primary().node()) || group.backups().stream().anyMatch(b -> b.node().equals(node));
                if (!inView && !MemoryNode.Replica.PRIMARY_ROLE.equals(candidate.replica().role())) {
                    long view = group.view() + 1;
                    List<ReplicaGroups.Replica> backups = new ArrayList<>(group.backups());
                    backups.add(ReplicaGroups.Replica.of(candidate));
                    change(new ReplicaGroups.Group(server, view, group.primary(), backups),
                            List.of(new Step(node, MemoryNode.Replicate.BECOME_BACKUP, view, List.of()),
                                    new Step(group.primary().node(), MemoryNode.Replicate.INSTALL_VIEW, view, endpoints(backups))),
                            "memory server " + server + ": " + node.path().address() + " joins as a backup in view " + view
                                    + " (it is copied from the primary)");
                    return true;
                }
            }
        }
        return false;
    }

    private boolean alive(ActorRef<MemoryNode.Command> node, Set<Address> unreachable) {
        return listed.contains(node) && !unreachable.contains(node.path().address());
    }

    private static List<String> endpoints(List<ReplicaGroups.Replica> replicas) {
        return replicas.stream().map(ReplicaGroups.Replica::endpoint).toList();
    }

    /** Stores the group's new view with a majority, then asks the nodes their part, one after the other. */
    private void change(ReplicaGroups.Group group, List<Step> steps, String what) {
        busy = true;
        ReplicaGroups next = groups.with(group);
        getContext().getLog().info("{}", what);
        replicator.askUpdate(replyTo -> new Replicator.Update<>(ReplicaGroups.KEY,
                        LWWRegister.create(self, ReplicaGroups.EMPTY, ReplicaGroups.CLOCK), new Replicator.WriteMajority(MAJORITY), replyTo,
                        register -> register.withValue(self, next, ReplicaGroups.CLOCK)),
                response -> new Stored(response, next, steps));
    }

    private Behavior<Command> onStored(Stored stored) {
        if (!(stored.response() instanceof Replicator.UpdateSuccess)) {
            // Not known to a majority: nobody is told; the next tick decides again.
            getContext().getLog().warn("the replica groups could not be written to a majority ({}); deciding again", stored.response());
            busy = false;
            return this;
        }
        groups = stored.groups();
        getContext().getLog().info("replica groups stored with a majority: {}", groups.describe());
        return next(stored.steps());
    }

    private Behavior<Command> next(List<Step> steps) {
        if (steps.isEmpty()) {
            busy = false;
            listed.forEach(this::describe);
            return this;
        }
        Step step = steps.get(0);
        List<Step> rest = steps.subList(1, steps.size());
        getContext().ask(MemoryNode.Replicated.class, step.node(), STEP_TIMEOUT,
                replyTo -> new MemoryNode.Replicate(step.op(), step.view(), step.backups(), replyTo),
                (answer, failure) -> new Acted(step, answer, failure, List.copyOf(rest)));
        return this;
    }

    private Behavior<Command> onActed(Acted acted) {
        String error = acted.failure() != null ? acted.failure().toString() : acted.answer().error();
        if (error != null) {
            getContext().getLog().warn("{} {} in view {} failed: {}", acted.step().node().path().address(), acted.step().op(),
                    acted.step().view(), error);
            busy = false; // decided again from what the nodes say
            listed.forEach(this::describe);
            return this;
        }
        described.put(acted.step().node(), acted.answer().description());
        return next(acted.rest());
    }
}
