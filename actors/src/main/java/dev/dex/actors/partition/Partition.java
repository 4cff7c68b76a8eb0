package dev.dex.actors.partition;

import java.util.ArrayList;
import java.util.List;

import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.StashBuffer;
import org.apache.pekko.cluster.sharding.typed.ShardingMessageExtractor;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;

import dev.dex.actors.CborSerializable;
import dev.dex.actors.DexMetrics;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.partition.PartitionedEngine;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.FencedException;

/**
 * One logical partition, the sharded entity (one shard per partition). It acquires the partition on the
 * compute node's engine when it starts and releases it (writing its dirty pages back and dropping them)
 * on the handoff stop message, so moving the shard is the paper's logical repartitioning. Operations run
 * on the compute node's worker threads; the actor never blocks.
 *
 * <p>Messages that arrive while it starts are stashed until the partition is acquired. After the stop
 * message, new batches are stashed until operations in flight are done and the release finished; they are
 * then answered {@link Ops#NOT_HELD}, and the client sends them again through sharding, which delivers them
 * to the partition's new home.
 */
public final class Partition {
    /** The entity type of logical partitions; the entity id is the partition number. */
    public static final EntityTypeKey<Command> TYPE_KEY = EntityTypeKey.create(Command.class, "dex-partition");

    private static final int STASH = 10_000;
    /**
     * The most batches that may wait for a partition's running batch; one more is answered
     * {@link Ops#OVERLOADED} at once instead of queueing without bound. Each client keeps at most
     * {@code dex.client.window} batches per partition in flight, so this is reached with many clients, or when a
     * partition that was starting takes what arrived meanwhile; clients send such batches again shortly.
     */
    static final int MAX_WAITING = 64;
    /**
     * Clients whose latest taken batch a partition remembers ({@link #floors}); the one heard from least recently
     * is forgotten first. A forgotten client's late attempt is still refused once the partition has changed owner
     * (its epoch), but not within the same owner; its next batch that follows another is refused once, and goes
     * again.
     */
    static final int MAX_CLIENTS = 4096;

    /**
     * Messages of a partition. Only the messages that may come from another process are serializable
     * ({@link CborSerializable}, or a binding of their own to {@link BatchSerializer}); the actor's internal
     * messages are not, so no other process can forge them (a forged completion could, say, drive a count of
     * work in flight negative).
     *
     * <p>Sealed, so that the list below is the actor's whole protocol: no class elsewhere can become one of its
     * messages.
     */
    public sealed interface Command permits Execute, Handoff, Acquired, Done, GaveUp, Released {
    }

    /**
     * A batch of operations on keys of one partition; {@code partition} is its id, as the sender's table has it (the
     * sharding entity it goes to, {@link IdExtractor}); {@code batch} is the
     * sender's id for it, returned in {@link Ops.Results#batch()}. {@code client}, {@code seq}, {@code epoch} and
     * {@code follows} guard against late attempts and retries that would overtake: {@code client} names the
     * client (0: a sender that asks for no guard), {@code seq} orders its batches (higher is sent later),
     * {@code epoch} is the partition's owner epoch the client knew when it sent the batch
     * ({@link Ops.Results#epoch()}; 0 if none), and {@code follows} is the seq of the client's batch this one was
     * sent behind while that one was unanswered (0: every earlier batch of the client to the partition was
     * answered). A batch with writes from a named client is applied only under that epoch, and only if no later
     * batch of the client was taken before it; any batch of a named client is taken only if the batch it follows
     * was taken; otherwise it is answered {@link Ops#STALE} (docs/cluster.md, "Late attempts" and "Order"). On
     * the wire in {@link BatchSerializer}'s binary layout. {@code trace} is the batch's {@link HopTrace}, null unless it
     * is traced.
     */
    public record Execute(long partition, long batch, long client, long seq, long epoch, long follows, List<Ops.Op> ops,
                          ActorRef<Ops.Results> replyTo, long[] trace) implements Command {
        public Execute(long partition, long batch, long client, long seq, long epoch, long follows, List<Ops.Op> ops,
                       ActorRef<Ops.Results> replyTo) {
            this(partition, batch, client, seq, epoch, follows, ops, replyTo, null);
        }

        /** A batch of a sender that asks for no guard against late attempts. */
        public Execute(long partition, long batch, List<Ops.Op> ops, ActorRef<Ops.Results> replyTo) {
            this(partition, batch, 0, batch, 0, 0, ops, replyTo);
        }

        public Execute(long partition, List<Ops.Op> ops, ActorRef<Ops.Results> replyTo) {
            this(partition, 0, ops, replyTo);
        }
    }

