package dev.dex.actors.client;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
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

import dev.dex.actors.CborSerializable;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.partition.HopTrace;
import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;
import dev.dex.actors.partition.PartitionRouter;
import dev.dex.core.partition.PartitionTable;

/**
 * The client actor: users send it gets, puts, deletes and scans (directly or through {@link DexClientApi}).
 * It learns the partition table from a compute node, reaches partitions through a sharding proxy with the
 * same range extractor, and batches: each partition has up to {@code window} batches in flight; an operation
 * goes out at once when the partition has none in flight, a further batch only once {@link #PIPELINED_BATCH}
 * operations wait, and a batch holds up to {@link Ops#MAX_BATCH} operations and {@link Ops#MAX_SCAN} scan
 * entries. Every
 * batch carries an id, and every partition answers to one stable reply adapter, which matches the answer to
 * its batch by that id (no temporary actor per batch). A scan that spans partitions is split into one scan per
 * partition, in key order, and the parts are concatenated.
 *
 * <p>Order: operations on one partition are applied in the order this actor received them, retries included (a
 * long scan's later parts excepted: each goes when the previous part is answered, behind what arrived
 * meanwhile). A partition runs a client's batches one after another in the order they arrive, and takes a batch
 * only if it took the one this client sent just before it while that one was in flight
 * ({@link Partition.Execute#follows()}; else {@link Ops#STALE}): a batch in flight behind one that was refused or
 * lost cannot overtake it. And an operation to send again holds its partition ({@link PartitionLanes}): nothing more goes
 * to it until its batches in flight have landed, then the held operations go first, in their batches' order.
 *
 * <p>Retries: an operation answered {@link Ops#NOT_HELD} (its partition is moving) or {@link Ops#OVERLOADED}, or
 * whose batch got no answer within the ask timeout, goes again after {@link #RETRY_DELAY}, one answered
 * {@link Ops#STALE} at once; each up to {@link #MAX_ATTEMPTS} times. A batch unanswered while batches sent behind
 * it are in flight is overdue: its answer, which comes before theirs, is still taken until they land. A write
 * sent again may apply twice if its first attempt did arrive (harmless for puts and deletes; it may turn a first
 * insert's {@code true} into {@code false}), but never after a later operation of this client: a late first
 * attempt is refused too, since every batch names this client (a random id), its own id as the order, and the
 * partition's owner epoch last learnt from an answer, and the partition refuses a batch of writes sent for
 * another epoch, or arriving after a later batch of the client was taken (docs/cluster.md "Late attempts"). A
 * batch shown taken by a later batch taken behind it, but never answered (its answer was lost), is not sent
 * again: its operations fail with an error saying so. When the actor stops, every operation it holds is answered
 * with an error, and the Java APIs that used it fail their later operations at once.
 *
 * <p>A crashed compute node: a batch sent to it is lost, and its answer would only be given up after the ask
 * timeout. Every answer names the node that gave it ({@link Ops.Results#host()}), so when that node is removed
 * from the cluster (it was downed), the partitions it served are held, and {@link #REMOVAL_RESEND_DELAY} later
 * their batches in flight land and go again first, in their original order; sharding holds them until the
 * partition starts on a survivor. A later answer to a first attempt is ignored.
 *
 * <p>Parts: this class is the actor (its messages, its start, the Java APIs' queues and the completion of their
 * futures); what it keeps per partition, the batching, order and retries above, is {@link PartitionLanes}; a scan
 * across partitions is assembled by {@link ScanProgress}; and {@link Submissions} is where a {@link DexClientApi}
 * hands it operations.
 */
public final class DexClient {
    /** The most entries one {@link Scan} may ask for; the client splits it into scans of {@link Ops#MAX_SCAN}. */
    public static final int MAX_SCAN_CALL = Ops.MAX_SCAN * 16;
    static final Duration RETRY_DELAY = Duration.ofMillis(100);
    /**
     * Batches per partition a client keeps in flight unless told otherwise: {@code dex.client.window} of the actors
     * module's reference.conf, its one home.
     */
    public static final int DEFAULT_WINDOW = com.typesafe.config.ConfigFactory.defaultReferenceUnresolved().getInt("dex.client.window");
    public static final int MAX_WINDOW = 64;
    /**
     * While a partition has a batch in flight, another goes out only once it holds this many operations: each
     * message costs the cluster far more than an operation, so under load a few large batches beat many small
     * ones, and the first batch of an idle partition still goes at once.
     */
    static final int PIPELINED_BATCH = 64;
    /** Operations one drain takes from a Java API's queue before the actor handles other messages. */
    static final int MAX_DRAIN = 4096;
    /**
     * Most operations of one {@link PartitionRouter.Bundle} of 8-byte keys (25 bytes each on the wire: about 100 KiB); a bundle
     * of wider keys holds as many bytes, so fewer operations.
     */
    static final int BUNDLE_OPS = 4096;
    static final String STOPPED = "the client actor stopped (its actor system terminated)";
    static final int MAX_ATTEMPTS = 300;
    /**
     * How long after a compute node's removal its partitions' batches are sent again: the sharding proxy learns of
     * the removal on its own, a little later than this actor; a batch sent before would still be routed to the
     * removed node (and wait for the ask timeout).
     */
    static final Duration REMOVAL_RESEND_DELAY = Duration.ofMillis(500);

