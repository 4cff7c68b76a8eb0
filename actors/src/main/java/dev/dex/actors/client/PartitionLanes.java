package dev.dex.actors.client;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.actor.typed.receptionist.Receptionist;

import dev.dex.actors.partition.HopTrace;
import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;
import dev.dex.actors.partition.PartitionRouter;
import dev.dex.actors.partition.WireLimits;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;

/**
 * What a {@link DexClient} keeps per partition, once it knows the partition table: the operations waiting for each
 * partition, its batches in flight (its lane, at most {@code window}), the operations held to go again, the owner
 * epoch its answers last named and the compute node that gave them, and the route its batches take. The batching,
 * the order of a partition's batches and the retries are in this one place because they are one invariant: a
 * partition takes a client's operations in the order the client received them, retries included (the
 * {@link DexClient} Javadoc tells how).
 *
 * <p>Concurrency: confined to the client actor; {@code timers} is the actor's.
 */
final class PartitionLanes {
    /** The route of a partition whose batches go through this client's sharding proxy. */
    private static final Object PROXY = "sharding proxy";

    /**
     * One attempt at a partition's batch, told apart from a later attempt at the same batch by identity (not a
     * record: the attempts are equal by value); a newer attempt for the same partition makes this one's answer moot.
     */
    static final class Flight {
        final long id;
        final int partition;
        final List<Pending> batch;
        final List<Ops.Op> ops;
        /** The batch's {@link HopTrace} when an operation of it is traced, else null. */
        final long[] trace;
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
            long[] traced = null;
            for (Pending pending : batch) {
                if (pending.trace != null) {
                    traced = HopTrace.create();
                    break;
                }
            }
            this.trace = traced;
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

    private final TimerScheduler<DexClient.Command> timers;
    private final Duration askTimeout;
    private final int window;
    /** The partition table the client routes by, and its version: replaced by a newer one after a split ({@link #adopt}). */
    private PartitionTable table;
    private long tableVersion;
    /** Operations answered {@link Ops#MOVED} that this client's table cannot place yet, by batch: for a newer table. */
    private final java.util.TreeMap<Long, List<Pending>> moved = new java.util.TreeMap<>();
    /** The compute node that answered the latest {@link Ops#MOVED}: it serves the newer table. */
    private String movedBy;
    /**
     * Batches in flight, at the latest table change, to partitions whose range changed: until they landed nothing goes to
     * those {@link #barred}, so what they bring back {@link Ops#MOVED} goes before the client's later operations.
     */
    private final java.util.Set<Long> barrier = new java.util.HashSet<>();
    private final java.util.Set<Integer> barred = new java.util.HashSet<>();
    /** While {@link #onAnswered} places an answer's operations: the partitions to send to once all are placed. */
    private java.util.Set<Integer> deferred;
    /** The client's sharding proxy of the partitions. */
    private final ActorRef<Partition.Command> region;
    /** Where every partition answers: one stable reference, so Artery compresses it and resolves it once. */
    private final ActorRef<Ops.Results> replies;
    /** Where every compute node's router answers, likewise. */
    private final ActorRef<Ops.ResultsBundle> bundleReplies;
    /** Each compute node's {@link PartitionRouter}, by the node's address (as {@link Ops.Results#host()} names it). */
    private final Map<String, ActorRef<PartitionRouter.Command>> routers = new HashMap<>();
    /**
     * Routers that refused a batch because their node is leaving: no batch goes to them again, even while the
     * Receptionist's listing still names them (it drops them a gossip round or two later).
     */
    private final java.util.Set<Object> leavingRouters = new java.util.HashSet<>();
    /** The route each partition's batches took last: a router, or {@link #PROXY}. */
    private final Map<Integer, Object> routes = new HashMap<>();
    /** Batches for each router, sent as one bundle when the message being handled is done. */
    private final Map<ActorRef<PartitionRouter.Command>, List<PartitionRouter.Routed>> bundling = new java.util.LinkedHashMap<>();
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

