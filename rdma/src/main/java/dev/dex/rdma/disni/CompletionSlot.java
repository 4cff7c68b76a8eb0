package dev.dex.rdma.disni;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.LockSupport;

/**
 * Where the completion of one thread's signaled work request arrives: the thread {@link #arm arms} the slot
 * with a fresh work request id, posts the request under that id, and {@link #await awaits} it; the
 * completion-queue thread {@link #complete completes} it by id.
 *
 * <p>Work request ids: {@code [0][31-bit slot id][32-bit sequence]}. The slot id finds the slot, the
 * sequence (never 0, so no id is 0) tells this request from an earlier one of the same thread whose
 * completion comes late, after its waiter gave up; such a completion is dropped.
 *
 * <p>Concurrency: one owner thread arms and awaits; any thread completes. {@code state} holds the armed id
 * while a request is outstanding and {@code COMPLETED | status} once it completed; a completion moves it
 * with a compare-and-set from exactly the id it carries, so a late completion of an earlier id finds no
 * match, and a waiter that gives up disarms with a compare-and-set too, so a completion racing with the
 * timeout is either taken or dropped, never half seen. The completer unparks the owner after its store.
 */
final class CompletionSlot {
    /** {@link #await} result when no completion arrived in time. */
    static final int TIMED_OUT = -1;

    private static final long IDLE = 0;
    private static final long COMPLETED = Long.MIN_VALUE;
    private static final long SEQUENCE_MASK = 0xFFFF_FFFFL;
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(CompletionSlot.class, "state", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final int id;
    private final Thread owner;
    private int sequence;
    @SuppressWarnings("unused")
    private volatile long state = IDLE;

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

    /** Owner only: a fresh work request id, armed. The previous request must have completed or timed out. */
    long arm() {
        sequence++;
        if (sequence == 0) {
            sequence = 1;
        }
        long wrId = (long) id << 32 | sequence & SEQUENCE_MASK;
        STATE.setVolatile(this, wrId);
        return wrId;
    }

    /** Any thread: the completion of work request {@code wrId} with {@code status} (0 is success). */
    void complete(long wrId, int status) {
        if (STATE.compareAndSet(this, wrId, COMPLETED | status & SEQUENCE_MASK)) {
            LockSupport.unpark(owner);
        }
    }

    /** Owner only: disarms {@code wrId} whose request was never posted; a completion for it is dropped. */
    void cancel(long wrId) {
        STATE.compareAndSet(this, wrId, IDLE);
    }

    /**
     * Owner only: waits for the completion of {@code wrId}, spinning for {@code spinNanos} and then parking.
     *
     * @return the completion status, or {@link #TIMED_OUT} when none arrived within {@code timeoutNanos}; the
     *         slot is idle again either way
     */
    int await(long wrId, long timeoutNanos, long spinNanos) {
        long start = System.nanoTime();
        while (true) {
            long current = (long) STATE.getVolatile(this);
            if (current != wrId) {
                STATE.setVolatile(this, IDLE);
                return (int) current;
            }
            long waited = System.nanoTime() - start;
            if (waited >= timeoutNanos) {
                if (STATE.compareAndSet(this, wrId, IDLE)) {
                    return TIMED_OUT;
                }
            } else if (waited < spinNanos) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(this, timeoutNanos - waited);
            }
        }
    }
}