    /** The stop message sharding sends on handoff. */
    public enum Handoff implements Command, CborSerializable {
        INSTANCE
    }

    private record Acquired(DexEngine.AcquireReport report, Throwable failure) implements Command, NoSerializationVerificationNeeded {
    }

    private record Done(Ops.Results results, Throwable failure, Execute execute)
            implements Command, NoSerializationVerificationNeeded {
    }

    private record GaveUp(Throwable failure) implements Command, NoSerializationVerificationNeeded {
    }

    private record Released(PartitionedEngine.ReleaseReport report, Throwable failure)
            implements Command, NoSerializationVerificationNeeded {
    }

    /**
     * Maps a batch to the entity and shard of the partition its sender chose by its own partition table
     * ({@link Execute#partition()}): one entity and one shard per partition id. Not by key: the nodes of a cluster may
     * hold tables of different versions for a moment after a split, and a batch must reach the partition it was formed
     * for (which answers {@link Ops#MOVED} for a key it no longer holds).
     */
    public static final class IdExtractor extends ShardingMessageExtractor<Command, Command> {
        /** Each id as text, made once: sharding asks for it several times per message. */
        private static final String[] IDS = new String[PartitionTable.MAX_PARTITIONS];

        static {
            for (int p = 0; p < IDS.length; p++) {
                IDS[p] = Integer.toString(p);
            }
        }

        @Override
        public String entityId(Command message) {
            if (message instanceof Execute execute) {
                long partition = execute.partition();
                if (partition < 0 || partition >= IDS.length) {
                    throw new IllegalArgumentException("a batch for partition " + partition + ", which no table can have");
                }
                return IDS[(int) partition];
            }
            throw new IllegalArgumentException("not a routable partition message: " + message);
        }

        @Override
        public String shardId(String entityId) {
            return entityId;
        }

        @Override
        public Command unwrapMessage(Command message) {
            return message;
        }
    }

    private final ActorContext<Command> context;
    private final StashBuffer<Command> stash;
    private final EngineWorkers workers;
    private final int partition;
    /** This compute node's address, in every answer. */
    private final String host;
    /** Batches at the workers: 0 or 1 (a partition's batches run one after another, in arrival order). */
    private int inFlight;
    /** Batches that arrived while one was running, in arrival order; at most {@link #MAX_WAITING}. */
    private final java.util.ArrayDeque<Execute> waiting = new java.util.ArrayDeque<>();
    /** The stop message came while the partition was still being acquired. */
    private boolean handoffPending;
    /** The partition was released by a handoff, or never acquired: nothing to give up when the entity stops. */
    private boolean settled;
    /** The acquire running on a worker: a give-up always follows it, never races it. */
    private java.util.concurrent.CompletionStage<?> acquiring;
    /**
     * This owner's epoch, in every answer and required of every guarded batch of writes: the redo log's owner
     * epoch (bumped at every acquire), or without the redo log a random negative tag per acquire; 0 until
     * the partition is acquired.
     */
    private long epoch;
    /** Per client, the seq of its latest batch taken under this epoch; least recently used first. */
    private final java.util.LinkedHashMap<Long, Long> floors = new java.util.LinkedHashMap<>(64, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(java.util.Map.Entry<Long, Long> eldest) {
            return size() > MAX_CLIENTS;
        }
    };

    /** The shard this entity lives in, to passivate it (null outside sharding: then it stops at once). */
    private final ActorRef<org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding.ShardCommand> shard;
    /** It asked its shard to stop it (its partition was merged away under it). */
    private boolean passivating;

    private Partition(ActorContext<Command> context, StashBuffer<Command> stash, EngineWorkers workers, int partition,
                      ActorRef<org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding.ShardCommand> shard) {
        this.shard = shard;
        this.context = context;
        this.stash = stash;
        this.workers = workers;
        this.partition = partition;
        this.host = context.getSystem().address().toString();
    }

    /** The entity for {@code partition} on a compute node whose engine runs on {@code workers}. */
    public static Behavior<Command> create(int partition, EngineWorkers workers) {
        return create(partition, workers, null);
    }

