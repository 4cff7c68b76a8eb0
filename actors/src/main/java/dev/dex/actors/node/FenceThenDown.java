package dev.dex.actors.node;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.UniqueAddress;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Down;

import dev.dex.actors.partition.ProbedRebalance;

/**
 * Fence, then down: on a fabric that fences ({@code tcp}, {@code disni}), a compute node that this memory node's own
 * failure detector finds unreachable is fenced at every memory node and then downed at once, without waiting for the
 * split-brain resolver's {@code stable-after}. Its partitions then move as soon as the cluster removes it.
 *
 * <p>A faster signal comes first where it exists: a process that dies has its sockets closed by the kernel, so its
 * fabric connections to this memory node end at once, from its side, long before any heartbeat is missed. A compute
 * node that is up and hung up its last connection here ({@link dev.dex.rdma.Fabric#hungUpClients}: ended by the
 * client's side, not by this server's fence, refusal or shutdown of a replica) is probed: a TCP connection to its
 * remoting port ({@link #probePort}) is refused when no process listens there (dead), accepted when one does (alive,
 * or only paused), and only if neither within {@link #SUSPECT_TIMEOUT} it is asked to answer an {@code Identify}
 * within as long. Dead or silent, and with the voters' probe below holding, it is fenced and downed as above,
 * and quarantined here as well, so that the cluster marks it terminated and removes it without waiting for the
 * failure detector. A node that answers is alive (a client that closed a connection on a failed verb) and is left to
 * the failure detector; it is asked again only after another hang-up. A node that is only slow keeps its connections
 * and is never asked. A live node that hangs up (a start-up retry, a move to a new primary) is found alive by its
 * port at once, even when it is paused; only one whose port tells nothing (a host or link that fails just then) and
 * that does not answer for {@link #SUSPECT_TIMEOUT} is fenced and downed, and must start again, losing nothing (the
 * new owners replay its logs).
 *
 * <p>Why it is safe. {@code stable-after} is there so that a node that is only slow keeps its partitions, and so that
 * both sides of a network split decide alike. Neither is needed for the data once the node is fenced: nothing it
 * sends is applied by any memory node any more, so a new owner's first write cannot race its last one, and a node
 * downed by mistake loses nothing (its acknowledged writes are in the redo logs, which the new owners replay). The
 * rule acts only where it cannot do harm:
 * <ul>
 *   <li>only this node's own evidence counts: its failure detector's verdict, or the node's hang-up of its connections
 *       here and its silence (the cluster's unreachability merges every node's observations: a split between two
 *       compute nodes must not make a memory node that reaches both down one);</li>
 *   <li>only on a side that holds a strict majority of the voters (memory and compute nodes, up or leaving), as seen
 *       here and confirmed by a probe: the other voters must answer an {@code Identify} within 500 ms right before the
 *       fence, since nodes are found unreachable one at a time and a node cut off from everybody may count a majority
 *       for a moment;</li>
 *   <li>only once every memory node that is a member answered that it fenced the node: a memory node that cannot be
 *       reached, or a fabric that cannot fence, leaves the node to the split-brain resolver, as before.</li>
 * </ul>
 * A node stalled for longer than the failure detector's verdict (about the heartbeat pause plus an interval: 2.5-3 s
 * with {@code dex-cluster.conf}) is therefore downed, where before it took that plus {@code stable-after}; one paused
 * for less (a 1 s collection) is never found unreachable and keeps its partitions. The failure detector only monitors
 * a node's {@code monitored-by-nr-of-members} (9) neighbours in the heartbeat ring: in a larger cluster a compute node
 * that no memory node monitors is left to the resolver. Every memory node runs the rule; two that act on the same node
 * fence it twice and down it twice, which changes nothing.
 *
 * <pre>
 * Concurrency: an actor; its state is touched only by its own messages. The failure detector registry it reads is
 * Pekko's, safe to read from any thread.
 * </pre>
 */
final class FenceThenDown {
    /** How often the rule looks at the cluster's reachability. */
    static final Duration TICK = Duration.ofMillis(100);
    /** How long the memory nodes have to answer a fence before the node is left to the split-brain resolver. */
    static final Duration FENCE_TIMEOUT = Duration.ofSeconds(2);

