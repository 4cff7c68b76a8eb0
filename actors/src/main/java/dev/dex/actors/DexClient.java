package dev.dex.actors;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.StashBuffer;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;

/**
 * The client actor: users send it gets, puts, deletes and scans (directly or through {@link DexClientApi}).
 * It learns the partition table from a compute node, reaches partitions through a sharding proxy with the
 * same range extractor, and batches: each partition has at most one batch in flight, and operations that
 * arrive meanwhile go into its next batch (up to {@link Ops#MAX_BATCH}). A scan that spans partitions is
 * split into one scan per partition, in key order, and the parts are concatenated.
 *
 * <p>Retries: an operation answered {@link Ops#NOT_HELD} (its partition is moving), or whose batch got no
 * answer within the ask timeout, is sent again after {@link #RETRY_DELAY}, up to {@link #MAX_ATTEMPTS}
 * times. A re-sent write may apply twice, which is harmless for puts and deletes and may turn a first
 * insert's {@code true} into {@code false}.
 *
 * <p>A crashed compute node: a batch sent to it is lost, and its answer would only be given up after the ask
 * timeout. Every answer names the node that gave it ({@link Ops.Results#host()}), so when that node is removed
 * from the cluster (it was downed), the batch in flight to its partition is sent again
 * {@link #REMOVAL_RESEND_DELAY} later; sharding holds it until the partition starts on a survivor. A later
 * answer to the first attempt is ignored.
 */
public final class DexClient {
    /** The most entries one {@link Scan} may ask for; the client splits it into scans of {@link Ops#MAX_SCAN}. */
    public static final int MAX_SCAN_CALL = Ops.MAX_SCAN * 16;
    static final Duration RETRY_DELAY = Duration.ofMillis(100);
    static final int MAX_ATTEMPTS = 300;
    /**
     * How long after a compute node's removal its partitions' batches are sent again: the sharding proxy learns of
     * the removal on its own, a little later than this actor; a batch sent before would still be routed to the
     * removed node (and wait for the ask timeout).
     */
    static final Duration REMOVAL_RESEND_DELAY = Duration.ofMillis(500);

    /** Messages of the client actor. */
    public interface Command extends CborSerializable {
    }

    public record Get(long key, ActorRef<Reply> replyTo) implements Command {
    }

    /** Inserts or replaces; the reply's {@code found} says whether the key existed. */
    public record Put(long key, long value, ActorRef<Reply> replyTo) implements Command {
    }

    /** Removes; the reply's {@code found} says whether the key existed. */
    public record Delete(long key, ActorRef<Reply> replyTo) implements Command {
    }

    /** Up to {@code count} entries with keys {@code >= start}, ascending, across partitions. */
    public record Scan(long start, int count, ActorRef<ScanReply> replyTo) implements Command {
    }

    /** {@code error} is null on success. */
    public record Reply(boolean found, long value, String error) implements CborSerializable {
    }

    public record ScanReply(long[] keys, long[] values, String error) implements CborSerializable {
    }

    private record Table(ComputeNode.PartitionTableReply reply, Throwable failure)
            implements Command, NoSerializationVerificationNeeded {
    }

