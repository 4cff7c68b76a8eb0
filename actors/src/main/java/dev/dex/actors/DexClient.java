package dev.dex.actors;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
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

import dev.dex.core.engine.IndexSession;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeHeaderDescriptor;
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
 * lost cannot overtake it. And an operation to send again holds its partition ({@link Held}): nothing more goes
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
 */
public final class DexClient {
    /** The most entries one {@link Scan} may ask for; the client splits it into scans of {@link Ops#MAX_SCAN}. */
    public static final int MAX_SCAN_CALL = Ops.MAX_SCAN * 16;
    static final Duration RETRY_DELAY = Duration.ofMillis(100);
    /** Batches per partition a client keeps in flight unless told otherwise ({@code dex.client.window}). */
    public static final int DEFAULT_WINDOW = 4;
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
    /** The route of a partition whose batches go through this client's sharding proxy. */
    private static final Object PROXY = "sharding proxy";
    static final String STOPPED = "the client actor stopped (its actor system terminated)";
    /** The deadline of operations sent as actor messages: their askers time out on their own. */
    private static final long FOREVER = Duration.ofDays(365).toNanos();
    static final int MAX_ATTEMPTS = 300;
    /**
     * How long after a compute node's removal its partitions' batches are sent again: the sharding proxy learns of
     * the removal on its own, a little later than this actor; a batch sent before would still be routed to the
     * removed node (and wait for the ask timeout).
     */
    static final Duration REMOVAL_RESEND_DELAY = Duration.ofMillis(500);

    /**
     * Messages of the client actor. Only the messages that may come from another process are serializable
     * ({@link CborSerializable}, or a binding of their own to {@link BatchSerializer}); the actor's internal
     * messages are not, so no other process can forge them (a forged completion could, say, drive a count of
     * work in flight negative).
     */
    public interface Command {
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

    private record FlightTimedOut(Flight flight) implements Command, NoSerializationVerificationNeeded {
    }

    private record MemberRemoved(ClusterEvent.MemberRemoved event) implements Command, NoSerializationVerificationNeeded {
    }

    private record ResendPartition(int partition) implements Command, NoSerializationVerificationNeeded {
    }

    private enum AskTable implements Command, NoSerializationVerificationNeeded {
        INSTANCE
    }

    /** Operations of a {@link DexClientApi} are waiting in {@code submissions}. */
    record Drain(Submissions submissions) implements Command, NoSerializationVerificationNeeded {
    }

    /** One operation of a {@link DexClientApi}: a get, put or delete ({@code reply}), or a scan ({@code scanReply}). */
    record Submitted(Ops.Op op, CompletableFuture<Reply> reply, CompletableFuture<ScanReply> scanReply, long deadline) {
    }

    /**
     * Where a {@link DexClientApi} leaves operations for this actor, in one JVM: a lock-free queue and a doorbell
     * (a flag set by the producer that finds it clear, which then sends one {@link Drain}); the actor completes
     * each operation's future on {@code executor}, the API's, in one task per batch answer.
     *
     * <p>Concurrency: any number of producer threads, one consumer (the actor). A producer adds to the queue,
     * then rings; the actor clears the doorbell before it polls, so an operation is either polled by a drain
     * already running or rings for the next one.
     */
    static final class Submissions {
        final java.util.concurrent.ConcurrentLinkedQueue<Submitted> queue = new java.util.concurrent.ConcurrentLinkedQueue<>();
        final java.util.concurrent.atomic.AtomicBoolean doorbell = new java.util.concurrent.atomic.AtomicBoolean();
        final java.util.concurrent.Executor executor;

        Submissions(java.util.concurrent.Executor executor) {
            this.executor = executor;
        }

        /** Why the client actor stopped, once it has; set before the queue is emptied one last time. */
        private volatile String stopped;

        /** Leaves {@code submitted} for {@code client}, ringing it if nobody has since its last drain. */
        void submit(Submitted submitted, ActorRef<Command> client) {
            queue.add(submitted);
            if (stopped != null) {
                failWaiting(stopped);
            } else if (!doorbell.get() && doorbell.compareAndSet(false, true)) {
                client.tell(new Drain(this));
            }
        }