    /**
     * Holds the rule back after this node itself was paused or starved: a memory node that wakes from a pause (a long
     * collection, SIGSTOP, a stalled VM) finds every node unreachable whose heartbeat it has not read yet, and could
     * otherwise take a live compute node for a crashed one while the others' heartbeats already came in. A gap of more
     * than {@link #GAP} between two ticks (100 ms apart) holds the rule back for {@link #HOLD}, enough for the failure
     * detector to read the heartbeats that waited. Not an actor: the rule's actor uses one, and tests drive it.
     */
    static final class PauseGuard {
        static final Duration GAP = Duration.ofSeconds(1);
        static final Duration HOLD = Duration.ofSeconds(5);
        private long lastTick;
        private long holdUntil;
        private boolean started;

        /** Whether the rule may act at {@code now} (nanoTime), a tick; the first tick only starts the clock. */
        boolean mayAct(long now) {
            boolean first = !started;
            started = true;
            if (!first && now - lastTick > GAP.toNanos()) {
                holdUntil = now + HOLD.toNanos();
            }
            lastTick = now;
            return !first && now - holdUntil >= 0;
        }
    }

    private FenceThenDown() {
    }

    sealed interface Command permits Tick, MemoryNodes, Answer, Probed {
    }

    /**
     * How many of the other voters answered this round's probe, for suspect {@code member}; for a suspect that hung up
     * its fabric connections ({@code lost}), also whether it answered itself.
     */
    private record Probed(UniqueAddress member, int answered, int voters, boolean lost, boolean suspectAnswered)
            implements Command, NoSerializationVerificationNeeded {
    }

    /**
     * How long the probe of a compute node that hung up its fabric connections waits, at each of its two steps: for a
     * TCP connection to its remoting port to be accepted or refused, and then, if neither came, for the node to answer
     * an {@code Identify} (to be left alone). It is probed at the first tick that finds the hang-up: a live one accepts
     * or answers at once, so no grace is needed before the probe.
     */
    static final Duration SUSPECT_TIMEOUT = Duration.ofMillis(200);

    /** How long a voter has to answer the probe that shows this node is on a majority side right now. */
    static final Duration PROBE_TIMEOUT = Duration.ofMillis(500);