    PartitionLanes(TimerScheduler<DexClient.Command> timers, Duration askTimeout, int window, PartitionTable table, long version,
                   ActorRef<Partition.Command> region, ActorRef<Ops.Results> replies, ActorRef<Ops.ResultsBundle> bundleReplies) {
        this.timers = timers;
        this.askTimeout = askTimeout;
        this.window = window;
        this.table = table;
        this.tableVersion = version;
        this.region = region;
        this.replies = replies;
        this.bundleReplies = bundleReplies;
    }

    /** The compute nodes' routers, as the Receptionist lists them now. */
    void routersListed(Receptionist.Listing listing) {
        routers.clear();
        java.util.Set<ActorRef<PartitionRouter.Command>> listed = listing.getServiceInstances(PartitionRouter.KEY);
        for (ActorRef<PartitionRouter.Command> router : listed) {
            if (!leavingRouters.contains(router)) {
                routers.put(router.path().address().toString(), router);
            }
        }
        leavingRouters.retainAll(listed);
    }

    void enqueue(Pending pending) {
        if (allMinimal(pending.op.key())) {
            answer(pending, Ops.Result.error(Ops.BAD_INPUT, NodeHeaderDescriptor.RESERVED_KEY));
            return;
        }
        int partition = table.partitionOf(pending.op.first());
        queues.computeIfAbsent(partition, p -> new ArrayDeque<>()).add(pending);
        sendNext(partition);
    }

