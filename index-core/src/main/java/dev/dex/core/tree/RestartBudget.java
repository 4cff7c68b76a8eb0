package dev.dex.core.tree;

import java.util.concurrent.TimeUnit;

/**
 * Counts the optimistic restarts of one operation and gives up once the operation has been restarting
 * for longer than {@link #GIVE_UP_NANOS}: a lock that is never released (its holder died) surfaces as
 * an error instead of a hang. The clock is read on the first restart and then every 1024th, so the
 * common case costs a counter increment.
 *
 * <p>Not thread-safe: one per session, used by the session's own thread.
 */
public final class RestartBudget {
    /** How long one operation may keep restarting before it gives up. */
    public static final long GIVE_UP_NANOS = TimeUnit.SECONDS.toNanos(60);

    private final String diagnosis;
    private int restarts;
    private long start;

    /** @param diagnosis what the give-up error says is wrong, e.g. which lock is never released */
    public RestartBudget(String diagnosis) {
        this.diagnosis = diagnosis;
    }

    /** Starts a new operation. */
    public void reset() {
        restarts = 0;
    }

    /**
     * Counts one restart of the current operation.
     *
     * @return the restarts of this operation so far, this one included
     * @throws IllegalStateException once the operation has restarted for longer than {@link #GIVE_UP_NANOS}
     */
    public int next() {
        int n = ++restarts;
        if (n == 1) {
            start = System.nanoTime();
        } else if ((n & 1023) == 0 && System.nanoTime() - start > GIVE_UP_NANOS) {
            throw new IllegalStateException("operation restarted " + n + " times in "
                    + TimeUnit.NANOSECONDS.toSeconds(GIVE_UP_NANOS) + " s: " + diagnosis);
        }
        return n;
    }

    /**
     * Counts one restart ({@link #next}) and waits before the retry: not at all for the first two, then a spin that
     * doubles with each restart up to 256 iterations, and a yield of the thread from the 17th on, so that a
     * latch holder on the same core gets to run.
     */
    public void backOff() {
        int n = next();
        if (n > 2) {
            for (int i = 1 << Math.min(n, 8); i > 0; i--) {
                Thread.onSpinWait();
            }
            if (n > 16) {
                Thread.yield();
            }
        }
    }
}
