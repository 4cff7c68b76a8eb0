package dev.dex.actors.partition;

/**
 * The hops of one operation through the cluster, for a sample of operations ({@code bin/dex bench --cluster
 * --trace-sample N}): a traced batch carries an array of {@link #STAMPS} {@link System#nanoTime()} stamps, one slot per
 * hop, filled in as it passes (0: the hop was not passed, as an in-process message is never serialized). The client
 * stamps the operation's submission, its drain and the bundle's send; the serializer stamps the encoding and decoding of
 * a batch and of its answer; the router, the partition and the engine's worker stamp their own steps; the client stamps
 * the answer and the completion of the operation's future.
 *
 * <p>Stamps of different processes compare only on one host: {@code System.nanoTime()} is the host's monotonic clock
 * ({@code CLOCK_MONOTONIC} on Linux) for every JVM on it, but two hosts' clocks are unrelated.
 *
 * <p>Concurrency: a trace array travels with its batch, written by one hop at a time; each hand-over between hops (an
 * actor message, an executor task, a future's completion, a serialized frame) orders the writes before it with the
 * reads after it. Untraced batches carry null and cost one null check per hop.
 */
public final class HopTrace {
    public static final int SUBMIT = 0;
    public static final int DRAIN = 1;
    public static final int SENT = 2;
    public static final int ENCODED = 3;
    public static final int DECODED = 4;
    public static final int ROUTER = 5;
    public static final int PARTITION = 6;
    public static final int WORKER_START = 7;
    public static final int WORKER_END = 8;
    public static final int ANSWERED = 9;
    public static final int ROUTER_OUT = 10;
    public static final int ANSWER_ENCODED = 11;
    public static final int ANSWER_DECODED = 12;
    public static final int CLIENT = 13;
    public static final int COMPLETED = 14;
    /** The slots of a trace. */
    public static final int STAMPS = 15;

    /** What happened by each stamp, for the per-hop table: the time from the previous stamp to it is spent on that. */
    private static final String[] HOPS = {
        "submitted (the API call)",
        "client actor drains the submission",
        "client actor sends the batch",
        "batch encoded (Artery's outbound stream)",
        "batch decoded on the compute node",
        "node's router takes the bundle",
        "partition entity takes the batch (region, shard)",
        "engine worker starts the batch",
        "engine worker ends the batch (its commit included)",
        "partition answers",
        "router sends the answer bundle",
        "answer encoded (Artery's outbound stream)",
        "answer decoded on the client",
        "client actor takes the answer",
        "future completed on the API's executor",
    };

    private HopTrace() {
    }

    /** A new, empty trace. */
    public static long[] create() {
        return new long[STAMPS];
    }

    /** Stamps {@code hop} of {@code trace} now; nothing when the batch is not traced. */
    public static void stamp(long[] trace, int hop) {
        if (trace != null) {
            trace[hop] = System.nanoTime();
        }
    }

    /** What is done by {@code hop}, as the per-hop table names it. */
    public static String hopName(int hop) {
        return HOPS[hop];
    }
}
