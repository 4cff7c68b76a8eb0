package dev.dex.rdma;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.rdma.FaultPlan.Kind;

/**
 * A {@link RemoteMemory} that fails and delays the verbs a {@link FaultPlan} chooses, for tests and for operators who
 * want to see what a flaky fabric does to the index. A failing verb throws a {@link FabricException} worded as the
 * tcp transport's timeout, which is what the index meets when a memory server does not answer: "the verb may or may
 * not have taken effect". Both halves of that sentence happen here: a read, a fetch-and-add and most failing writes
 * and compare-and-swaps fail before they reach the memory server; a {@link FaultPlan#applyFirst() fraction} of the
 * failing writes and compare-and-swaps are applied first and fail afterwards, as if the answer was lost. (A failing
 * fetch-and-add is never applied: the index uses it for counters where a skipped number changes nothing.)
 *
 * <p>{@link #enabled(boolean) enabled(false)} stops every fault and delay, for example before a run's final checks.
 *
 * <pre>
 * Concurrency: every verb may come from any thread. The switch is a volatile flag, read once per verb. The n-th
 * matching verb is found by one atomic counter that every matching verb increments while the switch is on, so
 * exactly one verb sees n. Rate draws come from a random source per thread, split from one seeded root under the
 * root's monitor when the thread issues its first verb: one thread's draws repeat from run to run; with several
 * threads, which thread gets which split depends on their timing. Fault counters are LongAdders, exact once the
 * verbs have returned.
 * </pre>
 */
public final class FaultInjectingRemoteMemory extends ForwardingRemoteMemory {
    /** What {@link #decide} says about a verb. */
    private static final int PASS = 0;
    private static final int FAIL = 1;
    private static final int APPLY_THEN_FAIL = 2;
    /** Delays from this length on park the thread instead of spinning. */
    private static final long PARK_FROM_NANOS = TimeUnit.MICROSECONDS.toNanos(50);

    private final FaultPlan plan;
    private final AtomicLong matched = new AtomicLong();
    private final LongAdder[] injected = new LongAdder[Kind.values().length];
    private final LongAdder appliedFirst = new LongAdder();
    private final SplittableRandom root;
    private final ThreadLocal<SplittableRandom> random;
    /** The faults still to come in a row on each thread ({@link FaultPlan#burst}). */
    private final ThreadLocal<int[]> bursts = ThreadLocal.withInitial(() -> new int[1]);
    private volatile boolean enabled = true;

    /** Wraps {@code delegate}; injects from the start ({@link #enabled(boolean)} turns that off). */
    public FaultInjectingRemoteMemory(RemoteMemory delegate, FaultPlan plan) {
        super(delegate);
        if (plan == null) {
            throw new IllegalArgumentException("no fault plan");
        }
        this.plan = plan;
        this.root = new SplittableRandom(plan.seed());
        this.random = ThreadLocal.withInitial(this::split);
        for (int k = 0; k < injected.length; k++) {
            injected[k] = new LongAdder();
        }
    }

    private SplittableRandom split() {
        synchronized (root) {
            return root.split();
        }
    }

    public FaultPlan plan() {
        return plan;
    }

    /** Turns faults and delays on or off; verbs already past the check are not affected. */
    public void enabled(boolean on) {
        enabled = on;
    }

    public boolean enabled() {
        return enabled;
    }

    /** Faults injected into verbs of {@code kind} so far. */
    public long injected(Kind kind) {
        return injected[kind.ordinal()].sum();
    }

    /** Faults injected so far, every kind. */
    public long injected() {
        long sum = 0;
        for (LongAdder adder : injected) {
            sum += adder.sum();
        }
        return sum;
    }

    /** Of the faults injected, those whose verb was applied before it failed. */
    public long appliedBeforeFailing() {
        return appliedFirst.sum();
    }

    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        if (decide(Kind.READ, address) != PASS) {
            throw fault(Kind.READ, address);
        }
        super.read(address, dst, dstOffset, length);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        int decision = decide(Kind.WRITE, address);
        if (decision != FAIL) {
            super.write(address, src, srcOffset, length);
        }
        if (decision != PASS) {
            throw fault(Kind.WRITE, address);
        }
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        int decision = decide(Kind.CAS, address);
        if (decision == FAIL) {
            throw fault(Kind.CAS, address);
        }
        long found = super.compareAndSwap(address, expected, desired);
        if (decision == APPLY_THEN_FAIL) {
            throw fault(Kind.CAS, address);
        }
        return found;
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        if (decide(Kind.FAA, address) != PASS) {
            throw fault(Kind.FAA, address);
        }
        return super.fetchAndAdd(address, delta);
    }

    /** Delays a matching verb, and says whether it fails and whether it is applied first; counts the fault. */
    private int decide(Kind kind, long address) {
        if (!enabled || !plan.matches(kind, address)) {
            return PASS;
        }
        delay(plan.delayNanos());
        int[] burst = bursts.get();
        boolean fail = burst[0] > 0;
        if (fail) {
            burst[0]--;
        } else if (plan.nthVerb() > 0 && matched.incrementAndGet() == plan.nthVerb()) {
            fail = true;
            burst[0] = plan.burst() - 1;
        }
        double rate = plan.rate();
        if (!fail && rate > 0) {
            fail = rate >= 1 || random.get().nextDouble() < rate;
            if (fail) {
                burst[0] = plan.burst() - 1;
            }
        }
        if (!fail) {
            return PASS;
        }
        injected[kind.ordinal()].increment();
        double applyFirst = plan.applyFirst();
        boolean apply = (kind == Kind.WRITE || kind == Kind.CAS) && applyFirst > 0
                && (applyFirst >= 1 || random.get().nextDouble() < applyFirst);
        if (apply) {
            appliedFirst.increment();
            return APPLY_THEN_FAIL;
        }
        return FAIL;
    }

    private static void delay(long nanos) {
        if (nanos >= PARK_FROM_NANOS) {
            long deadline = System.nanoTime() + nanos;
            for (long left = nanos; left > 0; left = deadline - System.nanoTime()) {
                LockSupport.parkNanos(left);
            }
        } else {
            VerbChecks.spin(nanos);
        }
    }

    private static FabricException fault(Kind kind, long address) {
        return new FabricException("memory server " + GlobalAddress.serverId(address) + " did not answer a "
                + kind.name() + " (fault injected); the verb may or may not have taken effect");
    }
}
