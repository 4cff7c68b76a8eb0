package dev.dex.rdma;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * Verbs issued together: the caller adds independent verbs, {@link RemoteMemory#start starts} them all at once and
 * {@link #await awaits} them all, instead of waiting for each one's round trip before it sends the next. A transport
 * that can pipeline ({@code tcp}) puts the whole batch on the wire with one flush and wakes the caller once for it; a
 * transport whose latency is injected ({@code local}, {@code shm}) pays it once per batch, as verbs in flight together
 * on a NIC do; any other runs the verbs one after the other ({@link #runEach}), which is always correct.
 *
 * <p>What a batch promises: every verb of it has completed (or failed) when {@link #await} returns, and every verb
 * issued before {@link RemoteMemory#start} by the same thread took effect before any of them. The verbs of one batch
 * are <em>not</em> ordered among themselves: a read and a write of the same bytes in one batch may see either order,
 * so put only independent verbs in a batch. Each verb is counted in {@link RemoteMemory#counters()} as it would be
 * alone.
 *
 * <p>Outcomes are per verb: {@link #failure(int)} is the verb's exception ({@link FabricException} for the transport,
 * {@link IllegalArgumentException} for an address outside the regions or a misaligned atomic), as the single verb
 * would have thrown; {@link #value(int)} is a compare-and-swap's or fetch-and-add's result. A read that fails because
 * its connection broke is retried as a single read is (the transport's failover rules).
 *
 * <p>Reuse: a batch is started once; {@link #clear()} empties it for its next use (the arrays it grew stay).
 *
 * <p>The methods below "for transports" are what a transport and the layers over it use to run a batch and record its
 * outcomes; callers that only issue verbs need none of them.
 *
 * <pre>
 * Concurrency: not thread-safe. A batch is used by one thread at a time: the one that adds its verbs and starts it
 * (a transport may record outcomes then, on that thread), then the one that awaits it (outcomes recorded on that
 * thread); a hand-over between the two needs a happens-before edge, as any object's does. The transport's event loops
 * write a verb's answer into the transport's own state, never into the batch.
 * </pre>
 */
public final class VerbBatch {
    public static final byte READ = 1;
    public static final byte WRITE = 2;
    public static final byte COMPARE_AND_SWAP = 3;
    public static final byte FETCH_AND_ADD = 4;

    /** What a transport left in flight: {@link #await} calls it once, and it completes or fails every verb. */
    public interface Pending {
        void await(VerbBatch batch);
    }

    private byte[] ops;
    private long[] addresses;
    private int[] lengths;
    private long[] operands1;
    private long[] operands2;
    private Object[] buffers;
    private int[] offsets;
    private long[] values;
    private RuntimeException[] failures;
    private boolean[] completed;
    private int size;
    private Pending pending;
    private boolean started;
    private final List<Consumer<VerbBatch>> completions = new ArrayList<>(2);
    /** What the transport that ran this batch last keeps with it (its calls), reused by the next run. */
    private Object transportState;

    public VerbBatch() {
        this(16);
    }

    public VerbBatch(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("a batch holds at least one verb: " + capacity);
        }
        ops = new byte[capacity];
        addresses = new long[capacity];
        lengths = new int[capacity];
        operands1 = new long[capacity];
        operands2 = new long[capacity];
        buffers = new Object[capacity];
        offsets = new int[capacity];
        values = new long[capacity];
        failures = new RuntimeException[capacity];
        completed = new boolean[capacity];
    }

    /** Adds a read of {@code length} bytes at {@code address} into {@code dst[dstOffset..]}; returns its slot. */
    public int read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        return add(READ, address, length, 0, 0, dst, dstOffset);
    }

    /** Adds a write of {@code src[srcOffset..srcOffset+length)} to {@code address}; returns its slot. */
    public int write(long address, DirectBuffer src, int srcOffset, int length) {
        return add(WRITE, address, length, 0, 0, src, srcOffset);
    }

    /** Adds a compare-and-swap of the word at {@code address}; its {@link #value} is the word found. */
    public int compareAndSwap(long address, long expected, long desired) {
        return add(COMPARE_AND_SWAP, address, Long.BYTES, expected, desired, null, 0);
    }

    /** Adds a fetch-and-add to the word at {@code address}; its {@link #value} is the word before. */
    public int fetchAndAdd(long address, long delta) {
        return add(FETCH_AND_ADD, address, Long.BYTES, delta, 0, null, 0);
    }

    private int add(byte op, long address, int length, long operand1, long operand2, Object buffer, int offset) {
        if (started) {
            throw new IllegalStateException("a batch takes no verb between its start and its clear()");
        }
        if ((op == READ || op == WRITE) && (buffer == null || length < 0)) {
            throw new IllegalArgumentException(buffer == null ? "a read or write needs a buffer" : "negative length " + length);
        }
        if (size == ops.length) {
            grow();
        }
        int slot = size++;
        ops[slot] = op;
        addresses[slot] = address;
        lengths[slot] = length;
        operands1[slot] = operand1;
        operands2[slot] = operand2;
        buffers[slot] = buffer;
        offsets[slot] = offset;
        values[slot] = 0;
        failures[slot] = null;
        completed[slot] = false;
        return slot;
    }

    private void grow() {
        int n = ops.length * 2;
        ops = Arrays.copyOf(ops, n);
        addresses = Arrays.copyOf(addresses, n);
        lengths = Arrays.copyOf(lengths, n);
        operands1 = Arrays.copyOf(operands1, n);
        operands2 = Arrays.copyOf(operands2, n);
        buffers = Arrays.copyOf(buffers, n);
        offsets = Arrays.copyOf(offsets, n);
        values = Arrays.copyOf(values, n);
        failures = Arrays.copyOf(failures, n);
        completed = Arrays.copyOf(completed, n);
    }

    /** Verbs in the batch. */
    public int size() {
        return size;
    }

    public boolean isEmpty() {
        return size == 0;
    }

    /**
     * Waits until every verb has completed or failed, then runs what the layers that started it asked to run at the
     * end ({@link #onCompletion}), once. Never throws for a failed verb: see {@link #failure}. Awaiting twice returns
     * at once; awaiting a batch that was not started fails its verbs as never issued.
     */
    public void await() {
        Pending left = pending;
        pending = null;
        if (left != null) {
            left.await(this);
        }
        for (int slot = 0; slot < size; slot++) {
            if (!completed[slot]) {
                fail(slot, new IllegalStateException("verb " + slot + " of the batch was never issued"));
            }
        }
        if (!completions.isEmpty()) {
            List<Consumer<VerbBatch>> run = new ArrayList<>(completions);
            completions.clear();
            for (int i = run.size() - 1; i >= 0; i--) {
                run.get(i).accept(this);
            }
        }
    }

    /** The failure of the verb in {@code slot}, or null when it completed. Only after {@link #await}. */
    public RuntimeException failure(int slot) {
        check(slot);
        return failures[slot];
    }

    /** The first failed verb's failure, or null when all completed. */
    public RuntimeException firstFailure() {
        for (int slot = 0; slot < size; slot++) {
            if (failures[slot] != null) {
                return failures[slot];
            }
        }
        return null;
    }

    /** Throws the first failed verb's failure, if any. */
    public void throwIfFailed() {
        RuntimeException failure = firstFailure();
        if (failure != null) {
            throw failure;
        }
    }

    /** A compare-and-swap's or fetch-and-add's result; throws the verb's failure when it failed. */
    public long value(int slot) {
        check(slot);
        if (failures[slot] != null) {
            throw failures[slot];
        }
        return values[slot];
    }

    /** Empties the batch for its next use. A started batch must be awaited first. */
    public void clear() {
        if (pending != null) {
            throw new IllegalStateException("await the batch before clearing it");
        }
        Arrays.fill(buffers, 0, size, null);
        Arrays.fill(failures, 0, size, null);
        size = 0;
        started = false;
        completions.clear();
    }

    private void check(int slot) {
        if (slot < 0 || slot >= size) {
            throw new IndexOutOfBoundsException("slot " + slot + " of a batch of " + size);
        }
    }

    // ---- for transports and the layers that wrap them

    /**
     * Runs every verb not yet completed on {@code memory}, one after the other, recording each outcome: the way of a
     * transport that cannot keep verbs in flight together, and of a layer that must see each verb
     * ({@link ForwardingRemoteMemory}).
     */
    public void runEach(RemoteMemory memory) {
        started();
        for (int slot = 0; slot < size; slot++) {
            if (!completed[slot]) {
                runOne(memory, slot);
            }
        }
    }

    /** Runs the verb in {@code slot} alone on {@code memory} and records its outcome. */
    public void runOne(RemoteMemory memory, int slot) {
        try {
            switch (ops[slot]) {
                case READ -> memory.read(addresses[slot], (MutableDirectBuffer) buffers[slot], offsets[slot], lengths[slot]);
                case WRITE -> memory.write(addresses[slot], (DirectBuffer) buffers[slot], offsets[slot], lengths[slot]);
                case COMPARE_AND_SWAP -> values[slot] = memory.compareAndSwap(addresses[slot], operands1[slot], operands2[slot]);
                default -> values[slot] = memory.fetchAndAdd(addresses[slot], operands1[slot]);
            }
            completed[slot] = true;
        } catch (RuntimeException e) {
            fail(slot, e);
        }
    }

    /**
     * Marks the batch started: it takes no more verbs until cleared.
     *
     * @throws IllegalStateException when it was started already (a batch is started once, then cleared)
     */
    public void started() {
        if (started) {
            throw new IllegalStateException("the batch was started already: await it and clear() it before starting it again");
        }
        started = true;
    }

    /** Marks the batch {@link #started()}, with the transport's verbs in flight, completed by {@link #await}. */
    public void pending(Pending inFlight) {
        started();
        pending = inFlight;
    }

    /** Runs {@code hook} when the batch is awaited, after the verbs completed; hooks added later run first. */
    public void onCompletion(Consumer<VerbBatch> hook) {
        completions.add(hook);
    }

    public byte op(int slot) {
        return ops[slot];
    }

    public long address(int slot) {
        return addresses[slot];
    }

    public int length(int slot) {
        return lengths[slot];
    }

    /** A compare-and-swap's expected word, or a fetch-and-add's delta. */
    public long operand1(int slot) {
        return operands1[slot];
    }

    /** A compare-and-swap's desired word. */
    public long operand2(int slot) {
        return operands2[slot];
    }

    public MutableDirectBuffer destination(int slot) {
        return (MutableDirectBuffer) buffers[slot];
    }

    public DirectBuffer source(int slot) {
        return (DirectBuffer) buffers[slot];
    }

    public int bufferOffset(int slot) {
        return offsets[slot];
    }

    public boolean completed(int slot) {
        return completed[slot];
    }

    /** Records the verb in {@code slot} as completed, with a compare-and-swap's or fetch-and-add's result. */
    public void complete(int slot, long value) {
        values[slot] = value;
        failures[slot] = null;
        completed[slot] = true;
    }

    /** Records the verb in {@code slot} as failed. */
    public void fail(int slot, RuntimeException failure) {
        failures[slot] = failure;
        completed[slot] = true;
    }

    /** Whether the verb is a write, a compare-and-swap or a fetch-and-add. */
    public boolean writes(int slot) {
        return ops[slot] != READ;
    }

    public Object transportState() {
        return transportState;
    }

    public void transportState(Object state) {
        transportState = state;
    }
}