        /** The client actor stopped: what waits, and everything submitted from now on, fails with {@code why}. */
        void stop(String why) {
            stopped = why;
            failWaiting(stopped);
        }

        /** Every operation waiting in the queue fails with {@code why}. */
        void failWaiting(String why) {
            for (Submitted submitted; (submitted = queue.poll()) != null; ) {
                if (submitted.scanReply() != null) {
                    submitted.scanReply().complete(new ScanReply(new long[0], new long[0], why));
                } else {
                    submitted.reply().complete(new Reply(false, 0, why));
                }
            }
        }
    }

    /**
     * One attempt at a partition's batch, told apart from a later attempt at the same batch by identity (not a
     * record: the attempts are equal by value); a newer attempt for the same partition makes this one's answer moot.
     */
    private static final class Flight {
        final long id;
        final int partition;
        final List<Pending> batch;
        final List<Ops.Op> ops;
        /** Its batch timeout passed while batches sent after it were in flight: its answer is taken until they land. */
        boolean overdue;
        /**
         * A batch sent behind it while it was in flight was taken, which its partition does only after taking the
         * batch it follows ({@link Partition.Execute#follows()}): so this one was taken too.
         */
        boolean followerTaken;

        Flight(long id, int partition, List<Pending> batch, List<Ops.Op> ops) {
            this.id = id;
            this.partition = partition;
            this.batch = batch;
            this.ops = ops;
        }
    }

    /** A partition's batches in flight, in the order they were sent. */
    private static final class Lane {
        final ArrayDeque<Flight> flights = new ArrayDeque<>();
        /** The id of the batch sent last, which the next one follows while any is in flight. */
        long lastSent;
    }

    /** Operations of a partition that go again before anything else goes to it, and from when. */
    private static final class Held {
        /** By the id of the batch that carried them: they go again in that order. */
        final java.util.TreeMap<Long, List<Pending>> batches = new java.util.TreeMap<>();
        /** {@link System#nanoTime()} from which they may go (a pause after NOT_HELD, OVERLOADED, no answer, a removal). */
        long from = System.nanoTime();
    }

    /** A partition whose held operations may go now, if its batches in flight have landed. */
    private record ResumePartition(int partition) implements Command, NoSerializationVerificationNeeded {
    }

    /** One operation waiting for its partition; a scan in progress carries its accumulated entries. */
    private static final class Pending {
        final Ops.Op op;
        final Consumer<Reply> reply;
        final ScanProgress scan;
        /** {@link System#nanoTime()} after which the operation is not tried again; far off for actor messages. */
        final long deadline;
        int attempts;

        Pending(Ops.Op op, Consumer<Reply> reply, ScanProgress scan) {
            this(op, reply, scan, System.nanoTime() + FOREVER);
        }

        Pending(Ops.Op op, Consumer<Reply> reply, ScanProgress scan, long deadline) {
            this.op = op;
            this.reply = reply;
            this.scan = scan;
            this.deadline = deadline;
        }
    }

    private static final class ScanProgress {
        final Consumer<ScanReply> replyTo;
        final int wanted;
        final long deadline;
        /** Words per key; {@link #keys} holds each entry's words in turn. */
        final int words;
        long[] keys = new long[0];
        long[] values = new long[0];

        ScanProgress(Consumer<ScanReply> replyTo, int wanted, long deadline) {
            this(replyTo, wanted, deadline, 1);
        }

        ScanProgress(Consumer<ScanReply> replyTo, int wanted, long deadline, int words) {
            this.deadline = deadline;
            this.replyTo = replyTo;
            this.wanted = wanted;
            this.words = words;
        }
    }

