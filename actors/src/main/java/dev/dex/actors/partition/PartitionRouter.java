package dev.dex.actors.partition;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;

import org.apache.pekko.Done;
import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;

import dev.dex.actors.CborSerializable;

/**
 * One per compute node: takes the batches of many partitions in one message from a client and hands each to
 * this node's sharding region, and sends their answers back to each client in as few messages as they
 * arrive. A message costs a client and a node far more than an operation (Artery's streams, the codec, actor
 * dispatch), and at a steady rate below the peak a partition's batches are small: with one message per
 * compute node instead of one per partition, a batch of the same latency carries about as many operations as
 * the node has partitions more (docs/cluster.md tells the measurements).
 *
 * <p>The region delivers a batch to a partition on this node without serializing it, and forwards one whose
 * partition moved to where sharding has it now, as it does any message; the client learns from
 * {@link Ops.Results#host()} where a partition answered and bundles its next batches for that node's router.
 * Each batch goes to the region under an id of this router's own (clients number their batches
 * independently), carrying the client's name, id, epoch and the batch it follows as its guard against late attempts
 * ({@link Partition.Execute#client()}); its answer gets the client's id back and joins the client's next {@link Ops.ResultsBundle},
 * sent when this router has handled the messages that had reached it by then (a {@link Flush} it tells itself
 * after the first answer). An answer that never comes (a partition that moved and dropped the batch) is the
 * client's to time out; its entry here is forgotten after {@link #FORGET_AFTER}.
 *
 * <p>Order: the batches of one bundle reach the region in the bundle's order, and bundles in the order they
 * came, so one client's batches to a partition through this router run in the order it sent them. A client
 * switches a partition between this path and its sharding proxy only when none of that partition's batches is
 * in flight ({@code DexClient}).
 *
 * <p>Concurrency: an actor; its state is touched only by its own messages.
 */
public final class PartitionRouter extends AbstractBehavior<PartitionRouter.Command> {
    /** Clients find the routers of the compute nodes under this key. */
    public static final ServiceKey<Command> KEY = ServiceKey.create(Command.class, "dex-partition-router");
    /** Answers, bytes about, that one {@link Ops.ResultsBundle} may carry: well under Artery's 256 KiB frame. */
    static final int MAX_BUNDLE_BYTES = 96 * 1024;
    /** A batch unanswered this long is the client's to time out; its entry here is dropped. */
    static final Duration FORGET_AFTER = Duration.ofSeconds(60);

    /**
     * Messages of the router. Only the messages that may come from another process are serializable
     * ({@link CborSerializable}, or a binding of their own to {@link BatchSerializer}); the actor's internal
     * messages are not, so no other process can forge them (a forged completion could, say, drive a count of
     * work in flight negative).
     *
     * <p>Sealed, so that the list below is the actor's whole protocol: no class elsewhere can become one of its
     * messages.
     */
    public sealed interface Command permits Bundle, GetStats, Answered, Flush, Leaving, LeftWaiting {
    }

    /**
     * One partition's batch inside a {@link Bundle}: what a {@link Partition.Execute} carries but the reply
     * address and the client; {@code batch} is also the batch's {@link Partition.Execute#seq()}.
     */
    public record Routed(long partition, long batch, long epoch, long follows, List<Ops.Op> ops, long[] trace) {
        public Routed(long partition, long batch, long epoch, long follows, List<Ops.Op> ops) {
            this(partition, batch, epoch, follows, ops, null);
        }

        public Routed(long partition, long batch, List<Ops.Op> ops) {
            this(partition, batch, 0, 0, ops);
        }
    }

    /**
     * Batches of several partitions from one client, answered to {@code replyTo}; {@code client} as in
     * {@link Partition.Execute#client()}.
     */
    public record Bundle(List<Routed> batches, ActorRef<Ops.ResultsBundle> replyTo, long client) implements Command {
        public Bundle(List<Routed> batches, ActorRef<Ops.ResultsBundle> replyTo) {
            this(batches, replyTo, 0);
        }
    }

    /** How many bundles and batches this router has taken; the tests ask it to check that batches travel bundled. */
    public record GetStats(ActorRef<Stats> replyTo) implements Command, CborSerializable {
    }

    public record Stats(long bundles, long batches) implements CborSerializable {
    }

    private record Answered(Ops.Results results) implements Command, NoSerializationVerificationNeeded {
    }

    private enum Flush implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /**
     * The node is leaving (its coordinated shutdown's first phase: {@link #leave}): from now on every batch is answered
     * {@link Ops#NOT_HELD} at once, and the router leaves the Receptionist's listing; acknowledged to {@code replyTo} once
     * every batch it forwarded before has been answered (their answers come back through it), or after
     * {@link #ANSWERS_WAIT}: the shutdown that follows stops the router, and an answer that comes after that is lost, so
     * its client would wait for the node's removal to send the batch again.
     */
    public record Leaving(ActorRef<Done> replyTo) implements Command, NoSerializationVerificationNeeded {
    }

