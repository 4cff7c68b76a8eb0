package dev.dex.multijvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.LongPredicate;

import dev.dex.actors.client.DexClientApi;

/**
 * A write-intensive mix on the bulk-loaded keys, run by a thread of its own while a test changes the
 * cluster: uniform keys, {@code putPercent}% puts, the rest gets, {@code inFlight} operations outstanding.
 * A key has at most one write in flight, so its last acknowledged value is known ({@link KeyHistory}).
 *
 * <p>Every get is checked as it completes: it must return the last value acknowledged when it was sent or
 * a value sent since. Keys under {@link #relax} (those of a crashed compute node's partitions) may instead
 * return any value they were ever given, as acknowledged writes can be lost with a crashed cache. An
 * operation that fails (after the client's own retries: {@code NOT_HELD} and batch timeouts are retried,
 * see {@code DexClient}) is counted as a failure; no test expects one.
 *
 * <p>Writes never delete or insert, so the tree's shape does not change and every key stays present; unless the mix
 * {@link #deleting deletes} too: then a share of its writes are deletes (the key's history records {@link #ABSENT}), and
 * a put of a deleted key inserts it again, so leaves empty, merge and split.
 */
final class WriteMix implements AutoCloseable {
    private static final int EXAMPLES = 10;
    /** The mix's time line: operations completed, and the longest operation sent, in each 100 ms from its start. */
    private static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final int TICKS = 6_000;

    private final DexClientApi client;
    private final long keys;
    private final int putPercent;
    private final int inFlight;
    private final KeyHistory[] histories;
    private final Semaphore slots;
    private final Set<Long> writing = ConcurrentHashMap.newKeySet();
    private final AtomicLong nextValue = new AtomicLong(1L << 40);
    private final AtomicLong completed = new AtomicLong();
    private final AtomicLongArray completedPerTick = new AtomicLongArray(TICKS);
    private final AtomicLongArray longestPerTick = new AtomicLongArray(TICKS);
    private final AtomicLong puts = new AtomicLong();
    private final AtomicLong gets = new AtomicLong();
    private final AtomicLong staleReads = new AtomicLong();
    private final AtomicLong failureCount = new AtomicLong();
    private final AtomicLong violationCount = new AtomicLong();
    private final List<String> failures = Collections.synchronizedList(new ArrayList<>());
    private final List<String> violations = Collections.synchronizedList(new ArrayList<>());
    private volatile LongPredicate relaxed = key -> false;
    /** The share of writes, in percent, that are deletes ({@link #deleting}). */
    private volatile int deletePercent;
    private final AtomicLong deletes = new AtomicLong();
    /** {@link #hot}: the share of operations, in percent, on the first hotKeys keys. */
    private long hotKeys;
    private int hotPercent;
    private volatile boolean running;
    private Thread thread;
    private long startNanos;
    private long stopNanos;

    /** The value a history holds for a key that is absent (an empty tree's keys, before their first put). */
    static final long ABSENT = Long.MIN_VALUE;

    /** A mix over keys {@code ClusterHarness.key(i)}, i in [1, keys], all holding their loaded value. */
    WriteMix(DexClientApi client, long keys, int putPercent, int inFlight) {
        this(client, keys, putPercent, inFlight, false);
    }

    /**
     * A mix over keys {@code ClusterHarness.key(i)}, i in [1, keys]: all holding their loaded value, or, with
     * {@code empty}, all absent (an empty tree: the first put of each key inserts it, and inserts split).
     */
    WriteMix(DexClientApi client, long keys, int putPercent, int inFlight, boolean empty) {
        this.client = client;
        this.keys = keys;
        this.putPercent = putPercent;
        this.inFlight = inFlight;
        this.histories = new KeyHistory[(int) keys];
        for (int i = 0; i < keys; i++) {
            histories[i] = new KeyHistory(empty ? ABSENT : ClusterHarness.loadedValue(ClusterHarness.key(i + 1)));
        }
        this.slots = new Semaphore(inFlight);
    }