    private final ActorContext<Command> context;
    private final TimerScheduler<Command> timers;
    private final Duration askTimeout;
    private final int window;
    /** Where every partition answers: one stable reference, so Artery compresses it and resolves it once. */
    private final ActorRef<Ops.Results> replies;
    /** Where every compute node's router answers, likewise. */
    private final ActorRef<Ops.ResultsBundle> bundleReplies;
    /** Each compute node's {@link PartitionRouter}, by the node's address (as {@link Ops.Results#host()} names it). */
    private final Map<String, ActorRef<PartitionRouter.Command>> routers = new HashMap<>();
    /** The route each partition's batches took last: a router, or {@link #PROXY}. */
    private final Map<Integer, Object> routes = new HashMap<>();
    /** Batches for each router, sent as one bundle when the message being handled is done. */
    private final Map<ActorRef<PartitionRouter.Command>, List<PartitionRouter.Routed>> bundling = new java.util.LinkedHashMap<>();
    private PartitionTable table;
    private ActorRef<Partition.Command> region;
    private final Map<Integer, ArrayDeque<Pending>> queues = new HashMap<>();
    /** Attempts in flight by batch id. */
    private final Map<Long, Flight> flights = new HashMap<>();
    /** Attempts in flight per partition, at most {@link #window}, in the order they were sent. */
    private final Map<Integer, Lane> lanes = new HashMap<>();
    private long nextBatch = 1;
    /** This client's name in its batches ({@link Partition.Execute#client()}): random, never 0. */
    private final long clientId = java.util.concurrent.ThreadLocalRandom.current().nextLong() | 1;
    /**
     * The epoch each partition's answers last named: {epoch, the id of the batch whose answer named it}. Only
     * an answer to a later batch replaces it, so a slow answer of an earlier owner does not bring it back.
     */
    private final Map<Integer, long[]> epochs = new HashMap<>();
    /**
     * Partitions with operations that go again (refused, or their batch got no answer), by partition. Nothing
     * more goes to such a partition until its batches in flight have all landed and its pause is over; then the
     * held operations go first, in their batches' order (under the epoch the latest answer named).
     */
    private final Map<Integer, Held> held = new HashMap<>();
    /** The address of the compute node that last answered for each partition. */
    private final Map<Integer, String> servedBy = new HashMap<>();
    /** The Java APIs that have submitted to this actor: told when it stops. */
    private final java.util.Set<Submissions> apis = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    /** The compute nodes last listed, asked for the partition table while starting. */
    private java.util.Set<ActorRef<ComputeNode.Command>> computeNodes = java.util.Set.of();
    /** Futures completed by the message being handled, by the API whose executor completes them. */
    private final Map<Submissions, List<Runnable>> completions = new java.util.IdentityHashMap<>();

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
                    table = PartitionTable.ofUpperBounds(reply.reply().upperBounds());
                    region = ClusterSharding.get(context.getSystem()).init(
                            Entity.of(Partition.TYPE_KEY, entity -> Behaviors.<Partition.Command>empty())
                                    .withMessageExtractor(new Partition.RangeExtractor(table))
                                    .withStopMessage(Partition.Handoff.INSTANCE)
                                    .withRole("compute"));
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

    private void askTable() {
        computeNodes.stream().findAny().ifPresent(node -> context.ask(ComputeNode.PartitionTableReply.class, node,
                Duration.ofSeconds(5), ComputeNode.GetPartitionTable::new, Table::new));
    }