    /**
     * Messages of the client actor. Only the messages that may come from another process are serializable
     * ({@link CborSerializable}, or a binding of their own to {@link dev.dex.actors.partition.BatchSerializer});
     * the actor's internal messages are not, so no other process can forge them (a forged completion could, say,
     * drive a count of work in flight negative).
     *
     * <p>Sealed, so that the list below is the actor's whole protocol: no class elsewhere can become one of its
     * messages.
     */
    public sealed interface Command permits Get, Put, Delete, Scan, Table, ComputeNodes, BatchAnswered, BundleAnswered, Routers,
            FlightTimedOut, MemberRemoved, ResendPartition, ResumePartition, AskTable, Drain {
    }

    public record Get(long key, ActorRef<Reply> replyTo) implements Command, CborSerializable {
    }

    /** Inserts or replaces; the reply's {@code found} says whether the key existed. */
    public record Put(long key, long value, ActorRef<Reply> replyTo) implements Command, CborSerializable {
    }

    /** Removes; the reply's {@code found} says whether the key existed. */
    public record Delete(long key, ActorRef<Reply> replyTo) implements Command, CborSerializable {
    }

    /** Up to {@code count} entries with keys {@code >= start}, ascending, across partitions. */
    public record Scan(long start, int count, ActorRef<ScanReply> replyTo) implements Command, CborSerializable {
    }

    /** {@code error} is null on success. */
    public record Reply(boolean found, long value, String error) implements CborSerializable {
    }

    public record ScanReply(long[] keys, long[] values, String error, int keyWords) implements CborSerializable {
        /** A reply of 8-byte keys. */
        public ScanReply(long[] keys, long[] values, String error) {
            this(keys, values, error, 1);
        }

    }

    private record Table(ComputeNode.PartitionTableReply reply, Throwable failure)
            implements Command, NoSerializationVerificationNeeded {
    }

