package dev.dex.rdma.disni;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

/**
 * Where the completions of one thread's signaled work requests arrive: the thread {@link #arm arms} the slot
 * with a round of fresh work request ids (one for a single verb, up to {@link #CAPACITY} for work requests
 * posted together), posts the requests under those ids, and {@link #await awaits} them; the completion-queue
 * thread {@link #complete completes} each by its id.
 *
 * <p>Work request ids: {@code [0][31-bit slot id][26-bit round][6-bit entry]}. The slot id finds the slot,
 * the entry the request's place in its round, and the round (never 0, so no id is 0) tells this request
 * from one of an earlier round of the same thread whose completion comes late, after its waiter gave up;
 * such a completion is dropped.
 *
 * <p>Concurrency: one owner thread arms and awaits; any thread completes. Each entry holds the armed id
 * while its request is outstanding and {@code COMPLETED | status} once it completed; a completion moves it
 * with a compare-and-set from exactly the id it carries, so a late completion of an earlier round finds no
 * match, and a waiter that gives up disarms each entry with a compare-and-set too, so a completion racing
 * with the timeout is either taken or dropped, never half seen. The completer unparks the owner after each
 * store it made; the owner checks every entry before it parks again.
 */
final class CompletionSlot {
    /** {@link #await} status of a request that did not complete in time. */
    static final int TIMED_OUT = -1;
    private static final int ENTRY_BITS = 6;
    /** Work requests one round may hold: as many as the entry field names. */
    static final int CAPACITY = 1 << ENTRY_BITS;

    private static final long IDLE = 0;
    private static final long COMPLETED = Long.MIN_VALUE;
    private static final long ENTRY_MASK = (1L << ENTRY_BITS) - 1;
    private static final int ROUND_MASK = (1 << 26) - 1;
    private static final long STATUS_MASK = 0xFFFF_FFFFL;

    private final int id;
    private final Thread owner;
    private final AtomicLongArray entries = new AtomicLongArray(CAPACITY);
    private final int[] single = new int[1];
    private int round;

    /** A slot owned by the calling thread. */
    CompletionSlot(int id) {
        if (id < 0) {
            throw new IllegalArgumentException("slot id must be >= 0: " + id);
        }
        this.id = id;
        this.owner = Thread.currentThread();
    }

    int id() {
        return id;
    }

    /** The slot id inside a work request id. */
    static int slotIdOf(long wrId) {
        return (int) (wrId >>> 32);
    }

    /** Owner only: one fresh work request id, armed. The previous round must have completed or timed out. */
    long arm() {
        return arm(1);
    }

    /**
     * Owner only: a round of {@code count} fresh work request ids, armed; the id of entry {@code i} is the returned
     * id plus {@code i}. The previous round must have completed or timed out.
     */
    long arm(int count) {
        if (count < 1 || count > CAPACITY) {
            throw new IllegalArgumentException("a round holds 1 to " + CAPACITY + " work requests: " + count);
        }
        round = round + 1 & ROUND_MASK;
        if (round == 0) {
            round = 1;
        }
        long first = (long) id << 32 | (long) round << ENTRY_BITS;
        for (int i = 0; i < count; i++) {
            entries.set(i, first + i);
        }
        return first;
    }

    /** Any thread: the completion of work request {@code wrId} with {@code status} (0 is success). */
    void complete(long wrId, int status) {
        int entry = (int) (wrId & ENTRY_MASK);
        if (entries.compareAndSet(entry, wrId, COMPLETED | status & STATUS_MASK)) {
            LockSupport.unpark(owner);
        }
    }

    /** Owner only: disarms {@code wrId} whose request was never posted; a completion for it is dropped. */
    void cancel(long wrId) {
        entries.compareAndSet((int) (wrId & ENTRY_MASK), wrId, IDLE);
    }

    /**
     * Owner only: waits for the completion of the single request {@code wrId}, spinning for {@code spinNanos} and then
     * parking.
     *
     * @return the completion status, or {@link #TIMED_OUT} when none arrived within {@code timeoutNanos}; the
     *         slot is idle again either way
     */
    int await(long wrId, long timeoutNanos, long spinNanos) {
        await(wrId, 1, single, timeoutNanos, spinNanos);
        return single[0];
    }

    /**
     * Owner only: waits for the completions of the round armed as {@code first} with {@code count} entries, spinning
     * for {@code spinNanos} and then parking; {@code status[i]} gets entry {@code i}'s completion status, or
     * {@link #TIMED_OUT} when it did not complete within {@code timeoutNanos}, or 0 when it was cancelled. The slot is
     * idle again either way.
     *
     * @return how many entries timed out
     */
    int await(long first, int count, int[] status, long timeoutNanos, long spinNanos) {
        // A request in flight is not given up for an interrupt: the flag is kept for the caller, and cleared while the
        // thread waits, since a thread whose flag is set does not park but spins.
        boolean interrupted = Thread.interrupted();
        try {
            long start = System.nanoTime();
            int done = 0; // entries below are collected
            while (true) {
                while (done < count) {
                    long current = entries.get(done);
                    if (current == first + done) {
                        break;
                    }
                    status[done] = (int) current;
                    entries.set(done, IDLE);
                    done++;
                }
                if (done == count) {
                    return 0;
                }
                long waited = System.nanoTime() - start;
                if (waited >= timeoutNanos) {
                    return giveUp(first, done, count, status);
                } else if (waited < spinNanos) {
                    Thread.onSpinWait();
                } else {
                    LockSupport.parkNanos(this, timeoutNanos - waited);
                    interrupted |= Thread.interrupted();
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Disarms entries {@code [from, count)}: those still armed time out, those that completed meanwhile report. */
    private int giveUp(long first, int from, int count, int[] status) {
        int timedOut = 0;
        for (int i = from; i < count; i++) {
            if (entries.compareAndSet(i, first + i, IDLE)) {
                status[i] = TIMED_OUT;
                timedOut++;
            } else {
                status[i] = (int) entries.get(i);
                entries.set(i, IDLE);
            }
        }
        return timedOut;
    }
}