    private enum Tick implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    private record MemoryNodes(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    private record Answer(MemoryNode.MemberFenced fenced) implements Command, NoSerializationVerificationNeeded {
    }

    /** A fence asked of every memory node: which have answered that they fenced, and since when. */
    private static final class Fencing {
        final Set<Address> asked;
        final Set<Address> fenced = new HashSet<>();
        final long since = System.nanoTime();

        Fencing(Set<Address> asked) {
            this.asked = asked;
        }
    }

    /**
     * Whether a memory node of {@code system} runs the rule: over a fabric that fences ({@code tcp}, {@code disni}) and
     * with {@code dex.memory.fence-then-down} on.
     */
    static boolean applies(org.apache.pekko.actor.typed.ActorSystem<?> system, String transport) {
        var config = system.settings().config();
        boolean on = !config.hasPath("dex.memory.fence-then-down") || config.getBoolean("dex.memory.fence-then-down");
        return on && ("tcp".equals(transport) || "disni".equals(transport));
    }

    /**
     * The rule, with {@code hungUpClients} the fabric client identities ({@link Fabrics#clientId}) that hung up their last
     * connection to this memory node's fabric server, with when ({@link dev.dex.rdma.Fabric#hungUpClients}; empty where
     * the fabric does not tell).
     */
    static Behavior<Command> create(Supplier<Map<Long, Long>> hungUpClients) {
        return Behaviors.setup(context -> Behaviors.withTimers(timers -> {
            context.setLoggerName(FenceThenDown.class);
            context.getSystem().receptionist().tell(Receptionist.subscribe(MemoryNode.KEY,
                    context.messageAdapter(Receptionist.Listing.class, MemoryNodes::new)));
            timers.startTimerWithFixedDelay(Tick.INSTANCE, TICK);
            return new State(context, hungUpClients).behavior();
        }));
    }

    private static final class State {
        private final ActorContext<Command> context;
        private final ActorRef<MemoryNode.MemberFenced> answers;
        private Set<ActorRef<MemoryNode.Command>> memoryNodes = Set.of();
        private final Map<UniqueAddress, Fencing> fencing = new HashMap<>();
        /** Suspects whose probe of the other voters is out. */
        private final Set<UniqueAddress> probing = new HashSet<>();
        /** Nodes downed here, or given up on (left to the resolver): each is acted on once. */
        private final Set<UniqueAddress> done = new HashSet<>();
        private final PauseGuard guard = new PauseGuard();
        private final Supplier<Map<Long, Long>> hungUpClients;
        /** The hang-up (its time) each compute node was last probed for: one probe per hang-up. */
        private final Map<UniqueAddress, Long> probedHangUp = new HashMap<>();
        /** Suspects found by their lost connections: downed by quarantine as well, since the cluster may still reach them. */
        private final Set<UniqueAddress> lostConnections = new HashSet<>();

        State(ActorContext<Command> context, Supplier<Map<Long, Long>> hungUpClients) {
            this.context = context;
            this.hungUpClients = hungUpClients;
            this.answers = context.messageAdapter(MemoryNode.MemberFenced.class, Answer::new);
        }

        Behavior<Command> behavior() {
            return Behaviors.receive(Command.class)
                    .onMessage(MemoryNodes.class, nodes -> {
                        memoryNodes = Set.copyOf(nodes.listing().getAllServiceInstances(MemoryNode.KEY));
                        return Behaviors.same();
                    })
                    .onMessageEquals(Tick.INSTANCE, this::onTick)
                    .onMessage(Answer.class, answer -> onAnswer(answer.fenced()))
                    .onMessage(Probed.class, this::onProbed)
                    .build();
        }

        private Behavior<Command> onTick() {
            Cluster cluster = Cluster.get(context.getSystem());
            ClusterEvent.CurrentClusterState state = cluster.state();
            long now = System.nanoTime();
            boolean mayAct = guard.mayAct(now);
            fencing.entrySet().removeIf(entry -> {
                if (now - entry.getValue().since > FENCE_TIMEOUT.toNanos()) {
                    context.getLog().warn("compute node {} is unreachable, but not every memory node fenced it within {} ms"
                            + " (fenced at {} of {}): it is left to the split-brain resolver", entry.getKey().address(),
                            FENCE_TIMEOUT.toMillis(), entry.getValue().fenced, entry.getValue().asked);
                    done.add(entry.getKey());
                    return true;
                }
                return false;
            });
            // Acted on once while it stays unreachable (or down); one that is up and reachable again may be acted on anew.
            done.removeIf(member -> {
                MemberStatus status = statusOf(state, member);
                return status == null || status == MemberStatus.up()
                        && state.getUnreachable().stream().noneMatch(m -> m.uniqueAddress().equals(member));
            });
            if (!mayAct) {
                return Behaviors.same(); // just woken from a pause, or the first tick
            }
            lostConnections.retainAll(fencing.keySet());
            watchHangUps(state);
            var detector = org.apache.pekko.cluster.Cluster.get(Adapter.toClassic(context.getSystem())).failureDetector();
            for (Member member : suspects(state, address -> !detector.isAvailable(address))) {
                if (fencing.containsKey(member.uniqueAddress()) || done.contains(member.uniqueAddress())
                        || probing.contains(member.uniqueAddress())) {
                    continue;
                }
                probe(state, member, false);
            }
            return Behaviors.same();
        }

        /**
         * The fast signal of a crash: a compute node that is up and hung up its last fabric connection here (seen at a
         * tick, every {@link #TICK}). A process that dies has its connections ended by the kernel at once, while the
         * failure detector waits out the heartbeat pause; a node that is only slow (a collection, SIGSTOP) keeps its
         * connections. Such a node is probed once per hang-up ({@link #probePort}, then, only if its port neither accepts
         * nor refuses within {@link #SUSPECT_TIMEOUT}, an {@code Identify}): a port that accepts, or an answer, means a
         * process still runs there, and the node is left alone; a port that refuses, or no answer, means it is gone, and
         * if a majority of the other voters answer, it is fenced and downed.
         */
        private void watchHangUps(ClusterEvent.CurrentClusterState state) {
            Map<Long, Long> hungUp = hungUpClients.get();
            Set<UniqueAddress> up = new HashSet<>();
            for (Member member : state.getMembers()) {
                UniqueAddress id = member.uniqueAddress();
                if (!member.hasRole("compute") || member.status() != MemberStatus.up()) {
                    continue;
                }
                up.add(id);
                Long at = hungUp.get(Fabrics.clientId(id));
                if (at == null || at.equals(probedHangUp.get(id)) || fencing.containsKey(id) || done.contains(id)
                        || probing.contains(id)) {
                    continue;
                }
                probedHangUp.put(id, at);
                probe(state, member, true);
            }
            probedHangUp.keySet().retainAll(up);
        }

        /**
         * Asks every other voter that is up (or leaving) to answer, now: a view of the cluster's reachability lags (nodes
         * are found unreachable one at a time, each by its own heartbeats), so a node cut off from everybody may still
         * count a majority for a moment; answers from a majority, within {@link #PROBE_TIMEOUT}, show it is not.
         */
        private void probe(ClusterEvent.CurrentClusterState state, Member suspect, boolean lost) {
            List<Member> voters = voters(state);
            var classic = Adapter.toClassic(context.getSystem());
            Address self = Cluster.get(context.getSystem()).selfMember().address();
            List<CompletableFuture<Boolean>> answers = new java.util.ArrayList<>();
            for (Member voter : voters) {
                if (!voter.address().equals(self) && !voter.uniqueAddress().equals(suspect.uniqueAddress())) {
                    answers.add(ProbedRebalance.answers(classic, voter.address(), PROBE_TIMEOUT));
                }
            }
            // A hang-up's suspect: first its remoting port (refused: no process listens, it is dead; accepted: a process
            // listens, alive or merely paused), then, if neither, an Identify.
            CompletableFuture<Boolean> itself = !lost ? CompletableFuture.completedFuture(false)
                    : probePort(suspect.address(), SUSPECT_TIMEOUT, context.getSystem().dispatchers().lookup(
                            org.apache.pekko.actor.typed.DispatcherSelector.blocking()))
                    .thenCompose(port -> port == Port.SILENT ? ProbedRebalance.answers(classic, suspect.address(), SUSPECT_TIMEOUT)
                            : CompletableFuture.completedFuture(port == Port.ACCEPTED));
            probing.add(suspect.uniqueAddress());
            int total = voters.size();
            List<CompletableFuture<Boolean>> all = new java.util.ArrayList<>(answers);
            all.add(itself);
            context.pipeToSelf(CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)),
                    (done, failure) -> new Probed(suspect.uniqueAddress(),
                            (int) answers.stream().filter(answer -> answer.getNow(false)).count(), total, lost, itself.getNow(false)));
        }