    private record ComputeNodes(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    /** A partition's answer, through the client's one reply adapter. */
    private record BatchAnswered(Ops.Results results) implements Command, NoSerializationVerificationNeeded {
    }

    private record BundleAnswered(Ops.ResultsBundle bundle) implements Command, NoSerializationVerificationNeeded {
    }

    private record Routers(Receptionist.Listing listing) implements Command, NoSerializationVerificationNeeded {
    }

    /** A batch got no answer within the ask timeout. */
    record FlightTimedOut(PartitionLanes.Flight flight) implements Command, NoSerializationVerificationNeeded {
    }

    private record MemberRemoved(ClusterEvent.MemberRemoved event) implements Command, NoSerializationVerificationNeeded {
    }

    /** The pause after a compute node's removal is over: the batches in flight to the partition go again. */
    record ResendPartition(int partition) implements Command, NoSerializationVerificationNeeded {
    }

    /** A partition whose held operations may go now, if its batches in flight have landed. */
    record ResumePartition(int partition) implements Command, NoSerializationVerificationNeeded {
    }

    private enum AskTable implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /** Operations of a {@link DexClientApi} are waiting in {@code submissions}. */
    record Drain(Submissions submissions) implements Command, NoSerializationVerificationNeeded {
    }

    private final ActorContext<Command> context;
    private final TimerScheduler<Command> timers;
    private final Duration askTimeout;
    private final int window;
    /** Where every partition answers: one stable reference, so Artery compresses it and resolves it once. */
    private final ActorRef<Ops.Results> replies;
    /** Where every compute node's router answers, likewise. */
    private final ActorRef<Ops.ResultsBundle> bundleReplies;
    /** Each partition's operations, batches and retries; made once the partition table is known. */
    private PartitionLanes lanes;
    /** The Java APIs that have submitted to this actor: told when it stops. */
    private final java.util.Set<Submissions> apis = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    /** The compute nodes last listed, asked for the partition table while starting. */
    private java.util.Set<ActorRef<ComputeNode.Command>> computeNodes = java.util.Set.of();
    /** A newer table was asked for and not answered yet. */
    private boolean tableAsked;
    /** Asks for a newer table since the last one adopted: the first goes to the node that answered MOVED. */
    private int tableAsks;

    private DexClient(ActorContext<Command> context, TimerScheduler<Command> timers, Duration askTimeout, int window) {
        this.context = context;
        this.timers = timers;
        this.askTimeout = askTimeout;
        this.window = window;
        this.replies = context.messageAdapter(Ops.Results.class, BatchAnswered::new);
        this.bundleReplies = context.messageAdapter(Ops.ResultsBundle.class, BundleAnswered::new);
    }

    /** A client with the default window ({@link #DEFAULT_WINDOW} batches per partition in flight). */
    public static Behavior<Command> create(Duration askTimeout) {
        return create(askTimeout, DEFAULT_WINDOW);
    }

    /**
     * A client that waits for a compute node, then serves; requests that come before are stashed.
     *
     * @param askTimeout how long a batch may go unanswered before it is sent again
     * @param window     batches per partition in flight at once, 1..{@link #MAX_WINDOW}
     */
    public static Behavior<Command> create(Duration askTimeout, int window) {
        if (window < 1 || window > MAX_WINDOW) {
            throw new IllegalArgumentException("the client's window must be in [1, " + MAX_WINDOW + "]: " + window);
        }
        return Behaviors.withStash(100_000, stash -> Behaviors.setup(context -> Behaviors.withTimers(timers -> {
            // One adapter per message class (a second replaces the first): it tells the two listings apart.
            ActorRef<Receptionist.Listing> listings = context.messageAdapter(Receptionist.Listing.class,
                    listing -> listing.isForKey(PartitionRouter.KEY) ? new Routers(listing) : new ComputeNodes(listing));
            context.getSystem().receptionist().tell(Receptionist.subscribe(ComputeNode.KEY, listings));
            context.getSystem().receptionist().tell(Receptionist.subscribe(PartitionRouter.KEY, listings));
            Cluster.get(context.getSystem()).subscriptions().tell(Subscribe.create(
                    context.messageAdapter(ClusterEvent.MemberRemoved.class, MemberRemoved::new), ClusterEvent.MemberRemoved.class));
            return new DexClient(context, timers, askTimeout, window).starting(stash);
        })));
    }

    private Behavior<Command> starting(StashBuffer<Command> stash) {
        return Behaviors.receive(Command.class)
                .onMessage(ComputeNodes.class, nodes -> {
                    computeNodes = nodes.listing().getServiceInstances(ComputeNode.KEY);
                    askTable();
                    return Behaviors.same();
                })
                .onMessage(AskTable.class, again -> {
                    askTable();
                    return Behaviors.same();
                })
                .onMessage(Table.class, reply -> {
                    if (reply.failure() != null) {
                        // The node may have left, or was too busy: ask again (any node listed then) in a second.
                        timers.startSingleTimer(AskTable.INSTANCE, AskTable.INSTANCE, Duration.ofSeconds(1));
                        return Behaviors.same();
                    }
                    PartitionTable table = reply.reply().table();
                    ActorRef<Partition.Command> region = ClusterSharding.get(context.getSystem()).init(
                            Entity.of(Partition.TYPE_KEY, entity -> Behaviors.<Partition.Command>empty())
                                    .withMessageExtractor(new Partition.IdExtractor())
                                    .withStopMessage(Partition.Handoff.INSTANCE)
                                    .withRole("compute"));
                    lanes = new PartitionLanes(timers, askTimeout, window, table, reply.reply().version(), region, replies,
                            bundleReplies);
                    return stash.unstashAll(serving());
                })
                .onAnyMessage(message -> {
                    if (message instanceof Drain drain) {
                        apis.add(drain.submissions());
                    }
                    if (stash.isFull()) {
                        failFast(message, "the client is still starting and its buffer is full");
                    } else {
                        stash.stash(message);
                    }
                    return Behaviors.same();
                })
                .onSignal(PostStop.class, stop -> {
                    stash.forEach(message -> failFast(message, STOPPED));
                    stash.clear();
                    stopApis();
                    return Behaviors.same();
                })
                .build();
    }

    /**
     * Asks for a newer partition table when operations wait for one (they were answered {@link Ops#MOVED}): from the
     * compute node that answered so, which serves it, else from any.
     */
    private void askNewerTable() {
        if (!lanes.wantsTable() || tableAsked) {
            return;
        }
        tableAsked = true;
        // First the node that answered MOVED (it serves the newer table), then the others in turn.
        java.util.List<ActorRef<ComputeNode.Command>> nodes = new java.util.ArrayList<>(computeNodes);
        nodes.sort(java.util.Comparator.comparing(ref -> ref.path().address().toString()));
        ActorRef<ComputeNode.Command> node = tableAsks++ == 0 ? nodes.stream()
                .filter(ref -> ref.path().address().toString().equals(lanes.movedBy())).findAny().orElse(null) : null;
        if (node == null && !nodes.isEmpty()) {
            node = nodes.get(Math.floorMod(tableAsks, nodes.size()));
        }
        if (node == null) {
            timers.startSingleTimer(AskTable.INSTANCE, AskTable.INSTANCE, Duration.ofMillis(100));
            return;
        }
        context.ask(ComputeNode.PartitionTableReply.class, node, Duration.ofSeconds(5), ComputeNode.GetPartitionTable::new, Table::new);
    }

    /** A table asked for by {@link #askNewerTable}: routed by from now on if it is newer; asked again while ops wait. */
    private void onNewerTable(Table reply) {
        tableAsked = false;
        if (reply.failure() == null && lanes.adopt(reply.reply().table(), reply.reply().version())) {
            tableAsks = 0;
        }
        if (lanes.wantsTable()) {
            tableAsked = true; // the node asked had no newer one yet (or did not answer): again shortly
            timers.startSingleTimer(AskTable.INSTANCE, AskTable.INSTANCE, Duration.ofMillis(100));
        }
    }

    private void askTable() {
        computeNodes.stream().findAny().ifPresent(node -> context.ask(ComputeNode.PartitionTableReply.class, node,
                Duration.ofSeconds(5), ComputeNode.GetPartitionTable::new, Table::new));
    }

    /**
     * The actor stopped (its system terminates, or it failed): every operation it holds is answered, and every
     * Java API that used it fails its later operations at once, instead of leaving their futures pending forever.
     */
    private Behavior<Command> onStop(PostStop stop) {
        lanes.stop(STOPPED);
        flushCompletions();
        stopApis();
        return Behaviors.same();
    }

    private void stopApis() {
        for (Submissions submissions : apis) {
            submissions.stop(STOPPED);
        }
    }

    /** Each message is handled, then the futures it completed are handed to their callers' executors in one task each. */
    private Behavior<Command> serving() {
        return Behaviors.receive(Command.class)
                .onAnyMessage(message -> {
                    Behavior<Command> next = handle(message);
                    lanes.flushBundles();
                    flushCompletions();
                    return next;
                })
                .onSignal(PostStop.class, this::onStop)
                .build();
    }

    private Behavior<Command> handle(Command message) {
        if (message instanceof BatchAnswered answered) {
            lanes.onAnswered(answered.results());
            askNewerTable();
            return Behaviors.same();
        } else if (message instanceof BundleAnswered answered) {
            for (Ops.Results results : answered.bundle().answers()) {
                lanes.onAnswered(results);
            }
            askNewerTable();
            return Behaviors.same();
        } else if (message instanceof ComputeNodes nodes) {
            computeNodes = nodes.listing().getServiceInstances(ComputeNode.KEY);
            return Behaviors.same();
        } else if (message instanceof Table reply) {
            onNewerTable(reply);
            return Behaviors.same();
        } else if (message instanceof AskTable) {
            tableAsked = false;
            askNewerTable();
            return Behaviors.same();
        } else if (message instanceof Routers listed) {
            lanes.routersListed(listed.listing());
            return Behaviors.same();
        } else if (message instanceof Drain drain) {
            return onDrain(drain.submissions());
        } else if (message instanceof Get get) {
            return enqueue(new Pending(new Ops.Op(Ops.GET, get.key(), 0, 0), get.replyTo()::tell, null));
        } else if (message instanceof Put put) {
            return enqueue(new Pending(new Ops.Op(Ops.PUT, put.key(), put.value(), 0), put.replyTo()::tell, null));
        } else if (message instanceof Delete del) {
            return enqueue(new Pending(new Ops.Op(Ops.DELETE, del.key(), 0, 0), del.replyTo()::tell, null));
        } else if (message instanceof Scan scan) {
            return onScan(scan.start(), scan.count(), scan.replyTo()::tell, System.nanoTime() + Pending.FOREVER);
        } else if (message instanceof FlightTimedOut timedOut) {
            lanes.onTimedOut(timedOut.flight());
            return Behaviors.same();
        } else if (message instanceof ResumePartition resume) {
            lanes.sendNext(resume.partition());
            return Behaviors.same();
        } else if (message instanceof MemberRemoved removed) {
            lanes.onMemberRemoved(removed.event().member().address().toString());
            return Behaviors.same();
        } else if (message instanceof ResendPartition resend) {
            lanes.onResendPartition(resend.partition());
            return Behaviors.same();
        }
        return Behaviors.same(); // listings and tables after the start
    }

    /**
     * Takes every operation submitted through {@code submissions} (a {@link DexClientApi}): no actor message per
     * operation, one per burst. The doorbell is cleared before the queue is read, so an operation added after the
     * last poll rings it again.
     */
    private Behavior<Command> onDrain(Submissions submissions) {
        apis.add(submissions);
        submissions.doorbell.set(false);
        int taken = 0;
        for (Submissions.Submitted submitted; (submitted = submissions.queue.poll()) != null; ) {
            if (submitted instanceof Submissions.ScanCall scan) {
                CompletableFuture<ScanReply> future = scan.reply();
                Consumer<ScanReply> replyTo = reply -> submissions.answered(() -> future.complete(reply));
                if (scan.op().key().length > 1) {
                    onWideScan(scan.op(), replyTo, scan.deadline());
                } else {
                    onScan(scan.op().first(), scan.op().count(), replyTo, scan.deadline());
                }
            } else {
                Submissions.Call<?> call = (Submissions.Call<?>) submitted;
                HopTrace.stamp(call.trace(), HopTrace.DRAIN);
                Pending pending = new Pending(call.op(), call, null, call.deadline());
                pending.trace = call.trace();
                enqueue(pending);
            }
            if (++taken == MAX_DRAIN) {
                // Let answers and timers in between: the rest waits for the next drain, rung here unless a
                // producer rang since the doorbell was cleared (then its Drain is on its way).
                if (submissions.doorbell.compareAndSet(false, true)) {
                    context.getSelf().tell(new Drain(submissions));
                }
                break;
            }
        }
        return Behaviors.same();
    }

    /** Hands what each Java API's operations were answered while handling a message to that API's executor. */
    private void flushCompletions() {
        for (Submissions submissions : apis) {
            submissions.flushAnswered();
        }
    }

    private Behavior<Command> onScan(long requestedStart, int count, Consumer<ScanReply> replyTo, long deadline) {
        if (count < 1 || count > MAX_SCAN_CALL) {
            replyTo.accept(new ScanReply(new long[0], new long[0], "scan count " + count + " outside [1, " + MAX_SCAN_CALL + "]"));
            return Behaviors.same();
        }
        long start = Math.max(requestedStart, Long.MIN_VALUE + 1);
        ScanProgress progress = new ScanProgress(replyTo, count, deadline);
        return enqueue(new Pending(new Ops.Op(Ops.SCAN, start, 0, Math.min(count, Ops.MAX_SCAN)), null, progress, deadline));
    }

    /** A scan of keys wider than 8 bytes ({@code op.key()} the start's words), from the Java API. */
    private Behavior<Command> onWideScan(Ops.Op op, Consumer<ScanReply> replyTo, long deadline) {
        int words = op.key().length;
        if (op.count() < 1 || op.count() > MAX_SCAN_CALL) {
            replyTo.accept(new ScanReply(new long[0], new long[0], "scan count " + op.count() + " outside [1, " + MAX_SCAN_CALL + "]", words));
            return Behaviors.same();
        }
        ScanProgress progress = new ScanProgress(replyTo, op.count(), deadline, words);
        return enqueue(new Pending(new Ops.Op(Ops.SCAN, op.key(), 0, Math.min(op.count(), Ops.scanLimit(words))), null,
                progress, deadline));
    }

    private Behavior<Command> enqueue(Pending pending) {
        lanes.enqueue(pending);
        return Behaviors.same();
    }


    private void failFast(Command message, String why) {
        if (message instanceof Drain drain) {
            drain.submissions().doorbell.set(false);
            drain.submissions().failWaiting(why);
        } else if (message instanceof Get get) {
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