    /** The wait for the answers of forwarded batches is over. */
    private enum LeftWaiting implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /** How long a leaving router waits for the answers of the batches it forwarded before it acknowledges. */
    static final Duration ANSWERS_WAIT = Duration.ofMillis(1500);

    private record Origin(ActorRef<Ops.ResultsBundle> client, long batch, long sentNanos) {
    }

    private final ActorRef<Partition.Command> region;
    private final ActorRef<Ops.Results> answers;
    private final Map<Long, Origin> origins = new LinkedHashMap<>();
    private final Map<ActorRef<Ops.ResultsBundle>, Outgoing> outgoing = new HashMap<>();
    private long nextId = 1;
    private boolean flushing;
    private boolean leaving;
    /** Who waits for the leave's acknowledgement until the forwarded batches are answered; null: nobody. */
    private ActorRef<Done> leaveAcknowledgement;
    private long bundles;
    private long batches;

    /** Answers gathered for one client, and about how many bytes they take on the wire. */
    private static final class Outgoing {
        final List<Ops.Results> answers = new ArrayList<>();
        int bytes;
    }

    private PartitionRouter(ActorContext<Command> context, ActorRef<Partition.Command> region) {
        super(context);
        this.region = region;
        this.answers = context.messageAdapter(Ops.Results.class, Answered::new);
    }

    /** A router over this node's sharding {@code region}, registered under {@link #KEY}. */
    public static Behavior<Command> create(ActorRef<Partition.Command> region) {
        return Behaviors.setup(context -> {
            context.setLoggerName(PartitionRouter.class); // as ReplicaCoordinator's: not from the stack of its first use
            context.getSystem().receptionist().tell(Receptionist.register(KEY, context.getSelf()));
            return new PartitionRouter(context, region);
        });
    }

    @Override
    public Receive<Command> createReceive() {
        return newReceiveBuilder()
                .onMessage(Bundle.class, this::onBundle)
                .onMessage(Answered.class, answered -> onAnswered(answered.results()))
                .onMessage(Flush.class, flush -> onFlush())
                .onMessage(Leaving.class, this::onLeaving)
                .onMessageEquals(LeftWaiting.INSTANCE, this::acknowledgeLeave)
                .onMessage(GetStats.class, get -> {
                    get.replyTo().tell(new Stats(bundles, batches));
                    return this;
                })
                .build();
    }

    private Behavior<Command> onBundle(Bundle bundle) {
        if (bundle.replyTo() == null || bundle.batches() == null) {
            getContext().getLog().warn("a bundle without {} was dropped", bundle.replyTo() == null ? "a reply address" : "batches");
            return this;
        }
        bundles++;
        if (leaving) {
            refuse(bundle);
            return this;
        }
        long now = System.nanoTime();
        forgetOld(now);
        for (Routed routed : bundle.batches()) {
            long id = nextId++;
            origins.put(id, new Origin(bundle.replyTo(), routed.batch(), now));
            HopTrace.stamp(routed.trace(), HopTrace.ROUTER);
            region.tell(new Partition.Execute(routed.partition(), id, bundle.client(), routed.batch(), routed.epoch(), routed.follows(),
                    routed.ops(), answers, routed.trace()));
            batches++;
        }
        return this;
    }

    private Behavior<Command> onLeaving(Leaving leaving) {
        if (!this.leaving) {
            this.leaving = true;
            getContext().getSystem().receptionist().tell(Receptionist.deregister(KEY, getContext().getSelf()));
            getContext().getLog().info("leaving: batches that still come here are answered NOT_HELD, and their clients send"
                    + " them again through sharding, to where each partition is now; waiting for the answers of {} forwarded"
                    + " batches", origins.size());
        }
        if (origins.isEmpty()) {
            leaving.replyTo().tell(Done.getInstance());
        } else {
            if (leaveAcknowledgement != null) {
                leaveAcknowledgement.tell(Done.getInstance());
            }
            leaveAcknowledgement = leaving.replyTo();
            getContext().scheduleOnce(ANSWERS_WAIT, getContext().getSelf(), LeftWaiting.INSTANCE);
        }
        return this;
    }

    private Behavior<Command> acknowledgeLeave() {
        if (leaveAcknowledgement != null) {
            if (!origins.isEmpty()) {
                getContext().getLog().info("leaving: {} forwarded batches still unanswered after {} ms; their clients send them"
                        + " again when this node is removed", origins.size(), ANSWERS_WAIT.toMillis());
            }
            leaveAcknowledgement.tell(Done.getInstance());
            leaveAcknowledgement = null;
        }
        return this;
    }