        private Behavior<Command> onProbed(Probed probed) {
            probing.remove(probed.member());
            if (probed.lost() && probed.suspectAnswered()) {
                context.getLog().info("compute node {} hung up its fabric connections to this memory node, but a process listens"
                        + " on its remoting port or it answers: alive, left alone", probed.member().address());
                return Behaviors.same();
            }
            // This node answers for itself; the suspect counts against.
            if (2 * (probed.answered() + 1) <= probed.voters() && probed.lost()) {
                // Not given up on: the failure detector's path may still act on it, as may the next hang-up.
                context.getLog().info("compute node {} hung up its fabric connections to this memory node and does not answer,"
                        + " but only {} of the {} other voters answered now: not a majority; nothing done", probed.member().address(),
                        probed.answered(), probed.voters() - 1);
                return Behaviors.same();
            }
            if (2 * (probed.answered() + 1) <= probed.voters()) {
                context.getLog().info("compute node {} is unreachable from this memory node, but only {} of the {} other voters"
                        + " answered now: not a majority; left to the split-brain resolver", probed.member().address(),
                        probed.answered(), probed.voters() - 1);
                done.add(probed.member());
                return Behaviors.same();
            }
            ClusterEvent.CurrentClusterState state = Cluster.get(context.getSystem()).state();
            Member member = null;
            for (Member m : probed.lost() ? state.getMembers() : state.getUnreachable()) {
                if (m.uniqueAddress().equals(probed.member()) && m.status() != MemberStatus.down()
                        && (!probed.lost() || m.status() == MemberStatus.up())) {
                    member = m;
                }
            }
            if (member == null || done.contains(probed.member()) || fencing.containsKey(probed.member())) {
                return Behaviors.same(); // reachable again, or gone, meanwhile
            }
            Set<Address> asked = memoryNodeAddresses(state);
            if (asked == null) {
                return Behaviors.same(); // a memory node is a member but not listed (yet): the resolver decides
            }
            fencing.put(member.uniqueAddress(), new Fencing(asked));
            if (probed.lost()) {
                lostConnections.add(member.uniqueAddress());
            }
            context.getLog().info("compute node {} {}, and {} of the {} other voters answered just now: asking every memory node"
                    + " ({}) to fence it before it is downed", member.address(), probed.lost()
                            ? "hung up its fabric connections to this memory node and does not answer" : "is unreachable from this memory node",
                    probed.answered(), probed.voters() - 1, asked.size());
            for (ActorRef<MemoryNode.Command> node : memoryNodes) {
                node.tell(new MemoryNode.FenceMember(member.address().toString(), member.uniqueAddress().longUid(), answers));
            }
            return Behaviors.same();
        }