    /**
     * Sends the partition's waiting operations while fewer than {@link #window} of its batches are in flight. A
     * batch closes at {@link Ops#MAX_BATCH} operations, or before a scan that would take its scan entries past
     * {@link Ops#MAX_SCAN}, so that no answer comes near Artery's frame size (a batch of several 8192-entry
     * scans made a reply Artery dropped, and the batch was sent again for minutes).
     */
    void sendNext(int partition) {
        if (deferred != null) {
            deferred.add(partition);
            return;
        }
        if (!barred.isEmpty()) {
            if (barrier.isEmpty()) {
                List<Integer> released = new ArrayList<>(barred);
                barred.clear();
                released.forEach(this::sendNext);
            } else if (barred.contains(partition)) {
                return;
            }
        }
        Lane lane = lanes.computeIfAbsent(partition, p -> new Lane());
        Held waiting = held.get(partition);
        if (waiting != null) {
            if (!lane.flights.isEmpty()) {
                return;
            }
            long pause = waiting.from - System.nanoTime();
            if (pause > 0) {
                DexClient.ResumePartition resume = new DexClient.ResumePartition(partition);
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
                && (lane.flights.isEmpty() || queue.size() >= DexClient.PIPELINED_BATCH)) {
            List<Pending> batch = new ArrayList<>();
            List<Ops.Op> ops = new ArrayList<>();
            int scanEntries = 0;
            while (!queue.isEmpty() && batch.size() < Ops.MAX_BATCH) {
                Pending next = queue.peek();
                // Scan entries in units of an 8-byte key's entry (16 bytes): a wider key's entry is more.
                int entries = next.op.kind() == Ops.SCAN ? next.op.count() * (next.op.key().length + 1) / 2 : 0;
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
        long[] known = epochs.get(flight.partition);
        long epoch = known == null ? 0 : known[0];
        if (route == PROXY) {
            HopTrace.stamp(flight.trace, HopTrace.SENT);
            region.tell(new Partition.Execute(flight.partition, flight.id, clientId, flight.id, epoch, follows, flight.ops, replies,
                    flight.trace));
        } else {
            @SuppressWarnings("unchecked")
            ActorRef<PartitionRouter.Command> router = (ActorRef<PartitionRouter.Command>) route;
            bundling.computeIfAbsent(router, r -> new ArrayList<>())
                    .add(new PartitionRouter.Routed(flight.partition, flight.id, epoch, follows, flight.ops, flight.trace));
        }
        timers.startSingleTimer(flight, new DexClient.FlightTimedOut(flight), askTimeout);
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
    void flushBundles() {
        if (bundling.isEmpty()) {
            return;
        }
        for (Map.Entry<ActorRef<PartitionRouter.Command>, List<PartitionRouter.Routed>> entry : bundling.entrySet()) {
            List<PartitionRouter.Routed> part = new ArrayList<>();
            int ops = 0;
            for (PartitionRouter.Routed routed : entry.getValue()) {
                // By the operations' bytes on the wire (a key wider than 8 bytes makes an operation longer), and a traced
                // batch's stamps, so that a bundle of many traced batches stays as small as one of as many operations.
                int bytes = WireLimits.opBytes(routed.ops()) + (routed.trace() == null ? 0 : 8 * HopTrace.STAMPS);
                if (!part.isEmpty() && (ops + bytes > DexClient.BUNDLE_OPS * WireLimits.OP_BYTES
                        || part.size() == WireLimits.MAX_BUNDLE)) {
                    entry.getKey().tell(new PartitionRouter.Bundle(part, bundleReplies, clientId));
                    part = new ArrayList<>();
                    ops = 0;
                }
                HopTrace.stamp(routed.trace(), HopTrace.SENT);
                part.add(routed);
                ops += bytes;
            }
            entry.getKey().tell(new PartitionRouter.Bundle(part, bundleReplies, clientId));
        }
        bundling.clear();
    }

    /** The attempt is no longer in flight: its slot in the partition's window is free. */
    private void landed(Flight flight) {
        barrier.remove(flight.id);
        flights.remove(flight.id);
        timers.cancel(flight);
        lanes.get(flight.partition).flights.remove(flight);
    }

    /**
     * A removed node answers nothing more: the batches in flight to each partition it served go again shortly
     * ({@link DexClient#REMOVAL_RESEND_DELAY}), rather than after the ask timeout. Until then the partition is held:
     * its batches may already be running on the node it moved to, and a batch sent meanwhile would run before the
     * re-sent ones.
     */
    void onMemberRemoved(String address) {
        java.util.Set<Integer> partitions = new java.util.TreeSet<>();
        for (Flight flight : flights.values()) {
            if (address.equals(servedBy.get(flight.partition))) {
                partitions.add(flight.partition);
            }
        }
        for (int partition : partitions) {
            hold(partition, DexClient.REMOVAL_RESEND_DELAY);
            timers.startSingleTimer("resend-" + partition, new DexClient.ResendPartition(partition), DexClient.REMOVAL_RESEND_DELAY);
        }
        servedBy.values().removeIf(address::equals);
        routers.remove(address);
    }

    /**
     * Every attempt of the partition still unanswered lands, and its operations go again first, in the order of
     * their batches, wherever the partition now is (an answer to an old attempt is ignored). All land before any
     * goes again: with none in flight, the partition leaves the removed node's router for the sharding proxy
     * ({@link #routeOf}).
     */
    void onResendPartition(int partition) {
        // The removal delay was the pause.
        landUnanswered(partition, "its compute node was removed from the cluster", Duration.ZERO);
        sendNext(partition);
    }

    /**
     * No answer within the ask timeout: the partition is held, and the batch is overdue. Its answer is still taken
     * while batches sent behind it are in flight (it comes before theirs, if at all); once none is, the overdue
     * batches land ({@link #settle}).
     */
    void onTimedOut(Flight flight) {
        if (flights.get(flight.id) != flight) {
            return;
        }
        flight.overdue = true;
        hold(flight.partition, DexClient.RETRY_DELAY);
        settle(flight.partition);
        sendNext(flight.partition);
    }

    /** Once every batch of the partition in flight is overdue, they land unanswered. */
    private void settle(int partition) {
        for (Flight flight : lanes.get(partition).flights) {
            if (!flight.overdue) {
                return;
            }
        }
        landUnanswered(partition, "no answer from partition " + partition + " within " + askTimeout.toMillis() + " ms",
                DexClient.RETRY_DELAY);
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

    void onAnswered(Ops.Results results) {
        Flight flight = flights.get(results.batch());
        if (flight == null) {
            return; // an attempt that landed unanswered since
        }
        deferred = new java.util.LinkedHashSet<>();
        try {
            placeAnswer(flight, results);
        } finally {
            java.util.Set<Integer> send = deferred;
            deferred = null;
            send.forEach(this::sendNext);
        }
    }

    /** {@link #onAnswered} of {@code flight}, whose sends are deferred until it returns. */
    private void placeAnswer(Flight flight, Ops.Results results) {
        landed(flight);
        if (flight.trace != null) {
            traced(flight, results.trace());
        }
        if (results.host() != null) {
            servedBy.put(flight.partition, results.host());
        }
        // NOT_HELD without a host: a leaving node's router refused the batch without asking the partition (Ops.Results).
        boolean refusedByLeavingRouter = results.host() == null
                && results.results().stream().anyMatch(result -> result.status() == Ops.NOT_HELD);
        Object route = routes.get(flight.partition);
        if (refusedByLeavingRouter && route != null && route != PROXY) {
            // None of that node's partitions' batches goes there again, so what goes again goes through the sharding proxy,
            // which asks where each partition is now. servedBy stays: a removal of that node still re-sends the partition's
            // batches in flight (onMemberRemoved).
            leavingRouters.add(route);
            routers.values().remove(route);
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
                            DexClient.RETRY_DELAY);
                }
            }
        } else {
            for (int i = 0; i < flight.batch.size(); i++) {
                Pending pending = flight.batch.get(i);
                Ops.Result result = results.results().get(i);
                if (result.status() == Ops.MOVED) {
                    moved(flight, pending, result, results.host());
                    taken = true; // the partition took the batch: it answered each operation, this one "not here"
                } else if (result.status() == Ops.STALE) {
                    again(flight.partition, flight.id, pending, result.error(), Duration.ZERO);
                } else if (retriable(result)) {
                    // Refused by a leaving node's router: no pause, since the partition is where it was, or moving, and
                    // the sharding proxy waits for its home either way.
                    boolean leavingRefusal = refusedByLeavingRouter && result.status() == Ops.NOT_HELD;
                    again(flight.partition, flight.id, pending, result.error(),
                            leavingRefusal ? Duration.ZERO : DexClient.RETRY_DELAY);
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
    }

    /** {@code pending} was answered {@link Ops#MOVED}: first where this client's table puts its key, or for a newer table. */
    private void moved(Flight flight, Pending pending, Ops.Result result, String host) {
        if (givenUp(pending, result.error())) {
            return;
        }
        int now = table.partitionOf(pending.op.first());
        if (now != flight.partition) {
            holdAgain(now, flight.id, pending, Duration.ZERO);
            sendNext(now); // deferred to the end of the answer
        } else {
            moved.computeIfAbsent(flight.id, id -> new ArrayList<>()).add(pending);
            movedBy = host;
        }
    }

    /** Whether operations wait for a newer table ({@link #movedBy} has one); those past their deadline are answered. */
    boolean wantsTable() {
        for (var batch : moved.values()) {
            batch.removeIf(pending -> System.nanoTime() - pending.deadline > 0 && givenUp(pending, "no newer partition table"));
        }
        moved.values().removeIf(List::isEmpty);
        return !moved.isEmpty();
    }

    /** The compute node that answered the latest {@link Ops#MOVED}, or null. */
    String movedBy() {
        return movedBy;
    }

    /**
     * Routes by {@code next} from now on, if its {@code version} is newer: what waits for a partition whose range changed
     * (queued, held, or answered {@link Ops#MOVED}) goes to where its key lies now, in the order the client took it, and
     * the partitions whose range changed take nothing new until the batches in flight to the changed ones landed.
     * (One gap: a batch of a changed partition that lands unanswered goes again to that partition, and so after the
     * barrier: should the split have moved its key, it may then apply after a later operation of the same key.)
     */
    boolean adopt(PartitionTable next, long version) {
        if (version < tableVersion || version == tableVersion && next.equals(table)) {
            return false;
        }
        PartitionTable old = table;
        table = next;
        tableVersion = version;
        java.util.Set<Integer> changedNew = new java.util.TreeSet<>();
        for (int id : next.ids()) {
            if (!next.sameRange(id, old)) {
                changedNew.add(id);
            }
        }
        for (int id : old.ids()) {
            if (old.sameRange(id, next)) {
                continue;
            }
            Lane lane = lanes.get(id);
            if (lane != null) {
                lane.flights.forEach(flight -> barrier.add(flight.id));
            }
            ArrayDeque<Pending> queue = queues.remove(id);
            if (queue != null) {
                for (Pending pending : queue) {
                    queues.computeIfAbsent(next.partitionOf(pending.op.first()), p -> new ArrayDeque<>()).add(pending);
                }
            }
            Held waiting = held.get(id);
            if (waiting != null) {
                for (var batch : waiting.batches.entrySet()) {
                    batch.getValue().removeIf(pending -> {
                        int now = next.partitionOf(pending.op.first());
                        if (now == id) {
                            return false;
                        }
                        holdAgain(now, batch.getKey(), pending, Duration.ZERO);
                        return true;
                    });
                }
                waiting.batches.values().removeIf(List::isEmpty);
            }
        }
        moved.forEach((batch, pendings) -> pendings.forEach(pending ->
                holdAgain(next.partitionOf(pending.op.first()), batch, pending, Duration.ZERO)));
        moved.clear();
        if (!barrier.isEmpty()) {
            barred.addAll(changedNew);
        }
        changedNew.forEach(this::sendNext);
        return true;
    }

    /** A partition that is moving, has too many batches waiting, or refused a stale batch: the operation goes again. */
    private static boolean retriable(Ops.Result result) {
        return result.status() == Ops.NOT_HELD || result.status() == Ops.OVERLOADED || result.status() == Ops.STALE;
    }

    /**
     * Holds {@code pending}, carried by batch {@code batch}, to go again first when its partition resumes, no sooner
     * than {@code pause} from now; unless it may not go again ({@link #givenUp}).
     */
    private void again(int partition, long batch, Pending pending, String why, Duration pause) {
        if (givenUp(pending, why)) {
            return;
        }
        // Where the key lies now: a split the client learned of since the batch went may have moved it.
        int now = table.partitionOf(pending.op.first());
        holdAgain(now, batch, pending, pause);
        if (now != partition) {
            sendNext(now);
        }
    }

    /** Holds {@code pending}, carried by batch {@code batch}, to go to {@code partition} first, in its batch's order. */
    private void holdAgain(int partition, long batch, Pending pending, Duration pause) {
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
        if (++pending.attempts >= DexClient.MAX_ATTEMPTS) {
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

    /**
     * Copies the stamps of a traced batch's last attempt ({@code remote}: what its answer carried back, null if it
     * carried none) into each traced operation of it, and stamps the answer's arrival.
     */
    private static void traced(Flight flight, long[] remote) {
        for (Pending pending : flight.batch) {
            if (pending.trace != null) {
                for (int hop = HopTrace.SENT; hop < HopTrace.CLIENT; hop++) {
                    pending.trace[hop] = remote == null ? (hop == HopTrace.SENT ? flight.trace[hop] : 0) : remote[hop];
                }
                HopTrace.stamp(pending.trace, HopTrace.CLIENT);
            }
        }
    }

    /** Answers {@code pending}; the next part of a scan that goes on is sent like any other operation. */
    private void answer(Pending pending, Ops.Result result) {
        Pending next = pending.answer(result);
        if (next != null) {
            enqueue(next);
        }
    }

    /**
     * The client stopped: every operation waiting, in flight or held is answered with the error {@code why} (the
     * timers of the held ones die with the actor).
     */
    void stop(String why) {
        List<Pending> all = new ArrayList<>();
        queues.values().forEach(all::addAll);
        queues.clear();
        for (Flight flight : flights.values()) {
            all.addAll(flight.batch);
        }
        flights.clear();
        lanes.clear();
        held.values().forEach(waiting -> waiting.batches.values().forEach(all::addAll));
        held.clear();
        moved.values().forEach(all::addAll);
        moved.clear();
        for (Pending pending : all) {
            answer(pending, Ops.Result.error(Ops.FAILED, why));
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
}