    /**
     * Answers every batch of {@code bundle} NOT_HELD: nothing of it was applied. As few messages as fit
     * {@link #MAX_BUNDLE_BYTES} each: every result carries the refusal's text, and a bundle of many full batches refused in
     * one message would pass Artery's frame, which drops it (its operations would wait for the client's batch timeout).
     */
    private void refuse(Bundle bundle) {
        Ops.Result notHeld = Ops.Result.error(Ops.NOT_HELD, "compute node " + host() + " is leaving the cluster; nothing of the"
                + " batch was applied");
        List<Ops.Results> answers = new ArrayList<>();
        int bytes = 0;
        for (Routed routed : bundle.batches()) {
            List<Ops.Result> results = java.util.Collections.nCopies(routed.ops() == null ? 0 : routed.ops().size(), notHeld);
            Ops.Results answer = new Ops.Results(routed.batch(), results, null); // no host: not asked of any partition
            int size = sizeOf(answer);
            if (!answers.isEmpty() && bytes + size > MAX_BUNDLE_BYTES) {
                bundle.replyTo().tell(new Ops.ResultsBundle(answers));
                answers = new ArrayList<>();
                bytes = 0;
            }
            answers.add(answer);
            bytes += size;
            batches++;
        }
        if (!answers.isEmpty()) {
            bundle.replyTo().tell(new Ops.ResultsBundle(answers));
        }
    }

    private String host() {
        return getContext().getSystem().address().toString();
    }

    /**
     * Tells {@code router} that its node leaves, and waits (up to 2 s) for its acknowledgement: batches that reach the
     * router after that are answered at once, not forwarded to a region that is handing its partitions off and then
     * stops. The compute node's {@link LeaveDrain#onShutdown} task calls it in the node's coordinated shutdown, once the node's partitions
     * have been handed over (or the drain was skipped), before sharding's own shutdown of the region.
     */
    public static CompletionStage<Done> leave(org.apache.pekko.actor.typed.ActorSystem<?> system, ActorRef<Command> router) {
        return AskPattern.<Command, Done>ask(router, Leaving::new, Duration.ofSeconds(2), system.scheduler())
                .exceptionally(failure -> Done.getInstance());
    }

    private Behavior<Command> onAnswered(Ops.Results results) {
        Origin origin = origins.remove(results.batch());
        if (origin == null) {
            return this; // forgotten: the client has timed it out long ago
        }
        if (leaveAcknowledgement != null && origins.isEmpty()) {
            getContext().getSelf().tell(LeftWaiting.INSTANCE); // after this answer's flush
        }
        Outgoing out = outgoing.computeIfAbsent(origin.client(), client -> new Outgoing());
        int size = sizeOf(results);
        if (!out.answers.isEmpty() && out.bytes + size > MAX_BUNDLE_BYTES) {
            send(origin.client(), out);
        }
        out.answers.add(new Ops.Results(origin.batch(), results.results(), results.host(), results.epoch(), results.trace()));
        out.bytes += size;
        if (!flushing) {
            flushing = true;
            getContext().getSelf().tell(Flush.INSTANCE);
        }
        return this;
    }

    private Behavior<Command> onFlush() {
        flushing = false;
        outgoing.forEach(this::send);
        outgoing.clear();
        return this;
    }

    private void send(ActorRef<Ops.ResultsBundle> client, Outgoing out) {
        if (!out.answers.isEmpty()) {
            for (Ops.Results answer : out.answers) {
                HopTrace.stamp(answer.trace(), HopTrace.ROUTER_OUT);
            }
            client.tell(new Ops.ResultsBundle(out.answers));
            out.answers.clear();
            out.bytes = 0;
        }
    }

    /** Entries are in the order they were made: the oldest first. */
    private void forgetOld(long now) {
        long limit = FORGET_AFTER.toNanos();
        for (Iterator<Origin> it = origins.values().iterator(); it.hasNext(); ) {
            if (now - it.next().sentNanos() <= limit) {
                return;
            }
            it.remove();
        }
    }

    /** An upper bound of the bytes {@code results} takes in a {@link Ops.ResultsBundle} ({@link BatchSerializer}). */
    static int sizeOf(Ops.Results results) {
        long size = 40 + (results.host() == null ? 0 : 3L * results.host().length())
                + (results.trace() == null ? 0 : 8L * HopTrace.STAMPS);
        for (Ops.Result r : results.results()) {
            size += 10 + 16L * r.keys().length + 12;
            if (r.error() != null) {
                size += 8 + 3L * Math.min(r.error().length(), WireLimits.MAX_STRING / 4 + 3);
            }
        }
        return (int) Math.min(Integer.MAX_VALUE, size);
    }
}