    /** As above, in {@code shard}, which passivates the entity when its partition was merged away. */
    public static Behavior<Command> create(int partition, EngineWorkers workers,
                                           ActorRef<org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding.ShardCommand> shard) {
        return Behaviors.withStash(STASH, stash -> Behaviors.setup(context -> {
            context.setLoggerName(Partition.class); // as ReplicaCoordinator's: not from the stack of its first use
            Partition entity = new Partition(context, stash, workers, partition, shard);
            java.util.concurrent.CompletionStage<DexEngine.AcquireReport> acquiring =
                    workers.submit(() -> workers.acquire(partition));
            entity.acquiring = acquiring;
            context.pipeToSelf(acquiring, (report, failure) -> new Acquired(report, failure));
            return entity.starting();
        }));
    }

    /**
     * A failed acquire, logged at most once in 10 s per partition ({@link EngineWorkers#acquireFailed}): a memory node
     * that cannot be reached is a warning naming it, without a stack trace; anything else an error with one.
     */
    private void logAcquireFailure(Throwable failure) {
        int suppressed = workers.acquireFailed(partition);
        if (suppressed < 0) {
            return;
        }
        String more = suppressed == 0 ? "" : " (" + suppressed + " more failed attempts since the last such line)";
        Throwable cause = causeOf(failure);
        if (cause instanceof dev.dex.rdma.FabricException) {
            context.getLog().warn("partition {} could not be acquired: {}{}; its batches are refused until it can be", partition,
                    cause.getMessage(), more);
        } else {
            context.getLog().error("partition {} could not be acquired{}", partition, more, failure);
        }
    }

    private Behavior<Command> starting() {
        return Behaviors.receive(Command.class)
                .onMessage(Acquired.class, acquired -> {
                    if (acquired.failure() != null) {
                        logAcquireFailure(acquired.failure());
                        Throwable cause = causeOf(acquired.failure());
                        // NOT_HELD, so that the client tries again (the memory node may be back in a moment), but saying
                        // why: a client that gives up reports the memory server it could not reach. Unless every replica
                        // of a memory server it needs is gone: sending again does not help until one is back, so the
                        // batches fail now, saying which server and replicas.
                        // A partition merged into its neighbour is not in the table any more: MOVED, the client reads it.
                        refuseStashed("partition " + partition + " could not be acquired: " + cause.getMessage(), gone() ? Ops.MOVED
                                : cause instanceof dev.dex.rdma.MemoryServerLostException ? Ops.FAILED : Ops.NOT_HELD);
                        settled = true;
                        return Behaviors.stopped();
                    }
                    DexEngine.AcquireReport report = acquired.report();
                    workers.acquired(partition);
                    DexMetrics.get(context.getSystem()).acquired();
                    epoch = report.epoch() != 0 ? report.epoch()
                            : java.util.concurrent.ThreadLocalRandom.current().nextLong() | Long.MIN_VALUE;
                    if (report.previousOwner() != 0) {
                        context.getLog().warn("partition {}: its previous owner (fabric client {}) had not given it up; {}", partition,
                                Long.toHexString(report.previousOwner()), report.fenced()
                                        ? "it is fenced on every memory node and nothing it sends is applied any more"
                                        : "this fabric cannot fence it: only its downing stops it (see docs/durability.md)");
                    }
                    if (report.replayed() > 0) {
                        context.getLog().info("partition {} acquired in {} ms: {} redo log records replayed, {} pages written back (epoch {})",
                                partition, report.nanos() / 1_000_000, report.replayed(), report.pages(), report.epoch());
                    } else {
                        context.getLog().debug("partition {} acquired in {} ms (epoch {})", partition, report.nanos() / 1_000_000,
                                report.epoch());
                    }
                    return handoffPending ? releasing(System.nanoTime()) : stash.unstashAll(active());
                })
                .onMessage(Handoff.class, handoff -> {
                    handoffPending = true;
                    return Behaviors.same();
                })
                .onAnyMessage(this::stashOrRefuse)
                .onSignal(PostStop.class, this::onPostStop)
                .build();
    }

    private Behavior<Command> active() {
        return Behaviors.receive(Command.class)
                .onMessage(Execute.class, this::onExecute)
                .onMessage(Done.class, this::onDone)
                .onMessage(Handoff.class, handoff -> handOff())
                .onSignal(PostStop.class, this::onPostStop)
                .build();
    }