        /** The member's status in {@code state}; null when it is not a member (any more). */
        private static MemberStatus statusOf(ClusterEvent.CurrentClusterState state, UniqueAddress member) {
            for (Member m : state.getMembers()) {
                if (m.uniqueAddress().equals(member)) {
                    return m.status();
                }
            }
            return null;
        }

        /**
         * The addresses of the memory nodes that are members, if each has a listed memory node actor (a listing at an
         * address counts once), else null.
         */
        private Set<Address> memoryNodeAddresses(ClusterEvent.CurrentClusterState state) {
            Set<Address> members = new HashSet<>();
            for (Member m : state.getMembers()) {
                if (m.hasRole("memory") && m.status() != MemberStatus.down() && m.status() != MemberStatus.removed()) {
                    members.add(m.address());
                }
            }
            Set<Address> listed = new HashSet<>();
            Address self = context.getSystem().address();
            for (ActorRef<MemoryNode.Command> node : memoryNodes) {
                Address address = node.path().address();
                listed.add(address.hasLocalScope() ? self : address);
            }
            return !members.isEmpty() && listed.containsAll(members) ? members : null;
        }

        private Behavior<Command> onAnswer(MemoryNode.MemberFenced answer) {
            UniqueAddress member = null;
            for (UniqueAddress candidate : fencing.keySet()) {
                if (candidate.address().toString().equals(answer.member()) && candidate.longUid() == answer.uid()) {
                    member = candidate;
                }
            }
            if (member == null) {
                return Behaviors.same(); // given up on, or downed already
            }
            Fencing pending = fencing.get(member);
            if (!answer.fenced()) {
                context.getLog().warn("compute node {} is unreachable, but memory node {} could not fence it ({}): it is left to"
                        + " the split-brain resolver", member.address(), answer.node(), answer.error());
                fencing.remove(member);
                done.add(member);
                return Behaviors.same();
            }
            Address fencedAt = addressOf(answer.node());
            if (fencedAt == null) {
                context.getLog().warn("a fence answer for compute node {} names no memory node ({}): it counts for none",
                        member.address(), answer.node());
                return Behaviors.same();
            }
            pending.fenced.add(fencedAt);
            if (pending.fenced.containsAll(pending.asked)) {
                fencing.remove(member);
                done.add(member);
                if (statusOf(Cluster.get(context.getSystem()).state(), member) == null) {
                    return Behaviors.same(); // gone meanwhile; a Down by address would hit a new incarnation there
                }
                Cluster.get(context.getSystem()).manager().tell(new Down(member.address()));
                boolean lost = lostConnections.remove(member);
                if (lost) {
                    quarantine(member);
                }
                context.getLog().info("compute node {} is {} and fenced at every memory node ({}) {} ms after: downed without"
                        + " waiting for stable-after, so that its partitions move now", member.address(),
                        lost ? "gone (it hung up its fabric connections and does not answer)" : "unreachable from this memory node",
                        pending.asked.size(), (System.nanoTime() - pending.since) / 1_000_000);
            }
            return Behaviors.same();
        }

        /**
         * Ends this node's association with {@code member}, a node already fenced and downed whose fabric connections
         * closed: the cluster marks it terminated here, and the leader removes a member that is down and unreachable or
         * terminated at once, instead of waiting for the failure detector to find what the hang-up showed.
         * Pekko has no public call for it; the provider's own quarantine is the one its remoting uses.
         */
        private void quarantine(UniqueAddress member) {
            var classic = (org.apache.pekko.actor.ExtendedActorSystem) Adapter.toClassic(context.getSystem());
            if (classic.provider() instanceof org.apache.pekko.remote.RemoteActorRefProvider remote) {
                remote.quarantine(member.address(), scala.Option.apply((Object) member.longUid()),
                        "fenced and downed by this memory node: it hung up its fabric connections and does not answer");
            }
        }

