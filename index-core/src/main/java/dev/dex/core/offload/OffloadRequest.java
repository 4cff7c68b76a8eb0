package dev.dex.core.offload;

import java.util.concurrent.locks.LockSupport;

import dev.dex.core.node.LeafOps;
import dev.dex.core.tree.TreeSettings;

/**
 * One offloaded operation (see {@code docs/offloading.md}), in one message: a {@link #READ} (a lookup) walks from
 * the start node to the leaf and reports the path and the outcome, which the compute side validates afterwards; a
 * {@link #WRITE} walks the same way and runs the operation at the leaf, reporting the path and the outcome (the
 * compute side excluded, before sending, every cached copy of a node below the start node).
 *
 * <p>Reused: each compute-side session owns one request and sends it again and again. Not thread-safe
 * except for the hand-over: the compute thread fills the input fields and submits; the memory-side
 * thread fills the output fields and {@link #complete()}s, a volatile write that publishes them; the
 * compute thread {@link #await()}s, a volatile read, and then reads them.
 */
public final class OffloadRequest {
    /** Phase: walk, report the path and look the key up (a lookup in one message). */
    public static final int READ = 2;
    /** Phase: walk, report the path and run the write at the leaf (a write in one message). */
    public static final int WRITE = 3;


    /** Done; {@link #found} and {@link #value} hold the outcome. */
    public static final int OK = 0;
    /** The insert needs a split (full leaf): fall back to the caching path. */
    public static final int NEEDS_SPLIT = 1;
    /** A node on the way does not cover the key. */
    public static final int FENCE_MISMATCH = 2;
    /** The path leaves the memory server of the start node. */
    public static final int CROSS_SERVER = 3;
    /** A node on the path is being written (by another memory-side thread) or is remotely locked. */
    public static final int STALE = 4;
    /**
     * The channel gave up on the request: not delivered (a full queue, an unreachable server, a refused message),
     * or no answer in time or a lost connection, when it may have run or may still run ({@link #mayRunUntil()}).
     */
    public static final int REJECTED = 5;

    /**
     * Request plus reply on the wire for an 8-byte key: header fields, and one address and version per path node of
     * the reply; a wider key adds its further words.
     */
    public static final int FIXED_BYTES = 64;

    // ---- input
    int phase;
    int op;
    /** The key's words ({@code KeyFormat}); one word for an 8-byte key. */
    long[] key = new long[1];
    long newValue;
    long start;
    final long[] path = new long[TreeSettings.MAX_HEIGHT];
    final long[] versions = new long[TreeSettings.MAX_HEIGHT];
    int pathLength;
    /** The partition the sender holds and operates on, and its owner epoch there (checked by the memory side). */
    int partition;
    long epoch;

    // ---- output
    int status;
    boolean found;
    long value;

    /** System.nanoTime until which the memory side may still run this request after its channel gave up (0: it cannot). */
    long mayRunUntil;

    private volatile boolean done;
    private volatile Thread waiter;

    /** Sets up write {@code op} (a LeafOps code that may change the leaf) on {@code key} from the node at {@code start}. */
    public void write(int op, long[] key, long newValue, long start) {
        set(WRITE, op, key, newValue, start);
    }

    /** Sets up a lookup of {@code key} (its words) in one message from the node at {@code start}. */
    public void read(long[] key, long start) {
        set(READ, LeafOps.LOOKUP, key, 0, start);
    }

    /** {@link #write(int, long[], long, long)} of an 8-byte key. */
    public void write(int op, long key, long newValue, long start) {
        write(op, new long[] {key}, newValue, start);
    }

    /** {@link #read(long[], long)} of an 8-byte key. */
    public void read(long key, long start) {
        read(new long[] {key}, start);
    }

    private void set(int phase, int op, long[] key, long newValue, long start) {
        this.mayRunUntil = 0;
        this.phase = phase;
        this.op = op;
        if (this.key.length != key.length) {
            this.key = new long[key.length];
        }
        System.arraycopy(key, 0, this.key, 0, key.length);
        this.newValue = newValue;
        this.start = start;
        this.pathLength = 0;
        reset();
    }

    /**
     * Names the partition the operation is in and the sender's owner epoch of it: a memory server runs the
     * request only for the partition's current owner ({@code OwnershipTable}). Set before {@link #write} or
     * {@link #read}.
     */
    public void owner(int partition, long epoch) {
        this.partition = partition;
        this.epoch = epoch;
    }

    private void reset() {
        status = OK;
        found = false;
        value = 0;
        done = false;
        waiter = Thread.currentThread();
    }

    /** Bytes of this request and its reply, for the verb counters (the path travels in the reply). */
    public int wireBytes() {
        return FIXED_BYTES + Long.BYTES * (key.length - 1) + 2 * Long.BYTES * pathLength;
    }