    private record ComputeNodes(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    private record BatchDone(Flight flight, Ops.Results results, Throwable failure)
            implements Command, NoSerializationVerificationNeeded {
    }

    private record MemberRemoved(ClusterEvent.MemberRemoved event) implements Command, NoSerializationVerificationNeeded {
    }

    private record ResendFlight(Flight flight) implements Command, NoSerializationVerificationNeeded {
    }

    /**
     * One attempt at a partition's batch, told apart from a later attempt at the same batch by identity (not a
     * record: the attempts are equal by value); a newer attempt for the same partition makes this one's answer moot.
     */
    private static final class Flight {
        final int partition;
        final List<Pending> batch;
        final List<Ops.Op> ops;

        Flight(int partition, List<Pending> batch, List<Ops.Op> ops) {
            this.partition = partition;
            this.batch = batch;
            this.ops = ops;
        }

        /** The next attempt at the same batch. */
        Flight again() {
            for (Pending pending : batch) {
                pending.attempts++;
            }
            return new Flight(partition, batch, ops);
        }
    }

    private record Resend(Pending pending) implements Command, NoSerializationVerificationNeeded {
    }

    /** One operation waiting for its partition; a scan in progress carries its accumulated entries. */
    private static final class Pending {
        final Ops.Op op;
        final ActorRef<Reply> reply;
        final ScanProgress scan;
        int attempts;

        Pending(Ops.Op op, ActorRef<Reply> reply, ScanProgress scan) {
            this.op = op;
            this.reply = reply;
            this.scan = scan;
        }
    }

    private static final class ScanProgress {
        final ActorRef<ScanReply> replyTo;
        final int wanted;
        long[] keys = new long[0];
        long[] values = new long[0];

        ScanProgress(ActorRef<ScanReply> replyTo, int wanted) {
            this.replyTo = replyTo;
            this.wanted = wanted;
        }
    }

    private final ActorContext<Command> context;
    private final TimerScheduler<Command> timers;
    private final Duration askTimeout;
    private PartitionTable table;
    private ActorRef<Partition.Command> region;
    private final Map<Integer, ArrayDeque<Pending>> queues = new HashMap<>();
    /** The attempt in flight per partition, if any. */
    private final Map<Integer, Flight> inFlight = new HashMap<>();
    /** The address of the compute node that last answered for each partition. */
    private final Map<Integer, String> servedBy = new HashMap<>();

    private DexClient(ActorContext<Command> context, TimerScheduler<Command> timers, Duration askTimeout) {
        this.context = context;
        this.timers = timers;
        this.askTimeout = askTimeout;
    }

    /** A client that waits for a compute node, then serves; requests that come before are stashed. */
    public static Behavior<Command> create(Duration askTimeout) {
        return Behaviors.withStash(100_000, stash -> Behaviors.setup(context -> Behaviors.withTimers(timers -> {
            ActorRef<Receptionist.Listing> listings = context.messageAdapter(Receptionist.Listing.class, ComputeNodes::new);
            context.getSystem().receptionist().tell(Receptionist.subscribe(ComputeNode.KEY, listings));
            Cluster.get(context.getSystem()).subscriptions().tell(Subscribe.create(
                    context.messageAdapter(ClusterEvent.MemberRemoved.class, MemberRemoved::new), ClusterEvent.MemberRemoved.class));
            return new DexClient(context, timers, askTimeout).starting(stash);
        })));
    }

    private Behavior<Command> starting(StashBuffer<Command> stash) {
        return Behaviors.receive(Command.class)
                .onMessage(ComputeNodes.class, nodes -> {
                    nodes.listing().getServiceInstances(ComputeNode.KEY).stream().findAny().ifPresent(node ->
                            context.ask(ComputeNode.PartitionTableReply.class, node, Duration.ofSeconds(5),
                                    ComputeNode.GetPartitionTable::new, Table::new));
                    return Behaviors.same();
                })
                .onMessage(Table.class, reply -> {
                    if (reply.failure() != null) {
                        return Behaviors.same();
                    }
                    table = PartitionTable.ofUpperBounds(reply.reply().upperBounds());
                    region = ClusterSharding.get(context.getSystem()).init(
                            Entity.of(Partition.TYPE_KEY, entity -> Behaviors.<Partition.Command>empty())
                                    .withMessageExtractor(new Partition.RangeExtractor(table))
                                    .withStopMessage(Partition.Handoff.INSTANCE)
                                    .withRole("compute"));
                    return stash.unstashAll(serving());
                })
                .onAnyMessage(message -> {
                    if (stash.isFull()) {
                        failFast(message, "the client is still starting and its buffer is full");
                    } else {
                        stash.stash(message);
                    }
                    return Behaviors.same();
                })
                .build();
    }

    private Behavior<Command> serving() {
        return Behaviors.receive(Command.class)
                .onMessage(Get.class, get -> enqueue(new Pending(new Ops.Op(Ops.GET, get.key(), 0, 0), get.replyTo(), null)))
                .onMessage(Put.class, put -> enqueue(new Pending(new Ops.Op(Ops.PUT, put.key(), put.value(), 0), put.replyTo(), null)))
                .onMessage(Delete.class, del -> enqueue(new Pending(new Ops.Op(Ops.DELETE, del.key(), 0, 0), del.replyTo(), null)))
                .onMessage(Scan.class, this::onScan)
                .onMessage(BatchDone.class, this::onBatchDone)
                .onMessage(Resend.class, resend -> enqueue(resend.pending()))
                .onMessage(MemberRemoved.class, this::onMemberRemoved)
                .onMessage(ResendFlight.class, this::onResendFlight)
                .onMessage(ComputeNodes.class, nodes -> Behaviors.same())
                .onMessage(Table.class, t -> Behaviors.same())
                .build();
    }

    private Behavior<Command> onScan(Scan scan) {
        if (scan.count() < 1 || scan.count() > MAX_SCAN_CALL) {
            scan.replyTo().tell(new ScanReply(new long[0], new long[0],
                    "scan count " + scan.count() + " outside [1, " + MAX_SCAN_CALL + "]"));
            return Behaviors.same();
        }
        long start = Math.max(scan.start(), Long.MIN_VALUE + 1);
        ScanProgress progress = new ScanProgress(scan.replyTo(), scan.count());
        return enqueue(new Pending(new Ops.Op(Ops.SCAN, start, 0, Math.min(scan.count(), Ops.MAX_SCAN)), null, progress));
    }

    private Behavior<Command> enqueue(Pending pending) {
        if (pending.op.key() == NodeHeaderDescriptor.NEG_INFINITY) {
            answer(pending, Ops.Result.error(Ops.BAD_INPUT, NodeHeaderDescriptor.RESERVED_KEY));
            return Behaviors.same();
        }
        int partition = table.partitionOf(pending.op.key());
        queues.computeIfAbsent(partition, p -> new ArrayDeque<>()).add(pending);
        sendNext(partition);
        return Behaviors.same();
    }

    private void sendNext(int partition) {
        ArrayDeque<Pending> queue = queues.get(partition);
        if (queue == null || queue.isEmpty() || inFlight.containsKey(partition)) {
            return;
        }
        List<Pending> batch = new ArrayList<>();
        List<Ops.Op> ops = new ArrayList<>();
        while (!queue.isEmpty() && batch.size() < Ops.MAX_BATCH) {
            Pending next = queue.poll();
            batch.add(next);
            ops.add(next.op);
        }
        send(new Flight(partition, batch, ops));
    }

    private void send(Flight flight) {
        inFlight.put(flight.partition, flight);
        long routingKey = flight.ops.get(0).key();
        context.ask(Ops.Results.class, region, askTimeout, replyTo -> new Partition.Execute(routingKey, flight.ops, replyTo),
                (results, failure) -> new BatchDone(flight, results, failure));
    }

    /**
     * A removed node answers nothing more: the batch in flight to each partition it served goes again shortly
     * ({@link #REMOVAL_RESEND_DELAY}, a new attempt), rather than after the ask timeout.
     */
    private Behavior<Command> onMemberRemoved(MemberRemoved removed) {
        String address = removed.event().member().address().toString();
        for (Flight flight : inFlight.values()) {
            if (address.equals(servedBy.get(flight.partition))) {
                timers.startSingleTimer(flight, new ResendFlight(flight), REMOVAL_RESEND_DELAY);
            }
        }
        servedBy.values().removeIf(address::equals);
        return Behaviors.same();
    }

    /** The removed node's attempt, if still unanswered, is replaced by a new one. */
    private Behavior<Command> onResendFlight(ResendFlight resend) {
        Flight flight = resend.flight();
        if (inFlight.get(flight.partition) == flight) {
            send(flight.again());
        }
        return Behaviors.same();
    }

    private Behavior<Command> onBatchDone(BatchDone done) {
        Flight flight = done.flight();
        if (inFlight.get(flight.partition) != flight) {
            return Behaviors.same(); // an earlier attempt, sent again since
        }
        inFlight.remove(flight.partition);
        if (done.results() != null && done.results().host() != null) {
            servedBy.put(flight.partition, done.results().host());
        }
        if (done.failure() != null || done.results().results().size() != flight.batch.size()) {
            Ops.Result single = done.failure() == null && done.results().results().size() == 1 ? done.results().results().get(0) : null;
            for (Pending pending : flight.batch) {
                if (single != null && single.status() != Ops.NOT_HELD) {
                    answer(pending, single);
                } else {
                    retry(pending, done.failure() != null ? "no answer from partition " + flight.partition + ": " + done.failure()
                            : "partition " + flight.partition + " answered a malformed batch");
                }
            }
        } else {
            for (int i = 0; i < flight.batch.size(); i++) {
                Pending pending = flight.batch.get(i);
                Ops.Result result = done.results().results().get(i);
                if (result.status() == Ops.NOT_HELD) {
                    retry(pending, result.error());
                } else {
                    answer(pending, result);
                }
            }
        }
        sendNext(flight.partition);
        return Behaviors.same();
    }

    private void retry(Pending pending, String why) {
        if (++pending.attempts >= MAX_ATTEMPTS) {
            answer(pending, Ops.Result.error(Ops.FAILED, "gave up after " + pending.attempts + " attempts: " + why));
            return;
        }
        timers.startSingleTimer(pending, new Resend(pending), RETRY_DELAY);
    }

    private void answer(Pending pending, Ops.Result result) {
        if (pending.scan == null) {
            pending.reply.tell(new Reply(result.found(), result.value(), result.status() == Ops.OK ? null : result.error()));
            return;
        }
        ScanProgress progress = pending.scan;
        if (result.status() != Ops.OK) {
            progress.replyTo.tell(new ScanReply(progress.keys, progress.values, result.error()));
            return;
        }
        int have = progress.keys.length;
        int take = Math.min(result.keys().length, progress.wanted - have);
        progress.keys = Arrays.copyOf(progress.keys, have + take);
        progress.values = Arrays.copyOf(progress.values, have + take);
        System.arraycopy(result.keys(), 0, progress.keys, have, take);
        System.arraycopy(result.values(), 0, progress.values, have, take);
        int missing = progress.wanted - progress.keys.length;
        if (missing > 0 && result.next() != Long.MIN_VALUE) {
            enqueue(new Pending(new Ops.Op(Ops.SCAN, result.next(), 0, Math.min(missing, Ops.MAX_SCAN)), null, progress));
        } else {
            progress.replyTo.tell(new ScanReply(progress.keys, progress.values, null));
        }
    }

    private void failFast(Command message, String why) {
        if (message instanceof Get get) {
            get.replyTo().tell(new Reply(false, 0, why));
        } else if (message instanceof Put put) {
            put.replyTo().tell(new Reply(false, 0, why));
        } else if (message instanceof Delete del) {
            del.replyTo().tell(new Reply(false, 0, why));
        } else if (message instanceof Scan scan) {
            scan.replyTo().tell(new ScanReply(new long[0], new long[0], why));
        }
    }
}