        /** The memory node an answer names; null when the name is not an address (it then counts for no node). */
        private static Address addressOf(String node) {
            try {
                return org.apache.pekko.actor.AddressFromURIString.parse(node);
            } catch (RuntimeException malformed) {
                return null;
            }
        }
    }

    /**
     * The compute nodes the rule acts on now: members that are not down, that the cluster finds unreachable and
     * {@code unreachableHere} (this node's own failure detector) too, provided the reachable voters are a strict
     * majority of the voters. Empty otherwise.
     */
    static List<Member> suspects(ClusterEvent.CurrentClusterState state, java.util.function.Predicate<Address> unreachableHere) {
        Set<Member> unreachable = state.getUnreachable();
        List<Member> voters = voters(state);
        long reachable = voters.stream().filter(m -> !unreachable.contains(m)).count();
        if (2 * reachable <= voters.size()) {
            return List.of();
        }
        return unreachable.stream()
                .filter(m -> m.hasRole("compute") && m.status() != MemberStatus.down() && m.status() != MemberStatus.removed()
                        && unreachableHere.test(m.address()))
                .toList();
    }

    /** What a TCP connection to a member's remoting port shows. */
    enum Port {
        /** Refused: no process listens there, so the member's process is gone (a kernel answers for the host). */
        REFUSED,
        /** Accepted: a process listens there (the kernel accepts for a process that is alive, even if paused). */
        ACCEPTED,
        /** Nothing within the timeout, or no address to try: tells nothing. */
        SILENT
    }

    /**
     * Opens and at once closes a TCP connection to {@code address}'s host and port (its remoting), on {@code executor}:
     * the one probe that tells a dead process (refused) from a paused one (accepted) within microseconds. The member's
     * remoting sees a connection that closes before its handshake.
     */
    static CompletableFuture<Port> probePort(Address address, Duration timeout, java.util.concurrent.Executor executor) {
        if (address.getHost().isEmpty() || address.getPort().isEmpty()) {
            return CompletableFuture.completedFuture(Port.SILENT);
        }
        String host = address.getHost().get();
        int port = (Integer) address.getPort().get();
        return CompletableFuture.supplyAsync(() -> {
            java.net.InetAddress[] addresses;
            try {
                addresses = java.net.InetAddress.getAllByName(host);
            } catch (java.io.IOException | RuntimeException unresolved) {
                return Port.SILENT;
            }
            // Refused only where every address of the name refuses: remoting may listen on one family of a dual name.
            Port seen = Port.REFUSED;
            for (java.net.InetAddress ip : addresses) {
                Port at = connect(new java.net.InetSocketAddress(ip, port), timeout);
                if (at == Port.ACCEPTED) {
                    return Port.ACCEPTED;
                }
                seen = at == Port.SILENT ? Port.SILENT : seen;
            }
            return seen;
        }, executor).completeOnTimeout(Port.SILENT, 2 * timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
    }

    private static Port connect(java.net.InetSocketAddress address, Duration timeout) {
        try (java.net.Socket socket = new java.net.Socket()) {
            socket.connect(address, (int) Math.max(1, timeout.toMillis()));
            return Port.ACCEPTED;
        } catch (java.net.ConnectException refused) {
            // ECONNREFUSED; not a route or a time-out (those are other classes, or say so), whatever the locale's words.
            String why = String.valueOf(refused.getMessage()).toLowerCase(java.util.Locale.ROOT);
            return why.contains("unreachable") || why.contains("timed out") ? Port.SILENT : Port.REFUSED;
        } catch (java.io.IOException | RuntimeException nothing) {
            return Port.SILENT;
        }
    }

    /** The voters that count for a majority: up or leaving (Pekko's resolver leaves joining ones out too). */
    static List<Member> voters(ClusterEvent.CurrentClusterState state) {
        List<Member> voters = new java.util.ArrayList<>();
        for (Member m : state.getMembers()) {
            if (m.hasRole("voter") && (m.status() == MemberStatus.up() || m.status() == MemberStatus.leaving())) {
                voters.add(m);
            }
        }
        return voters;
    }
}