    /**
     * The actor stopped (its system terminates, or it failed): every operation it holds is answered, and every
     * Java API that used it fails its later operations at once, instead of leaving their futures pending forever.
     */
    private Behavior<Command> onStop(PostStop stop) {
        List<Pending> all = new ArrayList<>();
        queues.values().forEach(all::addAll);
        queues.clear();
        for (Flight flight : flights.values()) {
            all.addAll(flight.batch);
        }
        flights.clear();
        lanes.clear();
        held.values().forEach(waiting -> waiting.batches.values().forEach(all::addAll)); // their timers die with the actor
        held.clear();
        for (Pending pending : all) {
            answer(pending, Ops.Result.error(Ops.FAILED, STOPPED));
        }
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
                    flushBundles();
                    flushCompletions();
                    return next;
                })
                .onSignal(PostStop.class, this::onStop)
                .build();
    }

    private Behavior<Command> handle(Command message) {
        if (message instanceof BatchAnswered answered) {
            return onAnswered(answered.results());
        } else if (message instanceof BundleAnswered answered) {
            for (Ops.Results results : answered.bundle().answers()) {
                onAnswered(results);
            }
            return Behaviors.same();
        } else if (message instanceof Routers listed) {
            routers.clear();
            for (ActorRef<PartitionRouter.Command> router : listed.listing().getServiceInstances(PartitionRouter.KEY)) {
                routers.put(router.path().address().toString(), router);
            }
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
            return onScan(scan.start(), scan.count(), scan.replyTo()::tell, System.nanoTime() + FOREVER);
        } else if (message instanceof FlightTimedOut timedOut) {
            return onTimedOut(timedOut);
        } else if (message instanceof ResumePartition resume) {
            sendNext(resume.partition());
            return Behaviors.same();
        } else if (message instanceof MemberRemoved removed) {
            return onMemberRemoved(removed);
        } else if (message instanceof ResendPartition resend) {
            return onResendPartition(resend.partition());
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
        for (Submitted submitted; (submitted = submissions.queue.poll()) != null; ) {
            if (submitted.scanReply() != null) {
                CompletableFuture<ScanReply> future = submitted.scanReply();
                Consumer<ScanReply> replyTo = reply -> complete(submissions, future, reply);
                if (submitted.op().rest().length > 0) {
                    onWideScan(submitted.op(), replyTo, submitted.deadline());
                } else {
                    onScan(submitted.op().key(), submitted.op().count(), replyTo, submitted.deadline());
                }
            } else {
                CompletableFuture<Reply> future = submitted.reply();
                enqueue(new Pending(submitted.op(), reply -> complete(submissions, future, reply), null, submitted.deadline()));
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

    private <T> void complete(Submissions submissions, CompletableFuture<T> future, T value) {
        completions.computeIfAbsent(submissions, s -> new ArrayList<>()).add(() -> future.complete(value));
    }

    private void flushCompletions() {
        if (completions.isEmpty()) {
            return;
        }
        for (Map.Entry<Submissions, List<Runnable>> entry : completions.entrySet()) {
            List<Runnable> batch = entry.getValue();
            try {
                entry.getKey().executor.execute(() -> batch.forEach(Runnable::run));
            } catch (java.util.concurrent.RejectedExecutionException closed) {
                batch.forEach(Runnable::run); // the API was closed: complete here rather than never
            }
        }
        completions.clear();
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

    /** A scan of keys wider than 8 bytes ({@code op.rest()} the start's further words), from the Java API. */
    private Behavior<Command> onWideScan(Ops.Op op, Consumer<ScanReply> replyTo, long deadline) {
        int words = 1 + op.rest().length;
        if (op.count() < 1 || op.count() > MAX_SCAN_CALL) {
            replyTo.accept(new ScanReply(new long[0], new long[0], "scan count " + op.count() + " outside [1, " + MAX_SCAN_CALL + "]", words));
            return Behaviors.same();
        }
        ScanProgress progress = new ScanProgress(replyTo, op.count(), deadline, words);
        return enqueue(new Pending(new Ops.Op(Ops.SCAN, op.key(), 0, Math.min(op.count(), Ops.scanLimit(words)), op.rest()), null,
                progress, deadline));
    }

    private Behavior<Command> enqueue(Pending pending) {
        if (pending.op.key() == NodeHeaderDescriptor.NEG_INFINITY && allMinimal(pending.op.rest())) {
            answer(pending, Ops.Result.error(Ops.BAD_INPUT, NodeHeaderDescriptor.RESERVED_KEY));
            return Behaviors.same();
        }
        int partition = table.partitionOf(pending.op.key());
        queues.computeIfAbsent(partition, p -> new ArrayDeque<>()).add(pending);
        sendNext(partition);
        return Behaviors.same();
    }

    /**
     * Sends the partition's waiting operations while fewer than {@link #window} of its batches are in flight. A
     * batch closes at {@link Ops#MAX_BATCH} operations, or before a scan that would take its scan entries past
     * {@link Ops#MAX_SCAN}, so that no answer comes near Artery's frame size (a batch of several 8192-entry
     * scans made a reply Artery dropped, and the batch was sent again for minutes).
     */
    private void sendNext(int partition) {
        Lane lane = lanes.computeIfAbsent(partition, p -> new Lane());
        Held waiting = held.get(partition);
        if (waiting != null) {
            if (!lane.flights.isEmpty()) {
                return;
            }
            long pause = waiting.from - System.nanoTime();
            if (pause > 0) {
                ResumePartition resume = new ResumePartition(partition);
                if (!timers.isTimerActive(resume)) {
                    timers.startSingleTimer(resume, resume, Duration.ofNanos(pause));
                }
                return;
            }
            held.remove(partition);
            requeueFirst(partition, waiting.batches);
        }
        ArrayDeque<Pending> queue = queues.get(partition);
        while (queue != null && !queue.isEmpty() && lane.flights.size() < window
                && (lane.flights.isEmpty() || queue.size() >= PIPELINED_BATCH)) {
            List<Pending> batch = new ArrayList<>();
            List<Ops.Op> ops = new ArrayList<>();
            int scanEntries = 0;
            while (!queue.isEmpty() && batch.size() < Ops.MAX_BATCH) {
                Pending next = queue.peek();
                // Scan entries in units of an 8-byte key's entry (16 bytes): a wider key's entry is more.
                int entries = next.op.kind() == Ops.SCAN ? next.op.count() * (next.op.rest().length + 2) / 2 : 0;
                if (!batch.isEmpty() && scanEntries + entries > Ops.MAX_SCAN) {
                    break;
                }
                queue.poll();
                scanEntries += entries;
                batch.add(next);
                ops.add(next.op);
            }
            send(lane, new Flight(nextBatch++, partition, batch, ops));
        }
    }

    /**
     * Sends a batch behind the partition's batches in flight, naming the one sent last as the batch it follows
     * while any is in flight, so that the partition takes it only after that one ({@link Partition.Execute#follows()}).
     */
    private void send(Lane lane, Flight flight) {
        Object route = routeOf(flight, lane);
        long follows = lane.flights.isEmpty() ? 0 : lane.lastSent;
        lane.flights.add(flight);
        lane.lastSent = flight.id;
        flights.put(flight.id, flight);
        long routingKey = flight.ops.get(0).key();
        long[] known = epochs.get(flight.partition);
        long epoch = known == null ? 0 : known[0];
        if (route == PROXY) {
            region.tell(new Partition.Execute(routingKey, flight.id, clientId, flight.id, epoch, follows, flight.ops, replies));
        } else {
            @SuppressWarnings("unchecked")
            ActorRef<PartitionRouter.Command> router = (ActorRef<PartitionRouter.Command>) route;
            bundling.computeIfAbsent(router, r -> new ArrayList<>())
                    .add(new PartitionRouter.Routed(routingKey, flight.id, epoch, follows, flight.ops));
        }
        timers.startSingleTimer(flight, new FlightTimedOut(flight), askTimeout);
    }

    /**
     * Where the flight goes: to the router of the compute node that last answered for its partition, bundled
     * with the batches of that node's other partitions; through the sharding proxy before that (so after the
     * removal of that node too), and for scans (whose answers are large). A partition changes route only while
     * none of its batches is in flight, so that its batches cannot overtake each other on two paths.
     */
    private Object routeOf(Flight flight, Lane lane) {
        Object wanted = PROXY;
        String host = servedBy.get(flight.partition);
        if (host != null && flight.ops.stream().noneMatch(op -> op.kind() == Ops.SCAN)) {
            ActorRef<PartitionRouter.Command> router = routers.get(host);
            if (router != null) {
                wanted = router;
            }
        }
        Object current = routes.get(flight.partition);
        if (current != null && !current.equals(wanted) && !lane.flights.isEmpty()) {
            return current;
        }
        routes.put(flight.partition, wanted);
        return wanted;
    }

    /** Sends the batches bundled while handling a message: one bundle per compute node (split when large). */
    private void flushBundles() {
        if (bundling.isEmpty()) {
            return;
        }
        for (Map.Entry<ActorRef<PartitionRouter.Command>, List<PartitionRouter.Routed>> entry : bundling.entrySet()) {
            List<PartitionRouter.Routed> part = new ArrayList<>();
            int ops = 0;
            for (PartitionRouter.Routed routed : entry.getValue()) {
                // By the operations' bytes on the wire: a key wider than 8 bytes makes an operation longer.
                int bytes = WireLimits.opBytes(routed.ops());
                if (!part.isEmpty() && (ops + bytes > BUNDLE_OPS * WireLimits.OP_BYTES || part.size() == WireLimits.MAX_BUNDLE)) {
                    entry.getKey().tell(new PartitionRouter.Bundle(part, bundleReplies, clientId));
                    part = new ArrayList<>();
                    ops = 0;
                }
                part.add(routed);
                ops += bytes;
            }
            entry.getKey().tell(new PartitionRouter.Bundle(part, bundleReplies, clientId));
        }
        bundling.clear();
    }

    /** The attempt is no longer in flight: its slot in the partition's window is free. */
    private void landed(Flight flight) {
        flights.remove(flight.id);
        timers.cancel(flight);
        lanes.get(flight.partition).flights.remove(flight);
    }

    /**
     * A removed node answers nothing more: the batches in flight to each partition it served go again shortly
     * ({@link #REMOVAL_RESEND_DELAY}), rather than after the ask timeout. Until then the partition is held: its
     * batches may already be running on the node it moved to, and a batch sent meanwhile would run before the
     * re-sent ones.
     */
    private Behavior<Command> onMemberRemoved(MemberRemoved removed) {
        String address = removed.event().member().address().toString();
        java.util.Set<Integer> partitions = new java.util.TreeSet<>();
        for (Flight flight : flights.values()) {
            if (address.equals(servedBy.get(flight.partition))) {
                partitions.add(flight.partition);
            }
        }
        for (int partition : partitions) {
            hold(partition, REMOVAL_RESEND_DELAY);
            timers.startSingleTimer("resend-" + partition, new ResendPartition(partition), REMOVAL_RESEND_DELAY);
        }
        servedBy.values().removeIf(address::equals);
        routers.remove(address);
        return Behaviors.same();
    }

    /**
     * Every attempt of the partition still unanswered lands, and its operations go again first, in the order of
     * their batches, wherever the partition now is (an answer to an old attempt is ignored). All land before any
     * goes again: with none in flight, the partition leaves the removed node's router for the sharding proxy
     * ({@link #routeOf}).
     */
    private Behavior<Command> onResendPartition(int partition) {
        // The removal delay was the pause.
        landUnanswered(partition, "its compute node was removed from the cluster", Duration.ZERO);
        sendNext(partition);
        return Behaviors.same();
    }

    /**
     * No answer within the ask timeout: the partition is held, and the batch is overdue. Its answer is still taken
     * while batches sent behind it are in flight (it comes before theirs, if at all); once none is, the overdue
     * batches land ({@link #settle}).
     */
    private Behavior<Command> onTimedOut(FlightTimedOut timedOut) {
        Flight flight = timedOut.flight();
        if (flights.get(flight.id) != flight) {
            return Behaviors.same();
        }
        flight.overdue = true;
        hold(flight.partition, RETRY_DELAY);
        settle(flight.partition);
        sendNext(flight.partition);
        return Behaviors.same();
    }

    /** Once every batch of the partition in flight is overdue, they land unanswered. */
    private void settle(int partition) {
        for (Flight flight : lanes.get(partition).flights) {
            if (!flight.overdue) {
                return;
            }
        }
        landUnanswered(partition, "no answer from partition " + partition + " within " + askTimeout.toMillis() + " ms", RETRY_DELAY);
    }

    /**
     * The partition's batches in flight land without their answers. A batch that a batch sent behind it shows was
     * taken is answered with an error: sent again, it would apply after that later batch. The others go again,
     * first, once {@code pause} is over; each may apply twice (if its first attempt did arrive), but before anything
     * the client sent after it.
     */
    private void landUnanswered(int partition, String why, Duration pause) {
        List<Flight> unanswered = new ArrayList<>(lanes.get(partition).flights);
        for (Flight flight : unanswered) {
            landed(flight);
        }
        for (Flight flight : unanswered) {
            for (Pending pending : flight.batch) {
                if (flight.followerTaken) {
                    answer(pending, Ops.Result.error(Ops.FAILED, "partition " + partition + " took this operation's batch but its"
                            + " answer was lost (" + why + "); it is not sent again, which could apply it after the client's later"
                            + " operations"));
                } else {
                    again(partition, flight.id, pending, why, pause);
                }
            }
        }
    }

    private Behavior<Command> onAnswered(Ops.Results results) {
        Flight flight = flights.get(results.batch());
        if (flight == null) {
            return Behaviors.same(); // an attempt that landed unanswered since
        }
        landed(flight);
        if (results.host() != null) {
            servedBy.put(flight.partition, results.host());
        }
        long[] known = epochs.get(flight.partition);
        if (results.epoch() != 0 && (known == null || known[1] < flight.id)) {
            epochs.put(flight.partition, new long[] {results.epoch(), flight.id});
        }
        // Taken: the partition ran it (a refused batch is answered with one retriable status for every operation).
        boolean taken = false;
        if (results.results().size() != flight.batch.size()) {
            Ops.Result single = results.results().size() == 1 ? results.results().get(0) : null;
            taken = single != null && !retriable(single);
            for (Pending pending : flight.batch) {
                if (taken) {
                    answer(pending, single);
                } else {
                    again(flight.partition, flight.id, pending, "partition " + flight.partition + " answered a malformed batch",
                            RETRY_DELAY);
                }
            }
        } else {
            for (int i = 0; i < flight.batch.size(); i++) {
                Pending pending = flight.batch.get(i);
                Ops.Result result = results.results().get(i);
                if (result.status() == Ops.STALE) {
                    again(flight.partition, flight.id, pending, result.error(), Duration.ZERO);
                } else if (retriable(result)) {
                    again(flight.partition, flight.id, pending, result.error(), RETRY_DELAY);
                } else {
                    answer(pending, result);
                    taken = true;
                }
            }
        }
        Lane lane = lanes.get(flight.partition);
        Flight first = lane.flights.peekFirst();
        if (taken && first != null && first.id < flight.id) {
            for (Flight earlier : lane.flights) {
                if (earlier.id > flight.id) {
                    break;
                }
                earlier.followerTaken = true; // its answer, which would have come first, was lost
            }
        }
        if (held.containsKey(flight.partition) && !lane.flights.isEmpty()) {
            settle(flight.partition);
        }
        sendNext(flight.partition);
        return Behaviors.same();
    }

    /** A partition that is moving, has too many batches waiting, or refused a stale batch: the operation goes again. */
    private static boolean retriable(Ops.Result result) {
        return result.status() == Ops.NOT_HELD || result.status() == Ops.OVERLOADED || result.status() == Ops.STALE;
    }

    /** The error text of a failed result; a status without one (a newer node's) is still an error. */
    private static String errorOf(Ops.Result result) {
        return result.error() != null ? result.error() : "the partition answered status " + result.status();
    }

    /**
     * Holds {@code pending}, carried by batch {@code batch}, to go again first when its partition resumes, no sooner
     * than {@code pause} from now; unless it may not go again ({@link #givenUp}).
     */
    private void again(int partition, long batch, Pending pending, String why, Duration pause) {
        if (givenUp(pending, why)) {
            return;
        }
        hold(partition, pause).batches.computeIfAbsent(batch, id -> new ArrayList<>()).add(pending);
    }

    /** Holds the partition: nothing more goes to it until its batches in flight landed and {@code pause} is over. */
    private Held hold(int partition, Duration pause) {
        Held waiting = held.computeIfAbsent(partition, p -> new Held());
        long from = System.nanoTime() + pause.toNanos();
        if (from - waiting.from > 0) {
            waiting.from = from;
        }
        return waiting;
    }

    /** Counts an attempt of {@code pending}; answers it with an error and returns true if it may not go again. */
    private boolean givenUp(Pending pending, String why) {
        if (++pending.attempts >= MAX_ATTEMPTS) {
            answer(pending, Ops.Result.error(Ops.FAILED, "gave up after " + pending.attempts + " attempts: " + why));
            return true;
        }
        if (System.nanoTime() - pending.deadline > 0) {
            answer(pending, Ops.Result.error(Ops.FAILED, "no answer within the request timeout, after " + pending.attempts
                    + " attempts: " + why));
            return true;
        }
        return false;
    }

    /**
     * Held operations go again ahead of what waits for their partition and in the order of the batches that
     * carried them: what waits was received after them.
     */
    private void requeueFirst(int partition, java.util.TreeMap<Long, List<Pending>> refused) {
        ArrayDeque<Pending> queue = queues.computeIfAbsent(partition, p -> new ArrayDeque<>());
        List<List<Pending>> batches = new ArrayList<>(refused.values());
        for (int b = batches.size() - 1; b >= 0; b--) {
            List<Pending> batch = batches.get(b);
            for (int i = batch.size() - 1; i >= 0; i--) {
                queue.addFirst(batch.get(i));
            }
        }
    }

    private void answer(Pending pending, Ops.Result result) {
        if (pending.scan == null) {
            pending.reply.accept(new Reply(result.found(), result.value(), result.status() == Ops.OK ? null : errorOf(result)));
            return;
        }
        ScanProgress progress = pending.scan;
        if (result.status() != Ops.OK) {
            progress.replyTo.accept(new ScanReply(progress.keys, progress.values, errorOf(result), progress.words));
            return;
        }
        if (progress.words > 1) {
            answerWide(pending, progress, result);
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
            enqueue(new Pending(new Ops.Op(Ops.SCAN, result.next(), 0, Math.min(missing, Ops.MAX_SCAN)), null, progress,
                    progress.deadline));
        } else {
            progress.replyTo.accept(new ScanReply(progress.keys, progress.values, null));
        }
    }

    /**
     * A part of a scan of keys of {@code progress.words} words: its entries are added; the scan goes on after the last
     * key when the part was as long as asked for, else at the next partition's start ({@code result.next()}, the
     * first word of a key whose other words are minimal), until it has what was asked for or the keys run out.
     */
    private void answerWide(Pending pending, ScanProgress progress, Ops.Result result) {
        int words = progress.words;
        if (result.keyWords() != words) {
            progress.replyTo.accept(new ScanReply(progress.keys, progress.values, "a scan answer with keys of " + result.keyWords()
                    + " words, not " + words, words));
            return;
        }
        int have = progress.values.length;
        int got = result.values().length;
        int take = Math.min(got, progress.wanted - have);
        progress.keys = Arrays.copyOf(progress.keys, (have + take) * words);
        progress.values = Arrays.copyOf(progress.values, have + take);
        System.arraycopy(result.keys(), 0, progress.keys, have * words, take * words);
        System.arraycopy(result.values(), 0, progress.values, have, take);
        int missing = progress.wanted - progress.values.length;
        long[] next = null;
        if (missing > 0 && got > 0 && got == pending.op.count()) {
            next = Arrays.copyOfRange(result.keys(), (got - 1) * words, got * words);
            if (KeyFormat.of(8 * words).isPosInfinity(next, 0)) {
                next = null; // the largest key there is: nothing after it
            } else {
                IndexSession.successor(next, words);
            }
        } else if (missing > 0 && result.next() != Long.MIN_VALUE) {
            next = new long[words];
            Arrays.fill(next, Long.MIN_VALUE);
            next[0] = result.next();
        }
        if (next != null) {
            enqueue(new Pending(Ops.Op.of(Ops.SCAN, next, 0, Math.min(missing, Ops.scanLimit(words))), null, progress,
                    progress.deadline));
        } else {
            progress.replyTo.accept(new ScanReply(progress.keys, progress.values, null, words));
        }
    }

    /** Whether every word is minimal: with a first word that is too, the reserved empty key. */
    private static boolean allMinimal(long[] words) {
        for (long word : words) {
            if (word != NodeHeaderDescriptor.NEG_INFINITY) {
                return false;
            }
        }
        return true;
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
