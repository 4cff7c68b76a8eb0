package dev.dex.rdma.tcp;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.rdma.FabricException;

/**
 * One verb in flight: what the calling thread asks, and what the event loop answers. Each calling thread
 * reuses one call for all its verbs, so a verb allocates nothing; a call whose wait timed out is never
 * reused (the event loop may still hold it).
 *
 * <p>Concurrency: the caller writes the request fields, then hands the call to a connection's queue (a
 * release); the event loop reads them after taking it from the queue (an acquire). The state word decides
 * who owns the result fields: the event loop moves {@code WAITING -> COMPLETING}, fills the result (and the
 * caller's destination buffer), then publishes {@code DONE} with a volatile write; a caller that gives up
 * moves {@code WAITING -> ABANDONED} instead, after which the event loop touches nothing of the call. The
 * caller spins for a while, then announces {@code parked} before it parks; the completer writes {@code DONE}
 * before it reads {@code parked}, so one of the two always sees the other and no wake-up is lost. The thread to wake
 * is written before {@code parked} and read after it, so the completer wakes the thread that waits.
 */
final class VerbCall {
    static final int WAITING = 0;
    static final int COMPLETING = 1;
    static final int DONE = 2;
    static final int ABANDONED = 3;

    private static final VarHandle STATE;

    /**
     * Threads of this JVM waiting for an answer right now. A thread spins only when it finds at most half the
     * cores' worth of waiters (itself included): spinning beats a park and wake-up while the event loops keep a
     * core, but under load it steals that core and every answer comes later, so loaded threads park at once.
     */
    private static final AtomicInteger WAITERS = new AtomicInteger();
    private static final int MAX_SPINNERS = Math.max(1, Runtime.getRuntime().availableProcessors() / 2);

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(VerbCall.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The thread to wake: the one that waits (a batch may be started by one thread and awaited by another). */
    private Thread owner = Thread.currentThread();
    private volatile int state = DONE;
    private volatile boolean parked;

    // The request, written by the caller before submission.
    byte op;
    long address;
    int count;
    long operand1;
    long operand2;
    DirectBuffer src;
    int srcOffset;
    MutableDirectBuffer dst;
    int dstOffset;

    // Set by the event loop when it sends the request.
    long requestId;

    // The answer, valid once DONE.
    byte status;
    long value;
    long extra;
    /** A HELLO's second payload word: the server's largest transfer (0 from a server that does not say). */
    long extra2;
    /** A HELLO's third payload word: the region's incarnation (0 from a server that does not say). */
    long extra3;
    String reason;
    FabricException failure;

    /** Starts a new verb; the call must be DONE (never ABANDONED). */
    void prepare(byte newOp, long newAddress, int newCount, long newOperand1, long newOperand2) {
        op = newOp;
        address = newAddress;
        count = newCount;
        operand1 = newOperand1;
        operand2 = newOperand2;
        src = null;
        dst = null;
        reason = null;
        failure = null;
        parked = false;
        state = WAITING;
    }

    /** Starts the verb in {@code slot} of {@code batch}; the call must be DONE (never ABANDONED). */
    void prepare(dev.dex.rdma.VerbBatch batch, int slot) {
        long address = batch.address(slot);
        switch (batch.op(slot)) {
            case dev.dex.rdma.VerbBatch.READ -> {
                prepare(TcpFrameDescriptor.OP_READ, address, batch.length(slot), 0, 0);
                dst = batch.destination(slot);
                dstOffset = batch.bufferOffset(slot);
            }
            case dev.dex.rdma.VerbBatch.WRITE -> {
                prepare(TcpFrameDescriptor.OP_WRITE, address, batch.length(slot), 0, 0);
                src = batch.source(slot);
                srcOffset = batch.bufferOffset(slot);
            }
            case dev.dex.rdma.VerbBatch.COMPARE_AND_SWAP -> prepare(TcpFrameDescriptor.OP_CAS, address, 0, batch.operand1(slot), batch.operand2(slot));
            default -> prepare(TcpFrameDescriptor.OP_FAA, address, 0, batch.operand1(slot), 0);
        }
    }

    boolean isAbandoned() {
        return state == ABANDONED;
    }

    /** Event loop: claims the result fields; false when the caller gave up or another completion won. */
    boolean beginCompletion() {
        return STATE.compareAndSet(this, WAITING, COMPLETING);
    }

    /** Event loop: publishes the result and wakes the caller. */
    void finish() {
        state = DONE;
        if (parked) {
            LockSupport.unpark(owner);
        }
    }

    /** Event loop: ends the verb with a transport failure, unless it already ended. */
    void fail(FabricException cause) {
        if (beginCompletion()) {
            failure = cause;
            finish();
        }
    }

    /**
     * Caller: waits until the verb is done; spins for {@code spinNanos} first unless more than half the cores'
     * worth of threads are waiting. Returns false when the deadline passed and the call was abandoned (the
     * event loop will ignore it from then on).
     */
    boolean await(long spinNanos, long deadline) {
        if (state == DONE) {
            return true;
        }
        int waiters = WAITERS.incrementAndGet();
        try {
            if (waiters <= MAX_SPINNERS) {
                long spinUntil = System.nanoTime() + spinNanos;
                while (state != DONE && System.nanoTime() - spinUntil < 0) {
                    Thread.onSpinWait();
                }
            }
            return parkUntilDone(deadline);
        } finally {
            WAITERS.decrementAndGet();
        }
    }

    private boolean parkUntilDone(long deadline) {
        while (state != DONE) {
            long now = System.nanoTime();
            if (now - deadline >= 0) {
                if (STATE.compareAndSet(this, WAITING, ABANDONED)) {
                    return false;
                }
                // Being completed right now: the result is a few stores away.
                while (state != DONE) {
                    Thread.onSpinWait();
                }
                return true;
            }
            owner = Thread.currentThread(); // published to the completer by the volatile write below
            parked = true;
            if (state != DONE) {
                LockSupport.parkNanos(this, deadline - now);
            }
        }
        return true;
    }
}