    public int phase() {
        return phase;
    }

    public int op() {
        return op;
    }

    /** The key's words (the request's own array: not to be changed). */
    public long[] key() {
        return key;
    }

    public int partition() {
        return partition;
    }

    public long epoch() {
        return epoch;
    }

    public long start() {
        return start;
    }

    public int status() {
        return status;
    }

    public boolean found() {
        return found;
    }

    public long value() {
        return value;
    }

    public int pathLength() {
        return pathLength;
    }

    /** Address of path node {@code i}: 0 is the start node, {@code pathLength - 1} the leaf. */
    public long pathNode(int i) {
        return path[i];
    }

    /**
     * Records until when ({@link System#nanoTime}) the memory side may still run this request should the channel give
     * up on it ({@link #REJECTED}) without knowing whether it ran: its send time plus the sender's whole timeout (the
     * memory node starts nothing after half the timeout by its own clock, which may lag by up to half). A channel
     * that knows the request will not run (the server answered, or it was never sent) sets 0. A sender whose write
     * was rejected waits until then before it writes into the same leaves itself.
     */
    public void mayRunUntil(long nanoTime) {
        this.mayRunUntil = nanoTime;
    }

    /** See {@link #mayRunUntil(long)}; 0 when the request cannot run after its answer. */
    public long mayRunUntil() {
        return mayRunUntil;
    }

    public long newValue() {
        return newValue;
    }

    /** Version of path node {@code i} as the memory side saw it. */
    public long pathVersion(int i) {
        return versions[i];
    }

    /**
     * A request rebuilt on a memory server from a message (the cluster's channel): the phase and the
     * operation, the partition and owner epoch its sender names. A read is a lookup; a write is an operation
     * that may change the leaf. Phases 0 and 1 (a probe and an execute, the two messages of a write before
     * writes went in one) are refused by name.
     */
    public static OffloadRequest received(int phase, int op, int partition, long epoch, long key, long newValue, long start) {
        return received(phase, op, partition, epoch, new long[] {key}, newValue, start);
    }

    /** {@link #received(int, int, int, long, long, long, long)} of a key of any width: its words (1 to 8), kept. */
    public static OffloadRequest received(int phase, int op, int partition, long epoch, long[] key, long newValue, long start) {
        if (key == null || key.length < 1 || key.length > dev.dex.core.node.KeyFormat.MAX_BYTES / 8) {
            throw new IllegalArgumentException("bad offload request: a key of " + (key == null ? 0 : key.length) + " words");
        }
        if (phase == 0 || phase == 1) {
            throw new IllegalArgumentException("an offloaded write in two messages (phase " + phase + "), from a compute node"
                    + " of an older build: writes now go in one (WRITE, phase " + WRITE + ")");
        }
        if (phase != READ && phase != WRITE || !LeafOps.isValid(op)
                || phase == READ && op != LeafOps.LOOKUP || phase == WRITE && op == LeafOps.LOOKUP) {
            throw new IllegalArgumentException("bad offload request: phase " + phase + ", op " + op);
        }
        OffloadRequest request = new OffloadRequest();
        request.phase = phase;
        request.op = op;
        request.partition = partition;
        request.epoch = epoch;
        request.key = key;
        request.newValue = newValue;
        request.start = start;
        request.waiter = null;
        return request;
    }

    /**
     * Fills in the memory server's answer carried back by a message and wakes the sender (compute side of
     * the cluster's channel).
     */
    public void answer(int status, boolean found, long value, long[] path, long[] versions, int pathLength) {
        this.status = status;
        this.found = found;
        this.value = value;
        if (status == OK) {
            if (pathLength < 1 || pathLength > TreeSettings.MAX_HEIGHT) {
                throw new IllegalArgumentException("bad offload path of length " + pathLength);
            }
            System.arraycopy(path, 0, this.path, 0, pathLength);
            System.arraycopy(versions, 0, this.versions, 0, pathLength);
            this.pathLength = pathLength;
        }
        complete();
    }

    /** Answers without running it: the channel could not deliver it (a full queue, an unreachable server). */
    public void refuse() {
        reject();
    }

    /** Marks the request answered (memory side). */
    void complete() {
        done = true;
        Thread t = waiter;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    /** Answers without running it (queue full). */
    void reject() {
        status = REJECTED;
        complete();
    }

    /**
     * Waits for the answer: spins for up to {@link #SPIN_NANOS} (an answer usually comes within a few
     * microseconds, far less than a park and wake-up costs), then parks.
     */
    public void await() {
        if (!done) {
            long deadline = System.nanoTime() + SPIN_NANOS;
            while (!done && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            while (!done) {
                LockSupport.park(this);
            }
        }
    }

    /** How long a waiting sender spins before it parks. */
    static final long SPIN_NANOS = 50_000;
}
