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

import dev.dex.actors.node.ReplicaReports.BackupsSuspected;
import dev.dex.actors.node.ReplicaReports.PrimarySuspected;

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
            PrimarySuspected, Confirmed, BackupsSuspected, BackupConfirmed {
    }

    private record Listing(Receptionist.Listing listing) implements Command {
    }

    private record Described(ActorRef<MemoryNode.Command> node, MemoryNode.Description description, Throwable failure,
                             long askedAtNanos) implements Command {
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

    private record Confirmed(int server, long view, String why, ActorRef<MemoryNode.Command> backup,
                             MemoryNode.Description answer, Throwable failure) implements Command {
    }

    private record BackupConfirmed(int server, long view, String endpoint, String why, MemoryNode.Description answer,
                                   Throwable failure) implements Command {
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
    /** A backup's step is quick (no connection, no wait): a dead node must not hold every group's changes for long. */
    private static final Duration BACKUP_STEP_TIMEOUT = Duration.ofSeconds(5);
    /** How often a node whose step of the current view did not take is asked again. */
    static final Duration ASK_AGAIN_AFTER = Duration.ofSeconds(2);
    /**
     * How long a suspected primary's node has to answer before it counts as gone. Costs a killed primary's failover
     * nothing as long as it is below the lease (1 s by default): the backup waits out the lease from its last
     * acknowledgement anyway.
     */
    static final Duration CONFIRM = Duration.ofMillis(700);
    /** How long a primary may report its link to a backup broken, while the backup's node answers, before it is dropped. */
    static final Duration BACKUP_PATIENCE = Duration.ofSeconds(3);
    /**
     * With no group in the map: how long after the first of a server's memory nodes is described the coordinator waits for
     * the others before it forms the group from those it has (at once when all {@code replicas} are there). After a
     * restart of every voter, the first to answer may hold an older state than one that restarts a little later.
     */
    static final Duration FORM_SETTLE = Duration.ofSeconds(10);

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
    /** Of those, the ones a backup found gone for certain (its replica retired): a description of its node undoes none. */
    private final Map<Integer, Long> certainlyGone = new HashMap<>();
    /** Servers whose primary is being asked whether it still serves. */
    private final Set<Integer> confirming = new HashSet<>();
    /** Servers whose backup's report the primary answered (logged once), with the view. */
    private final Map<Integer, Long> dismissed = new HashMap<>();
    /**
     * Backups (server and endpoint) whose primary reports their link broken: since when, in which view, and the last report
     * (reports that stop for a second end the episode).
     */
    private final Map<String, long[]> backupSuspected = new HashMap<>();
    /** Nodes last asked again to take their part ({@link #askAgain}), and when. */
    private final Map<ActorRef<MemoryNode.Command>, Long> askedAgain = new HashMap<>();
    /** When each node was last sent a step: a description asked before that is stale, and a backup in it looked sole. */
    private final Map<ActorRef<MemoryNode.Command>, Long> steppedAt = new HashMap<>();
    /** Servers without a group in the map: when the first of their memory nodes was described ({@link #FORM_SETTLE}). */
    private final Map<Integer, Long> formingSince = new HashMap<>();
    /** Backups (server and endpoint) being asked whether they still apply the stream. */
    private final Set<String> backupConfirming = new HashSet<>();
    /**
     * Backups (server and endpoint) that count as gone: the view they were dropped from, and when. Not added again until
     * their node answers a description asked after that (a dead one would hold the coordinator for a step's timeout).
     */
    private final Map<String, long[]> backupGone = new HashMap<>();

    private ReplicaCoordinator(ActorContext<Command> context, TimerScheduler<Command> timers, int replicas,
                               ReplicatorMessageAdapter<Command, LWWRegister<ReplicaGroups>> replicator) {
        super(context);
        // Named here: Pekko otherwise names an actor's logger from the stack of its first use, and when that was a
        // message adapter's it became ActorCell's, whose INFO the nodes' logging drops (MemoryNodeCrashIT, 2026-11-28).
        context.setLoggerName(ReplicaCoordinator.class);
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
                .onMessage(BackupsSuspected.class, this::onBackupsSuspected)
                .onMessage(BackupConfirmed.class, this::onBackupConfirmed)
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
        if (suspected.certain()) {
            primaryGone.put(server, group.view());
            certainlyGone.put(server, group.view());
            getContext().getLog().warn("memory server {}: backup {} found its primary {} gone for certain ({}): no need to ask it",
                    server, backup.node().path().address(), group.primary().node().path().address(), backup.replica().primaryLost());
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

    private Behavior<Command> onBackupsSuspected(BackupsSuspected suspected) {
        MemoryNode.Description primary = suspected.primary();
        if (groups == null || primary == null || primary.node() == null) {
            return this;
        }
        int server = primary.serverId();
        ReplicaGroups.Group group = groups.group(server);
        if (group == null || !group.primary().node().equals(primary.node()) || primary.replica().view() != group.view()) {
            return this; // of another view: the map moved on already
        }
        long now = System.nanoTime();
        for (Map.Entry<String, String> lost : suspected.backups().entrySet()) {
            ReplicaGroups.Replica backup = group.backups().stream().filter(b -> b.endpoint().equals(lost.getKey())).findFirst()
                    .orElse(null);
            String key = server + "/" + lost.getKey();
            long[] dropped = backupGone.get(key);
            if (backup == null || dropped != null && dropped[0] == group.view()) {
                continue;
            }
            if (suspected.certain().contains(lost.getKey())) {
                gone(server, group.view(), lost.getKey(), lost.getValue() + ", for certain: its replica serves nobody any more");
                continue;
            }
            long[] since = backupSuspected.get(key);
            if (since == null || since[1] != group.view() || now - since[2] > Duration.ofSeconds(1).toNanos()) {
                backupSuspected.put(key, new long[] {now, group.view(), now}); // a new episode
            } else if (now - since[0] > BACKUP_PATIENCE.toNanos()) {
                gone(server, group.view(), lost.getKey(), lost.getValue() + ", for over " + BACKUP_PATIENCE.toSeconds()
                        + " s while its node still answers");
                continue;
            } else {
                since[2] = now;
            }
            if (backupConfirming.add(key)) {
                long view = group.view();
                String why = lost.getValue();
                getContext().ask(MemoryNode.Description.class, backup.node(), CONFIRM, MemoryNode.Describe::new,
                        (answer, failure) -> new BackupConfirmed(server, view, lost.getKey(), why, answer, failure));
            }
        }
        return reconcile();
    }

    private Behavior<Command> onBackupConfirmed(BackupConfirmed confirmed) {
        backupConfirming.remove(confirmed.server() + "/" + confirmed.endpoint());
        ReplicaGroups.Group group = groups.group(confirmed.server());
        if (group == null || group.view() != confirmed.view()) {
            return this;
        }
        MemoryNode.Description answer = confirmed.answer();
        if (confirmed.failure() == null && answer != null && MemoryNode.Replica.BACKUP_ROLE.equals(answer.replica().role())) {
            // Alive (its own view may be older: a view that kept it is not told to it): the primary greets it again, and
            // it is dropped only if the link stays broken (BACKUP_PATIENCE).
            return this;
        }
        gone(confirmed.server(), confirmed.view(), confirmed.endpoint(), confirmed.why() + ", and its node "
                + (confirmed.failure() != null ? "did not answer within " + CONFIRM.toMillis() + " ms"
                : "answers as " + answer.replica().role() + " of view " + answer.replica().view()));
        return reconcile();
    }

    private void gone(int server, long view, String endpoint, String why) {
        backupGone.put(server + "/" + endpoint, new long[] {view, System.nanoTime()});
        getContext().getLog().warn("memory server {}: the primary of view {} lost its link to backup {} ({}): it is dropped",
                server, view, endpoint, why);
    }

    private Behavior<Command> onListing(Listing listing) {
        listed = Set.copyOf(listing.listing().getServiceInstances(MemoryNode.KEY));
        described.keySet().retainAll(listed);
        listed.forEach(this::describe);
        return reconcile();
    }

    private void describe(ActorRef<MemoryNode.Command> node) {
        long askedAt = System.nanoTime();
        getContext().ask(MemoryNode.Description.class, node, Duration.ofSeconds(5), MemoryNode.Describe::new,
                (description, failure) -> new Described(node, description, failure, askedAt));
    }

    private Behavior<Command> onDescribed(Described answer) {
        Long stepped = steppedAt.get(answer.node());
        if (stepped != null && answer.askedAtNanos() - stepped < 0) {
            return this; // answered before the node took a later step: what it says is no longer so
        }
        if (answer.failure() == null && listed.contains(answer.node())) {
            described.put(answer.node(), answer.description());
            MemoryNode.Description d = answer.description();
            long[] gone = backupGone.get(d.serverId() + "/" + d.endpoint());
            ReplicaGroups.Group group = groups == null ? null : groups.group(d.serverId());
            if (gone != null && answer.askedAtNanos() - gone[1] > 0 && (group == null
                    || group.backups().stream().noneMatch(b -> b.endpoint().equals(d.endpoint())))) {
                // It answers, asked after it was dropped: it may join again. (Not before the drop is in the map: a drop
                // marked while a step was under way would be undone.)
                backupGone.remove(d.serverId() + "/" + d.endpoint());
            }
            if (group != null && group.primary().node().equals(d.node()) && MemoryNode.Replica.PRIMARY_ROLE.equals(d.replica().role())
                    && !Long.valueOf(group.view()).equals(certainlyGone.get(d.serverId())) && primaryGone.remove(d.serverId(), group.view())) {
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
            // Every replica described, or a while to let them come: the first to answer is not always the newest.
            long now = System.nanoTime();
            long since = formingSince.computeIfAbsent(server, id -> now);
            if (here.size() < replicas && now - since < FORM_SETTLE.toNanos()) {
                return false;
            }
            MemoryNode.Description first = founder(server, here);
            if (first == null) {
                return false;
            }
            // Views go on from the newest any of them kept, so that records of this map's views outrank older ones.
            long view = 1 + here.stream().mapToLong(d -> d.replica().keptView()).max().orElse(0);
            change(new ReplicaGroups.Group(server, view, ReplicaGroups.Replica.of(first), List.of()),
                    List.of(new Step(first.node(), MemoryNode.Replicate.BECOME_PRIMARY, view, List.of())),
                    "memory server " + server + ": " + first.node().path().address() + " is primary of view " + view
                            + (first.replica().keptRole() == null ? "" : " (its kept region was " + first.replica().keptRole()
                            + " of view " + first.replica().keptView() + " of a group the map no longer has)"));
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
            MemoryNode.Description restarted = best == null ? KeptRegions.restartedMember(group, here) : null;
            if (restarted != null) {
                reportedLost.remove(server);
                long view = group.view() + 1;
                change(new ReplicaGroups.Group(server, view, ReplicaGroups.Replica.of(restarted), List.of()),
                        List.of(new Step(restarted.node(), MemoryNode.Replicate.BECOME_PRIMARY, view, List.of())),
                        "memory server " + server + ": every replica of view " + group.view() + " was gone; "
                                + restarted.node().path().address() + " restarted on the kept region of its "
                                + restarted.replica().keptRole() + ", which holds every change answered in that view, and is"
                                + " primary of view " + view);
                return true;
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
            long[] dropped = backupGone.get(server + "/" + backup.endpoint());
            if (alive(backup.node(), unreachable) && (dropped == null || dropped[0] != group.view())) {
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
        if (askAgain(server, group, primary)) {
            return true;
        }
        if (group.backups().size() < replicas - 1) {
            for (MemoryNode.Description candidate : here) {
                ActorRef<MemoryNode.Command> node = candidate.node();
                boolean inView = node.equals(group.primary().node()) || group.backups().stream().anyMatch(b -> b.node().equals(node));
                if (!inView && !MemoryNode.Replica.PRIMARY_ROLE.equals(candidate.replica().role())
                        && !backupGone.containsKey(server + "/" + candidate.endpoint())) {
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

    /**
     * A step of the group's view that failed or timed out (the node was busy, or answered too late) left the map ahead of a
     * replica: a backup that never took its part (the primary would not stream to it, and the group would run a replica
     * short while the map says otherwise), or a primary that did not install the view. Asks again, at most every
     * {@link #ASK_AGAIN_AFTER} per node; true when it did.
     */
    private boolean askAgain(int server, ReplicaGroups.Group group, MemoryNode.Description primary) {
        long now = System.nanoTime();
        for (ReplicaGroups.Replica backup : group.backups()) {
            MemoryNode.Description d = described.get(backup.node());
            String role = d == null ? null : d.replica().role();
            if ((MemoryNode.Replica.SOLE_ROLE.equals(role) || MemoryNode.Replica.DEMOTED_ROLE.equals(role)) && mayAskAgain(backup.node(), now)) {
                change(group, List.of(new Step(backup.node(), MemoryNode.Replicate.BECOME_BACKUP, group.view(), List.of()),
                                new Step(group.primary().node(), MemoryNode.Replicate.INSTALL_VIEW, group.view(),
                                        endpoints(group.backups()))),
                        "memory server " + server + ": asking " + backup + " again to be a backup in view " + group.view()
                                + " (it is " + d.replica().role() + ")");
                return true;
            }
        }
        if (primary != null && MemoryNode.Replica.PRIMARY_ROLE.equals(primary.replica().role())
                && primary.replica().view() < group.view() && mayAskAgain(group.primary().node(), now)) {
            change(group, List.of(new Step(group.primary().node(), MemoryNode.Replicate.INSTALL_VIEW, group.view(),
                    endpoints(group.backups()))), "memory server " + server + ": asking " + group.primary()
                    + " again to install view " + group.view() + " (it is in view " + primary.replica().view() + ")");
            return true;
        }
        return false;
    }

    private boolean mayAskAgain(ActorRef<MemoryNode.Command> node, long now) {
        Long last = askedAgain.get(node);
        if (last != null && now - last < ASK_AGAIN_AFTER.toNanos()) {
            return false;
        }
        askedAgain.put(node, now);
        askedAgain.keySet().retainAll(listed);
        return true;
    }

    /**
     * The memory node to form {@code server}'s group with, when the map has none: the one whose kept region holds its group's
     * changes of the newest view (its primary's before a backup's), which is what a restart of every voter leaves (the map
     * lives in their memory); else one with a region formatted by this run (a new cluster); never a kept region that held
     * no complete state, such as a backup whose copy was cut short. Null when none may found it yet.
     */
    private MemoryNode.Description founder(int server, List<MemoryNode.Description> here) {
        MemoryNode.Description founder = KeptRegions.founderOf(here);
        if (founder == null && !here.isEmpty() && reportedLost.add(server)) {
            getContext().getLog().error("memory server {}: the replica groups' map has no group for it, and its memory nodes"
                    + " ({}) started on kept regions that held no complete state of their group; it stays unavailable until"
                    + " a replica that did restarts, or its region is formatted anew", server,
                    here.stream().map(d -> d.node().path().address().toString()).toList());
        } else if (founder != null) {
            reportedLost.remove(server);
        }
        return founder;
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
        forgetOlderViews();
        return next(stored.steps());
    }

    /** Drops what is known of backups in views the map has left (their keys are "server/endpoint"). */
    private void forgetOlderViews() {
        java.util.function.Predicate<Map.Entry<String, Long>> older = entry -> {
            ReplicaGroups.Group group = groups.group(Integer.parseInt(entry.getKey().substring(0, entry.getKey().indexOf('/'))));
            return group != null && entry.getValue() < group.view() - 1;
        };
        backupSuspected.entrySet().removeIf(entry -> older.test(Map.entry(entry.getKey(), entry.getValue()[1])));
        backupGone.entrySet().removeIf(entry -> older.test(Map.entry(entry.getKey(), entry.getValue()[0]))
                && !listedEndpoint(entry.getKey()));
        groups.groups().forEach(group -> formingSince.remove(group.serverId()));
    }

    /** Whether a listed memory node serves the endpoint of {@code key} ("server/endpoint"). */
    private boolean listedEndpoint(String key) {
        for (MemoryNode.Description d : described.values()) {
            if (key.equals(d.serverId() + "/" + d.endpoint()) && listed.contains(d.node())) {
                return true;
            }
        }
        return false;
    }

    private Behavior<Command> next(List<Step> steps) {
        if (steps.isEmpty()) {
            busy = false;
            listed.forEach(this::describe);
            return this;
        }
        Step step = steps.get(0);
        List<Step> rest = steps.subList(1, steps.size());
        steppedAt.keySet().retainAll(listed);
        steppedAt.put(step.node(), System.nanoTime());
        getContext().ask(MemoryNode.Replicated.class, step.node(),
                MemoryNode.Replicate.BECOME_BACKUP.equals(step.op()) ? BACKUP_STEP_TIMEOUT : STEP_TIMEOUT,
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
        // A node applies a step off its actor: a Describe it got meanwhile may still say how it was before.
        steppedAt.put(acted.step().node(), System.nanoTime());
        return next(acted.rest());
    }
}
