package dev.dex.actors.client;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Function;

import org.apache.pekko.actor.typed.ActorRef;

import dev.dex.actors.DexMetrics;
import dev.dex.actors.partition.HopTrace;
import dev.dex.actors.partition.Ops;

/**
 * Where a {@link DexClientApi} leaves operations for its {@link DexClient} actor, in one JVM: a lock-free queue and a
 * doorbell (a flag set by the producer that finds it clear, which then sends one {@link DexClient.Drain}); the actor
 * completes each operation's future on {@code executor}, the API's, in one task per batch answer. Kept apart from the
 * actor because it is the one piece both sides touch: the API's threads produce, the actor consumes.
 *
 * <p>Concurrency: any number of producer threads, one consumer (the actor). A producer adds to the queue,
 * then rings; the actor clears the doorbell before it polls, so an operation is either polled by a drain
 * already running or rings for the next one. The list of answered operations is the actor's alone; it hands
 * each batch of it to the executor as a new task, which publishes the answers to the executor's thread.
 */
final class Submissions {
    /** One operation of a {@link DexClientApi}: a get, put or delete ({@link Call}), or a scan ({@link ScanCall}). */
    sealed interface Submitted permits Call, ScanCall {
        Ops.Op op();

        /** {@link System#nanoTime()} after which the operation is not tried again. */
        long deadline();
    }

    /** A scan: the client actor answers {@code reply} with all its entries. */
    record ScanCall(Ops.Op op, CompletableFuture<DexClient.ScanReply> reply, long deadline) implements Submitted {
    }

    /**
     * A get, put or delete of a {@link DexClientApi}, one object from the call to its answer: the future the caller
     * holds ({@code T} is {@code OptionalLong} for a get, {@code Boolean} for a put or delete), the consumer of the
     * client actor's reply ({@link #accept}), and the task that completes the future on the API's executor
     * ({@link #run}): it records the request's latency and the trace, then completes with the answer, or fails with
     * a {@link DexException} carrying the error. This replaces a future, a stage that converts, a stage that times, and
     * two lambdas per operation.
     *
     * <p>Concurrency: made by the caller's thread and published to the client actor through the queue; {@link #accept}
     * runs on the actor, and {@link #run} on the executor the actor hands it to (the hand-off publishes the reply).
     * After a stop it is answered by whichever thread fails the queue ({@link #fail}); completing a future twice is a
     * no-op, so a late answer changes nothing.
     */
    static final class Call<T> extends CompletableFuture<T> implements Submitted, Consumer<DexClient.Reply>, Runnable {
        /** A get's answer. */
        static final Function<DexClient.Reply, OptionalLong> VALUE =
                reply -> reply.found() ? OptionalLong.of(reply.value()) : OptionalLong.empty();
        /** A put's or delete's answer: whether the key existed. */
        static final Function<DexClient.Reply, Boolean> FOUND = DexClient.Reply::found;

        private final Ops.Op op;
        private final Function<DexClient.Reply, T> answer;
        private final Submissions submissions;
        private final long start;
        private final long deadline;
        /** The operation's {@link HopTrace}; null unless it is traced. */
        private final long[] trace;
        /**
         * The client actor's reply; written by the actor before it hands this to the executor. Volatile so that its
         * publication does not rest on the executor's own hand-off (the API takes any {@code Executor}).
         */
        private volatile DexClient.Reply reply;

        Call(Ops.Op op, Function<DexClient.Reply, T> answer, Submissions submissions, long timeoutNanos) {
            this.op = op;
            this.answer = answer;
            this.submissions = submissions;
            this.start = System.nanoTime();
            this.deadline = start + timeoutNanos;
            this.trace = submissions.sample();
        }

        @Override
        public Ops.Op op() {
            return op;
        }

        @Override
        public long deadline() {
            return deadline;
        }

        long[] trace() {
            return trace;
        }

        /**
         * The client actor's reply: kept, and this left for the actor to hand to the API's executor. The first reply
         * counts; a later one (a duplicate) changes nothing, as a second completion of a future would not.
         */
        @Override
        public void accept(DexClient.Reply reply) {
            if (this.reply != null) {
                return;
            }
            this.reply = reply;
            submissions.answered(this);
        }

        /**
         * Records the request's latency and trace, then completes the future with the reply. A recording that throws
         * is dropped: it must neither fail the operation nor stop the batch this runs in. Does nothing before a reply.
         */
        @Override
        public void run() {
            DexClient.Reply answered = reply;
            if (answered == null) {
                return;
            }
            record();
            finish(answered);
        }

        /** Fails this call with {@code why}, on the calling thread (the client actor stopped). */
        void fail(String why) {
            record();
            finish(new DexClient.Reply(false, 0, why));
        }