    private Behavior<Command> onExecute(Execute execute) {
        HopTrace.stamp(execute.trace(), HopTrace.PARTITION);
        if (execute.ops() == null) {
            reply(execute, List.of(Ops.Result.error(Ops.BAD_INPUT, "a batch without operations")));
            return Behaviors.same();
        }
        if (execute.ops().size() > Ops.MAX_BATCH) {
            reply(execute, List.of(Ops.Result.error(Ops.BAD_INPUT,
                    "a batch holds at most " + Ops.MAX_BATCH + " operations, not " + execute.ops().size())));
            return Behaviors.same();
        }
        if (inFlight == 0 && waiting.isEmpty() && !workers.engine().holds(partition) && !workers.engine().partitionFailed(partition)) {
            // The engine gave the partition up under this entity: merged into its left neighbour (PartitionMerges). Its id
            // may come back with a later split: this entity is passivated (its shard keeps the batches that come meanwhile
            // for the next incarnation, which acquires it), and answers until then.
            boolean gone = gone();
            reply(execute, sameForEach(execute, Ops.Result.error(gone ? Ops.MOVED : Ops.NOT_HELD, "partition " + partition
                    + (gone ? " was merged into its neighbour (partition table version " + workers.engine().servedTable(false).version()
                    + ")" : " is being acquired again"))));
            if (shard == null) {
                settled = true;
                return Behaviors.stopped();
            }
            if (!passivating) {
                passivating = true;
                shard.tell(new org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding.Passivate<>(context.getSelf()));
            }
            return Behaviors.same();
        }
        if (inFlight == 0) {
            run(execute);
        } else if (waiting.size() < MAX_WAITING) {
            waiting.add(execute);
        } else {
            reply(execute, sameForEach(execute, Ops.Result.error(Ops.OVERLOADED, "partition " + partition + " has " + MAX_WAITING
                    + " batches waiting; try again later")));
        }
        return Behaviors.same();
    }

    /**
     * Starts {@code execute}, or if it is stale answers it {@link Ops#STALE} and starts the next waiting batch
     * that is not. Called when no batch is running, so the admission order is the order of application.
     */
    private void run(Execute execute) {
        for (Execute next = execute; next != null; next = waiting.poll()) {
            String stale = stale(next);
            if (stale == null) {
                start(next);
                return;
            }
            reply(next, sameForEach(next, Ops.Result.error(Ops.STALE, stale)));
        }
    }

    /**
     * Why a batch must not be taken, or null. A late attempt (a batch its client gave up waiting for and sent
     * again, which then arrives after all) must not apply after the client's later writes: so a named client's
     * batch of writes is applied only under the epoch it names, which the client learnt from an answer of this
     * owner (never from a later one, which did not exist yet), and only if no later batch of the client was
     * taken before it. And a batch must not overtake the one it was sent behind: one that was refused (it will go
     * again) or lost. So any batch of a named client that follows another is taken only if that one is the
     * client's latest taken here. Otherwise batches of reads are served: a late one changes nothing.
     */
    private String stale(Execute execute) {
        if (execute.client() == 0) {
            return null;
        }
        Long floor = floors.get(execute.client());
        if (execute.ops().stream().anyMatch(Ops.Op::writes)) {
            if (execute.epoch() != epoch) {
                return execute.epoch() == 0
                        ? "the client did not know partition " + partition + "'s epoch yet; nothing was applied"
                        : "sent for epoch " + execute.epoch() + " of partition " + partition + ", which is at epoch " + epoch
                                + " now; nothing was applied";
            }
            if (floor != null && execute.seq() <= floor) {
                return "batch " + execute.seq() + " arrived after the client's batch " + floor + " was applied; nothing was applied";
            }
        }
        if (execute.follows() != 0 && (floor == null || floor != execute.follows())) {
            return "batch " + execute.seq() + " follows the client's batch " + execute.follows() + ", which partition " + partition
                    + " has not taken (it was refused or lost; it goes again first); nothing was applied";
        }
        if (floor == null || execute.seq() > floor) {
            floors.put(execute.client(), execute.seq());
        }
        return null;
    }

    /**
     * Runs a batch on a worker. One batch of a partition runs at a time, so batches are applied in the order they
     * arrived: a client's batches to one partition take one path and keep their order, so operations it sends
     * one after another are applied in that order.
     */
    private void start(Execute execute) {
        inFlight++;
        java.util.concurrent.CompletionStage<Ops.Results> running;
        try {
            running = workers.execute(partition, execute.ops(), execute.trace());
        } catch (java.util.concurrent.RejectedExecutionException shuttingDown) {
            running = java.util.concurrent.CompletableFuture.failedFuture(shuttingDown);
        }
        context.pipeToSelf(running, (results, failure) -> new Done(results, failure, execute));
    }