    /** Sends {@code percent}% of the operations to the first {@code hotKeys} keys (a skewed mix); before {@link #start}. */
    WriteMix hot(long hotKeys, int percent) {
        if (hotKeys < 1 || hotKeys > keys || percent < 0 || percent > 100) {
            throw new IllegalArgumentException("hot keys " + hotKeys + " of " + keys + ", " + percent + "%");
        }
        this.hotKeys = hotKeys;
        this.hotPercent = percent;
        return this;
    }

    /** Makes {@code percent}% of the writes deletes; before {@link #start}. */
    WriteMix deleting(int percent) {
        this.deletePercent = percent;
        return this;
    }

    void start(long seed) {
        running = true;
        startNanos = System.nanoTime();
        thread = new Thread(() -> run(seed), "write-mix");
        thread.setDaemon(true);
        thread.start();
    }

    private void run(long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        try {
            while (running) {
                if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                int index = hotPercent > 0 && random.nextInt(100) < hotPercent ? random.nextInt((int) hotKeys)
                        : random.nextInt((int) keys);
                long key = ClusterHarness.key(index + 1);
                if (random.nextInt(100) < putPercent && writing.add(key)) {
                    if (random.nextInt(100) < deletePercent) {
                        delete(key, histories[index]);
                    } else {
                        put(key, histories[index]);
                    }
                } else {
                    get(key, histories[index]);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void put(long key, KeyHistory history) {
        long value = nextValue.getAndIncrement();
        int index = history.send(value);
        long sent = System.nanoTime();
        client.put(key, value).whenComplete((replaced, failure) -> {
            if (failure == null) {
                history.acknowledge(index);
                puts.incrementAndGet();
            } else {
                fail("put " + key + " = " + value, failure);
            }
            writing.remove(key);
            done(sent);
        });
    }

    private void delete(long key, KeyHistory history) {
        int index = history.send(ABSENT);
        long sent = System.nanoTime();
        client.delete(key).whenComplete((deleted, failure) -> {
            if (failure == null) {
                history.acknowledge(index);
                deletes.incrementAndGet();
            } else {
                fail("delete " + key, failure);
            }
            writing.remove(key);
            done(sent);
        });
    }

    private void get(long key, KeyHistory history) {
        int from = history.acknowledged();
        long sent = System.nanoTime();
        client.get(key).whenComplete((value, failure) -> {
            if (failure != null) {
                fail("get " + key, failure);
            } else if (!history.readable(from, value.orElse(ABSENT))) {
                long found = value.orElse(ABSENT);
                if (relaxed.test(key) && history.everSent(found)) {
                    staleReads.incrementAndGet();
                } else {
                    violation("get " + key + " returned " + (value.isEmpty() ? "nothing" : Long.toString(found))
                            + ", not the value acknowledged when it was sent (" + history.lastAcknowledged()
                            + " now) nor one written since");
                }
            }
            gets.incrementAndGet();
            done(sent);
        });
    }

    private void done(long sent) {
        long now = System.nanoTime();
        completed.incrementAndGet();
        int tick = tick(now);
        if (tick < TICKS) {
            completedPerTick.incrementAndGet(tick);
        }
        int sentTick = tick(sent);
        if (sentTick < TICKS) {
            longestPerTick.accumulateAndGet(sentTick, now - sent, Math::max);
        }
        slots.release();
    }

    private int tick(long nanos) {
        return (int) Math.max(0, (nanos - startNanos) / TICK_NANOS);
    }

    /**
     * How the mix went from {@code fromNanos} to {@code toNanos} ({@link System#nanoTime()}) against the usual rate, the
     * median of the whole seconds in the {@code beforeSeconds} before {@code fromNanos}: the lowest whole second (a
     * sliding window of ten 100 ms ticks), and the longest operation sent in the window. Call after {@link #stop}.
     */
    Dip dip(long fromNanos, long toNanos, int beforeSeconds) {
        int from = tick(fromNanos);
        int to = Math.min(TICKS, tick(toNanos));
        List<Long> before = new ArrayList<>();
        for (int end = from; end - 10 >= Math.max(0, from - 10 * beforeSeconds); end -= 10) {
            before.add(secondEndingAt(end));
        }
        Collections.sort(before);
        long usual = before.isEmpty() ? 0 : before.get(before.size() / 2);
        long lowest = Long.MAX_VALUE;
        for (int end = from + 10; end <= to; end++) {
            lowest = Math.min(lowest, secondEndingAt(end));
        }
        long longest = 0;
        for (int tick = from; tick < to; tick++) {
            longest = Math.max(longest, longestPerTick.get(tick));
        }
        return new Dip(usual, lowest == Long.MAX_VALUE ? usual : lowest, longest / 1e9);
    }

    /** Operations completed in each 100 ms from {@code fromNanos} to {@code toNanos}, for a test's log. Call after {@link #stop}. */
    String perTick(long fromNanos, long toNanos) {
        StringBuilder line = new StringBuilder();
        for (int tick = tick(fromNanos); tick < Math.min(TICKS, tick(toNanos)); tick++) {
            line.append(line.length() == 0 ? "" : " ").append(completedPerTick.get(tick));
        }
        return line.toString();
    }

    private long secondEndingAt(int end) {
        long sum = 0;
        for (int tick = Math.max(0, end - 10); tick < end; tick++) {
            sum += completedPerTick.get(tick);
        }
        return sum;
    }

    /** {@link #dip}: the usual operations per second, the lowest second's, and the longest operation in seconds. */
    record Dip(long usual, long lowest, double longestSeconds) {
        double lowestShare() {
            return usual == 0 ? 0 : (double) lowest / usual;
        }

        @Override
        public String toString() {
            return String.format("lowest second %,d operations, %.0f%% of the usual %,d per second; longest operation %.2f s",
                    lowest, 100 * lowestShare(), usual, longestSeconds);
        }
    }

    private void fail(String what, Throwable failure) {
        if (failureCount.incrementAndGet() <= EXAMPLES) {
            failures.add(what + ": " + failure);
        }
    }

    private void violation(String what) {
        if (violationCount.incrementAndGet() <= EXAMPLES) {
            violations.add(what);
        }
    }

    /** From now on, reads of keys matching {@code keys} may return an older value they were once given. */
    void relax(LongPredicate keys) {
        relaxed = keys;
    }

    /** Waits until {@code count} more operations than now have completed. */
    void awaitMore(long count, Duration max) throws InterruptedException {
        long target = completed.get() + count;
        long deadline = System.nanoTime() + max.toNanos();
        while (completed.get() < target) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the mix completed " + completed.get() + " operations, not " + target + ", within "
                        + max.toSeconds() + " s; failures " + failures);
            }
            Thread.sleep(50);
        }
    }

    /** Stops sending and waits for every operation in flight. */
    void stop() throws InterruptedException {
        running = false;
        thread.join(10_000);
        if (!slots.tryAcquire(inFlight, 120, TimeUnit.SECONDS)) {
            throw new AssertionError("operations of the mix still in flight 120 s after it stopped");
        }
        slots.release(inFlight);
        stopNanos = System.nanoTime();
    }

    /** Stops sending without waiting for operations in flight (cleanup after a failed test). */
    @Override
    public void close() throws InterruptedException {
        running = false;
        if (thread != null) {
            thread.join(10_000);
        }
    }

    long failureCount() {
        return failureCount.get();
    }

    List<String> failures() {
        return List.copyOf(failures);
    }

    long violationCount() {
        return violationCount.get();
    }

    List<String> violations() {
        return List.copyOf(violations);
    }

    String summary() {
        double seconds = (stopNanos - startNanos) / 1e9;
        return String.format("%,d operations (%,d puts, %,d deletes, %,d gets) in %.1f s, %,.0f ops/s; %d failed, %d wrong reads,"
                        + " %d stale reads of relaxed keys", completed.get(), puts.get(), deletes.get(), gets.get(), seconds,
                completed.get() / seconds,
                failureCount.get(), violationCount.get(), staleReads.get());
    }

    /**
     * After {@link #stop}: asserts that no operation failed even after the client's retries, that no read returned
     * a value its key never held or an older one than acknowledged, and that every one of the {@code keys} keys
     * holds its last acknowledged value (read back, {@link #verify}).
     *
     * @return the verification, for the caller's log
     */
    Verification assertNothingLost(long keys) throws InterruptedException {
        org.junit.jupiter.api.Assertions.assertEquals(0, failureCount(),
                "operations that failed even after the client's retries: " + failures());
        org.junit.jupiter.api.Assertions.assertEquals(0, violationCount(),
                "reads that returned a value the key never held or an older one than acknowledged: " + violations());
        Verification verification = verify(key -> false);
        org.junit.jupiter.api.Assertions.assertEquals(0, verification.failed(), "verification reads failed: " + verification);
        org.junit.jupiter.api.Assertions.assertEquals(keys, verification.exact(),
                "every key holds its last acknowledged value: " + verification);
        return verification;
    }

    /**
     * After {@link #stop}, for a run in which operations were expected to fail (the memory pool was out for a while):
     * asserts that no read returned a value its key never held or an older one than acknowledged, and that every key
     * holds its last acknowledged value or a value written after it whose put failed (its outcome is unknown: it may
     * have taken effect before the failure was reported).
     */
    Verification assertNoAcknowledgedWriteLost(long keys) throws InterruptedException {
        org.junit.jupiter.api.Assertions.assertEquals(0, violationCount(),
                "reads that returned a value the key never held or an older one than acknowledged: " + violations());
        Verification verification = verify(key -> false, true);
        org.junit.jupiter.api.Assertions.assertEquals(0, verification.failed(), "verification reads failed: " + verification);
        org.junit.jupiter.api.Assertions.assertEquals(0, verification.wrong(), "keys that lost an acknowledged write: " + verification);
        org.junit.jupiter.api.Assertions.assertEquals(keys, verification.exact() + verification.unknown(),
                "every key holds its last acknowledged value or a later one: " + verification);
        return verification;
    }

    /**
     * What every key holds after the mix, read back through the client: {@code exact} its last acknowledged value,
     * {@code unknown} a value sent after it by a put that failed (only counted where failures are allowed).
     */
    record Verification(long exact, long lost, long wrong, long failed, long unknown, List<String> examples) {
    }

    /**
     * Reads every key and compares it with its last acknowledged value. Keys matching {@code mayLose} may
     * instead hold an older value they were once given (counted as lost); anything else is wrong.
     */
    Verification verify(LongPredicate mayLose) throws InterruptedException {
        return verify(mayLose, false);
    }

    private Verification verify(LongPredicate mayLose, boolean failedPutsMayHaveLanded) throws InterruptedException {
        Semaphore verifySlots = new Semaphore(inFlight);
        AtomicLong exact = new AtomicLong();
        AtomicLong lost = new AtomicLong();
        AtomicLong wrong = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong unknown = new AtomicLong();
        List<String> examples = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < keys; i++) {
            long key = ClusterHarness.key(i + 1);
            KeyHistory history = histories[i];
            long expected = history.lastAcknowledged();
            int acknowledged = history.acknowledged();
            verifySlots.acquire();
            client.get(key).whenComplete((OptionalLong value, Throwable failure) -> {
                if (failure != null) {
                    failed.incrementAndGet();
                    if (examples.size() < EXAMPLES) {
                        examples.add("get " + key + " failed: " + failure);
                    }
                } else if (value.orElse(ABSENT) == expected) {
                    exact.incrementAndGet();
                } else if (failedPutsMayHaveLanded && history.readable(acknowledged, value.orElse(ABSENT))) {
                    unknown.incrementAndGet();
                } else if (mayLose.test(key) && history.onceAcknowledged(value.orElse(ABSENT))) {
                    lost.incrementAndGet();
                } else {
                    wrong.incrementAndGet();
                    if (examples.size() < EXAMPLES) {
                        examples.add("key " + key + ": expected " + expected + ", found " + value);
                    }
                }
                verifySlots.release();
            });
        }
        if (!verifySlots.tryAcquire(inFlight, 120, TimeUnit.SECONDS)) {
            throw new AssertionError("verification reads still in flight after 120 s");
        }
        return new Verification(exact.get(), lost.get(), wrong.get(), failed.get(), unknown.get(), List.copyOf(examples));
    }
}