        private void record() {
            try {
                if (trace != null) {
                    submissions.completed(trace);
                }
                submissions.recordRequest(op.kind(), System.nanoTime() - start);
            } catch (RuntimeException recordingFailed) {
                // metrics and traces are best effort; the answer is not
            }
        }

        private void finish(DexClient.Reply reply) {
            if (reply.error() != null) {
                completeExceptionally(new DexException(reply.error()));
            } else {
                complete(answer.apply(reply));
            }
        }
    }

    /** Where traced operations are recorded, and one in how many is traced (0: none); set together. */
    private record Tracing(int every, HopTable table) {
    }

    private volatile Tracing tracing = new Tracing(0, null);

    void trace(int every, HopTable table) {
        tracing = new Tracing(every, table);
    }

    /** A new trace stamped with its submission, for about one operation in {@code every}; null for the others. */
    long[] sample() {
        Tracing t = tracing;
        if (t.every == 0 || java.util.concurrent.ThreadLocalRandom.current().nextInt(t.every) != 0) {
            return null;
        }
        long[] trace = HopTrace.create();
        HopTrace.stamp(trace, HopTrace.SUBMIT);
        return trace;
    }

    /** Records a traced operation's completion. */
    void completed(long[] trace) {
        HopTrace.stamp(trace, HopTrace.COMPLETED);
        HopTable table = tracing.table;
        if (table != null) {
            table.record(trace);
        }
    }

    final java.util.concurrent.ConcurrentLinkedQueue<Submitted> queue = new java.util.concurrent.ConcurrentLinkedQueue<>();
    final java.util.concurrent.atomic.AtomicBoolean doorbell = new java.util.concurrent.atomic.AtomicBoolean();
    final java.util.concurrent.Executor executor;
    /** Where requests' latencies are recorded; null for none. */
    private final DexMetrics metrics;
    /**
     * {@link #metrics}' recorder of each operation kind (get, insert, update, put, delete, scan), made on first use so
     * that a kind never requested has no series; racing first uses make equal recorders of one data point.
     */
    private final java.util.concurrent.atomic.AtomicReferenceArray<java.util.function.LongConsumer> requests =
            new java.util.concurrent.atomic.AtomicReferenceArray<>(Ops.SCAN + 1);
    /** The most answers the next batch's list is made room for ahead. */
    private static final int MAX_PRESIZE = 4096;
    /** What the client actor answered while handling its current message; confined to the actor. */
    private List<Runnable> answered = new ArrayList<>();

    Submissions(java.util.concurrent.Executor executor, DexMetrics metrics) {
        this.executor = executor;
        this.metrics = metrics;
    }

    /** Why the client actor stopped, once it has; set before the queue is emptied one last time. */
    private volatile String stopped;

    /** Leaves {@code submitted} for {@code client}, ringing it if nobody has since its last drain. */
    void submit(Submitted submitted, ActorRef<DexClient.Command> client) {
        queue.add(submitted);
        if (stopped != null) {
            failWaiting(stopped);
        } else if (!doorbell.get() && doorbell.compareAndSet(false, true)) {
            client.tell(new DexClient.Drain(this));
        }
    }

    /** Records a request of operation kind {@code kind} that took {@code nanos}, if there are metrics. */
    void recordRequest(int kind, long nanos) {
        if (metrics == null) {
            return;
        }
        if (kind < 0 || kind >= requests.length()) {
            metrics.request(Ops.kindName(kind), nanos);
            return;
        }
        java.util.function.LongConsumer recorder = requests.get(kind);
        if (recorder == null) {
            recorder = metrics.requests(Ops.kindName(kind));
            requests.set(kind, recorder);
        }
        recorder.accept(nanos);
    }

    /** The client actor answered {@code completion}: it runs on {@link #executor} at the next {@link #flushAnswered}. */
    void answered(Runnable completion) {
        answered.add(completion);
    }

    /**
     * Hands what the client actor answered to {@link #executor}, in one task; if the executor was shut down (the API
     * closed), runs it here rather than never. Called by the actor after each message it handles.
     */
    void flushAnswered() {
        if (answered.isEmpty()) {
            return;
        }
        List<Runnable> batch = answered;
        // Sized as the last batch (a closed loop's answers come in batches of thousands, which growing would copy),
        // within a bound, so that one burst does not keep a large array.
        answered = new ArrayList<>(Math.min(MAX_PRESIZE, Math.max(16, batch.size())));
        try {
            executor.execute(() -> batch.forEach(Runnable::run));
        } catch (java.util.concurrent.RejectedExecutionException closed) {
            batch.forEach(Runnable::run);
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
            if (submitted instanceof ScanCall scan) {
                scan.reply().complete(new DexClient.ScanReply(new long[0], new long[0], why));
            } else {
                ((Call<?>) submitted).fail(why);
            }
        }
    }
}