    private Behavior<Command> onDone(Done done) {
        answer(done);
        if (workers.engine().logFailed(partition)) {
            // The engine knows what failed the partition exactly; the batch's own failure otherwise.
            Throwable cause = workers.engine().failure(partition);
            if (cause == null) {
                cause = done.failure() != null ? done.failure() : workers.lastFailure(partition);
            }
            context.getLog().warn(workers.engine().partitionFailed(partition) ? cacheLost(partition, cause)
                    : logLost(partition, cause));
            return givingUp();
        }
        Execute next = waiting.poll();
        if (next != null) {
            run(next);
        }
        return Behaviors.same();
    }

    /**
     * The warning for a partition whose cache the engine could no longer keep in step with remote memory (a split whose
     * writes failed left an owned node that remote memory may not have: {@code DexEngine.cacheFailed}).
     */
    static String cacheLost(int partition, Throwable failure) {
        return "partition " + partition + ": a change of the tree's structure could not be written to the memory node ("
                + (failure == null ? "cause unknown" : failure.getMessage()) + "), so its cached pages can no longer be"
                + " trusted; the partition is given up without writing them and acquired again on its next batch, whose"
                + " replay of the redo log restores every acknowledged write";
    }

    /**
     * The warning for a redo log that lost an append, naming its cause as found in {@code failure} (what failed the
     * batch; null if unknown): a fence, after which this node must leave; an unreachable memory node, after which
     * the partition is acquired again; or anything else.
     */
    static String logLost(int partition, Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t instanceof FencedException) {
                return "partition " + partition + ": its redo log could not be written because a memory node fenced this compute"
                        + " node (another compute node took the partition over, or the cluster downed this one): nothing it"
                        + " writes is applied any more, so the partition is given up and this node must leave the cluster ("
                        + t.getMessage() + ")";
            }
        }
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t instanceof FabricException) {
                return "partition " + partition + ": its redo log could not be written because the memory node was unreachable ("
                        + t.getMessage() + "); every later commit would fail, so the partition is given up and acquired again"
                        + " on its next batch";
            }
        }
        return "partition " + partition + ": its redo log could not be written (" + (failure == null ? "cause unknown" : failure)
                + "); every later commit would fail, so the partition is given up and acquired again on its next batch";
    }

    private void answer(Done done) {
        inFlight--;
        if (done.failure() != null) {
            reply(done.execute(), List.of(Ops.Result.error(Ops.FAILED, done.failure().toString())));
        } else {
            reply(done.execute(), done.results().results());
        }
    }

    /** Every answer names its batch and this compute node, so that a client can tell whose removal leaves it unanswered. */
    private void reply(Execute execute, List<Ops.Result> results) {
        HopTrace.stamp(execute.trace(), HopTrace.ANSWERED);
        execute.replyTo().tell(new Ops.Results(execute.batch(), results, host, epoch, execute.trace()));
    }

    private static List<Ops.Result> sameForEach(Execute execute, Ops.Result result) {
        List<Ops.Result> results = new ArrayList<>(execute.ops().size());
        for (int i = 0; i < execute.ops().size(); i++) {
            results.add(result);
        }
        return results;
    }

    /** Batches that have not started are answered NOT_HELD (the partition is leaving), so clients send them again. */
    private void refuseWaiting() {
        for (Execute execute; (execute = waiting.poll()) != null; ) {
            refuse(execute);
        }
    }

    /**
     * After a lost log append: waits for the batches in flight (they fail as not durable), gives the partition
     * up without writing back (its durable writes are in the log up to the hole), and stops. The next batch
     * starts the entity again, whose acquire opens the log under a new epoch and replays it; batches that come
     * meanwhile are answered NOT_HELD, so clients send them again.
     */
    private Behavior<Command> givingUp() {
        refuseWaiting();
        if (inFlight > 0) {
            return refusingBatches(Behaviors.receive(Command.class)
                    .onMessage(Done.class, done -> {
                        answer(done);
                        return givingUp();
                    }));
        }
        context.pipeToSelf(workers.submit(() -> workers.engine().abandon(partition)), (frames, failure) -> new GaveUp(failure));
        return refusingBatches(Behaviors.receive(Command.class)
                .onMessage(GaveUp.class, gaveUp -> {
                    if (gaveUp.failure() != null) {
                        context.getLog().error("partition {} could not be given up", partition, gaveUp.failure());
                    }
                    settled = gaveUp.failure() == null;
                    return Behaviors.stopped();
                }));
    }

    /** {@code builder}, answering new batches NOT_HELD and ignoring anything else it does not handle. */
    private Behavior<Command> refusingBatches(org.apache.pekko.actor.typed.javadsl.BehaviorBuilder<Command> builder) {
        return builder
                .onMessage(Execute.class, execute -> {
                    refuse(execute);
                    return Behaviors.same();
                })
                .onAnyMessage(message -> Behaviors.same())
                .onSignal(PostStop.class, this::onPostStop)
                .build();
    }

    /** The stop message: let operations in flight finish, then release the partition and stop. */
    private Behavior<Command> handOff() {
        refuseWaiting();
        long start = System.nanoTime();
        if (inFlight == 0) {
            return releasing(start);
        }
        return Behaviors.receive(Command.class)
                .onMessage(Done.class, done -> {
                    answer(done);
                    return inFlight == 0 ? releasing(start) : Behaviors.same();
                })
                .onAnyMessage(this::stashOrRefuse)
                .onSignal(PostStop.class, this::onPostStop)
                .build();
    }

    private Behavior<Command> releasing(long start) {
        context.pipeToSelf(workers.submit(() -> workers.release(partition)), Released::new);
        return Behaviors.receive(Command.class)
                .onMessage(Released.class, released -> {
                    if (released.failure() != null) {
                        context.getLog().error("partition {} release failed", partition, released.failure());
                    } else {
                        PartitionedEngine.ReleaseReport report = released.report();
                        DexMetrics.get(context.getSystem()).released();
                        context.getLog().info("partition {} handed off in {} ms: {} pages ({} bytes) written back, {} frames dropped",
                                partition, (System.nanoTime() - start) / 1_000_000, report.pagesWritten(), report.bytesWritten(),
                                report.framesDropped());
                    }
                    refuseStashed();
                    settled = released.failure() == null;
                    return Behaviors.stopped();
                })
                .onAnyMessage(this::stashOrRefuse)
                .onSignal(PostStop.class, this::onPostStop)
                .build();
    }

    /**
     * Any stop but a completed handoff (sharding's handoff timeout, a failure, the node being downed or shut
     * down): the partition is given up without writing back, since another compute node may own it already
     * (DexEngine.abandon; with the redo log its next owner replays the discarded writes). Stashed batches are
     * answered NOT_HELD, so clients send them again.
     */
    private Behavior<Command> onPostStop(PostStop stop) {
        if (!settled) {
            settled = true;
            context.getLog().warn("partition {} stopped without a completed handoff: its cached pages are dropped without"
                    + " write-back; its next owner replays its redo log", partition);
            org.slf4j.Logger log = context.getLog();
            acquiring.whenComplete((report, failure) -> {
                try {
                    workers.submit(() -> workers.engine().abandon(partition));
                } catch (java.util.concurrent.RejectedExecutionException shuttingDown) {
                    log.debug("partition {}: the workers are shut down; the engine goes with them", partition);
                }
            });
            refuseStashed();
        }
        refuseWaiting();
        return Behaviors.same();
    }

    private Behavior<Command> stashOrRefuse(Command message) {
        if (message instanceof Handoff) {
            return Behaviors.same();
        }
        if (stash.isFull()) {
            refuse(message);
        } else {
            stash.stash(message);
        }
        return Behaviors.same();
    }

    private void refuseStashed() {
        refuseStashed("partition " + partition + " is moving to another compute node");
    }

    private void refuseStashed(String why) {
        refuseStashed(why, Ops.NOT_HELD);
    }

    /** Answers every stashed batch with {@code status} (NOT_HELD: send again; FAILED: for good) and {@code why}. */
    private void refuseStashed(String why, int status) {
        stash.forEach(message -> refuse(message, why, status));
        stash.clear();
    }

    /** Whether this partition's id is not in the table the engine serves (merged away). */
    private boolean gone() {
        return !workers.engine().partitions().exists(partition);
    }

    /** The exception a worker's completion wraps. */
    private static Throwable causeOf(Throwable failure) {
        return failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null ? failure.getCause() : failure;
    }

    private void refuse(Command message) {
        refuse(message, "partition " + partition + " is moving to another compute node");
    }

    private void refuse(Command message, String why) {
        refuse(message, why, Ops.NOT_HELD);
    }

    private void refuse(Command message, String why, int status) {
        if (message instanceof Execute execute && execute.ops() != null) {
            reply(execute, sameForEach(execute, Ops.Result.error(status, why)));
        }
    }
}
