package dev.dex.rdma.disni;

import java.io.IOException;
import java.util.Arrays;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.FabricException;

/**
 * How {@link OneSidedVerbs#postAll} posts a {@link WorkList} over RDMA connections, apart from the device itself
 * ({@link #post}, {@link #connection}), so that every path runs in tests without one.
 *
 * <p>Rounds. A round takes, in order, the requests not done yet that fit the thread's staging buffer (each gets a
 * slice of it) and its {@link CompletionSlot} ({@link CompletionSlot#CAPACITY} entries). Its requests of one opcode
 * to one server go in chains of up to {@code maxChain} (at most the connection's queue depth), one post per chain,
 * every request signaled; WRITE data is copied into its slice first. Then the thread waits once for the round's
 * completions, copies each READ out of its slice and records each request's outcome in the work list.
 *
 * <p>Credits. A chain takes one credit (a slot of the connection's send queue) per request, and gives each back
 * when its completion arrived. A thread waits only while it holds no credit of its round, and then for one credit,
 * within one deadline per round (the verb timeout); otherwise, and for the rest of a chain, it takes what is free, and
 * the requests it found no credit for wait for a later chain or round. So no thread waits while it holds credits
 * another one may be waiting for, no chain needs an idle queue, and every round posts or fails at least one request.
 *
 * <p>Failures, each on its request alone, as a single verb's: an invalid length ({@link IllegalArgumentException}),
 * an unconnected server, a broken connection, no credit within the verb timeout, an error status (the connection is
 * broken from then on), a request that does not complete within the verb timeout (the connection is broken, the
 * credit stays taken and the staging buffer is given up: a late READ may still land in it). A post that fails
 * may have sent some of its chain (DiSNI does not say which): its requests fail, the connection is broken, and their
 * completions are still awaited like posted ones, so no slice or credit is reused while one may be in flight.
 * Closing: each round, and each wait for credits, first asks whether the owner closed, and fails what is left with
 * {@link IllegalStateException} if so. A round thus takes at most two verb timeouts (credits, then completions), as
 * a single verb does.
 *
 * <p>Concurrency: one poster serves every thread; each thread brings its own {@link Round}. Connections are shared,
 * and their credits and failure are thread-safe.
 */
abstract class ChainPoster {
    /** A connection as the rounds see it. */
    interface Connection {
        /** Free slots of its send queue. */
        Semaphore credits();

        /** Why it is broken, or null. */
        String failure();

        /** Marks it broken (the first reason is kept). */
        void breakWith(String reason);
    }

    private static final byte NEW = 0;
    private static final byte FAILED = 1;
    private static final byte POSTED = 2;
    /** A post that failed may have sent any prefix of its chain: awaited like posted, failed whatever completes. */
    private static final byte MAYBE_POSTED = 3;
    private static final byte NO_CREDIT = -1;

    private final int maxTransfer;
    private final int maxChain;
    private final long timeoutNanos;
    private final long spinNanos;

    /**
     * @param maxTransfer the largest request, and the staging buffer's size
     * @param queueDepth  each connection's credits
     * @param maxChain    the longest chain the device takes in one post
     */
    ChainPoster(int maxTransfer, int queueDepth, int maxChain, long timeoutNanos, long spinNanos) {
        this.maxTransfer = maxTransfer;
        this.maxChain = Math.max(1, Math.min(maxChain, queueDepth));
        this.timeoutNanos = timeoutNanos;
        this.spinNanos = spinNanos;
    }

    /** The connection to {@code serverId}, or null when there is none. */
    protected abstract Connection connection(int serverId);

    /**
     * Posts the requests of {@code round.chain[0..k)} (entries of the round; entry {@code e} is request
     * {@code round.request[e]} of {@code work}, id {@code first + e}, slice at {@code round.at[e]} of the staging
     * buffer, WRITE data already there) as one chain of READs or WRITEs to {@code serverId}.
     *
     * @throws IOException      when the post failed (some of the chain may be in flight)
     * @throws RuntimeException when nothing was posted
     */
    protected abstract void post(Round round, WorkList work, Connection connection, int serverId, boolean read, long first, int k)
            throws IOException;

    /** One thread's state for its rounds: its completion slot and staging buffer, and a round's bookkeeping. */
    abstract static class Round {
        final CompletionSlot slot;
        final int[] request = new int[CompletionSlot.CAPACITY];
        final int[] at = new int[CompletionSlot.CAPACITY];
        final int[] chain = new int[CompletionSlot.CAPACITY];
        private final byte[] state = new byte[CompletionSlot.CAPACITY];
        private final int[] statuses = new int[CompletionSlot.CAPACITY];
        private boolean[] done = new boolean[16];

        Round(CompletionSlot slot) {
            this.slot = slot;
        }

        /** The staging buffer: READs land in it, WRITEs are copied into it. */
        abstract UnsafeBuffer staging();

        /** Gives the staging buffer up (a late READ may still land in it) and takes a fresh one. */
        abstract void retireStaging();
    }

    /** Posts every request of {@code work} in rounds and records each outcome in it; see the class comment. */
    final void postAll(Round round, WorkList work, BooleanSupplier closed) {
        if (round.done.length < work.size()) {
            round.done = new boolean[Math.max(work.size(), 2 * round.done.length)];
        }
        Arrays.fill(round.done, 0, work.size(), false);
        int from = 0;
        while (true) {
            while (from < work.size() && round.done[from]) {
                from++;
            }
            if (from == work.size()) {
                return;
            }
            if (closed.getAsBoolean()) {
                IllegalStateException isClosed = new IllegalStateException("remote memory is closed");
                for (int r = from; r < work.size(); r++) {
                    if (!round.done[r]) {
                        work.fail(r, isClosed);
                    }
                }
                return;
            }
            postRound(round, work, from, closed);
        }
    }

    private void postRound(Round round, WorkList work, int from, BooleanSupplier closed) {
        int capacity = round.staging().capacity();
        int count = 0;
        int bytes = 0;
        for (int r = from; r < work.size() && count < CompletionSlot.CAPACITY; r++) {
            if (round.done[r]) {
                continue;
            }
            int length = work.length(r);
            if (length < 0 || length > maxTransfer) {
                round.done[r] = true;
                work.fail(r, new IllegalArgumentException("one RDMA transfer is 0 to " + maxTransfer + " bytes: " + length));
                continue;
            }
            if (bytes + length > capacity) {
                if (count == 0) {
                    round.done[r] = true;
                    work.fail(r, new IllegalArgumentException("a transfer of " + length + " bytes exceeds the staging buffer of "
                            + capacity));
                    continue;
                }
                break;
            }
            round.request[count] = r;
            round.at[count] = bytes;
            round.state[count] = NEW;
            bytes += length;
            count++;
        }
        if (count == 0) {
            return;
        }
        long first = round.slot.arm(count);
        // One deadline for every wait for credits in this round: with the wait for completions, a round takes at most
        // two verb timeouts, as a single verb does, which is what close() waits for.
        long creditDeadline = System.nanoTime() + timeoutNanos;
        boolean holding = false;
        for (int e = 0; e < count; e++) {
            if (round.state[e] != NEW) {
                continue;
            }
            int serverId = work.serverId(round.request[e]);
            boolean read = work.isRead(round.request[e]);
            int k = 0;
            for (int j = e; j < count && k < maxChain; j++) {
                if (round.state[j] == NEW && work.serverId(round.request[j]) == serverId && work.isRead(round.request[j]) == read) {
                    round.chain[k++] = j;
                }
            }
            byte outcome = postChain(round, work, first, k, serverId, read, holding, creditDeadline, closed);
            if (outcome == NO_CREDIT) {
                break; // this chain and the rest of the round go in the next
            }
            holding |= outcome == POSTED || outcome == MAYBE_POSTED;
        }
        for (int e = 0; e < count; e++) {
            if (round.state[e] == NEW || round.state[e] == FAILED) {
                round.slot.cancel(first + e);
            }
        }
        round.slot.await(first, count, round.statuses, timeoutNanos, spinNanos);
        boolean timedOut = false;
        for (int e = 0; e < count; e++) {
            timedOut |= settle(round, work, e);
        }
        if (timedOut) {
            round.retireStaging();
        }
    }

    /** Records entry {@code e}'s outcome after the round's wait; true when it timed out. */
    private boolean settle(Round round, WorkList work, int e) {
        byte state = round.state[e];
        int r = round.request[e];
        if (state == NEW) {
            return false; // carried into the next round
        }
        round.done[r] = true;
        if (state == FAILED) {
            return false;
        }
        Connection connection = connection(work.serverId(r));
        int status = round.statuses[e];
        if (status == CompletionSlot.TIMED_OUT) {
            // Its send queue slot stays taken: the request may still complete.
            connection.breakWith("a request did not complete within " + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms");
            if (state == POSTED) {
                work.fail(r, new FabricException(verb(work, r) + " did not complete within " + TimeUnit.NANOSECONDS.toMillis(timeoutNanos)
                        + " ms; the connection is given up"));
            }
            return true;
        }
        connection.credits().release();
        if (state == MAYBE_POSTED) {
            return false; // failed already, whatever completed
        }
        if (status != 0) {
            String reason = DisniOneSidedVerbs.describe(status);
            connection.breakWith("a request completed with " + reason);
            work.fail(r, new FabricException(verb(work, r) + " completed with " + reason));
        } else if (work.isRead(r)) {
            try {
                work.destination(r).putBytes(work.offset(r), round.staging(), round.at[e], work.length(r));
            } catch (RuntimeException e2) {
                work.fail(r, e2);
            }
        }
        return false;
    }

    /**
     * Posts one chain, {@code round.chain[0..k)} or the prefix of it that credits were found for (the rest stay for
     * another chain); its entries' state tells the outcome, which it returns too.
     */
    private byte postChain(Round round, WorkList work, long first, int k, int serverId, boolean read, boolean holding,
                           long creditDeadline, BooleanSupplier closed) {
        Connection connection = connection(serverId);
        int got = 0;
        try {
            if (connection == null) {
                throw new IllegalArgumentException("not connected to memory server " + serverId);
            }
            String failure = connection.failure();
            if (failure != null) {
                throw new FabricException(verb(work, round.request[round.chain[0]]) + " failed: the connection is broken since " + failure);
            }
            if (!holding) {
                // Waits for one credit only, then takes what is free: a chain never needs an idle queue.
                if (closed.getAsBoolean()) {
                    throw new IllegalStateException("remote memory is closed");
                }
                long left = creditDeadline - System.nanoTime();
                if (left <= 0 || !connection.credits().tryAcquire(left, TimeUnit.NANOSECONDS)) {
                    throw new FabricException(verb(work, round.request[round.chain[0]]) + " found the send queue full for "
                            + TimeUnit.NANOSECONDS.toMillis(timeoutNanos) + " ms");
                }
                got = 1;
            }
            while (got < k && connection.credits().tryAcquire()) {
                got++;
            }
            if (got == 0) {
                return NO_CREDIT;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return mark(round, work, k, FAILED, new FabricException(verb(work, round.request[round.chain[0]])
                    + " was interrupted while waiting for room in the send queue", e));
        } catch (RuntimeException e) {
            return mark(round, work, k, FAILED, e);
        }
        // Entries past the credits found stay NEW: a later chain of this round, or the next round, takes them.
        int n = 0;
        for (int c = 0; c < got; c++) {
            int e = round.chain[c];
            int r = round.request[e];
            try {
                if (!read) {
                    round.staging().putBytes(round.at[e], work.source(r), work.offset(r), work.length(r));
                }
                round.chain[n++] = e;
            } catch (RuntimeException copy) {
                round.state[e] = FAILED;
                work.fail(r, copy);
                connection.credits().release();
            }
        }
        if (n == 0) {
            return FAILED;
        }
        if (closed.getAsBoolean()) {
            connection.credits().release(n);
            return mark(round, work, n, FAILED, new IllegalStateException("remote memory is closed"));
        }
        try {
            post(round, work, connection, serverId, read, first, n);
        } catch (IOException e) {
            connection.breakWith("a post failed: " + DisniOneSidedVerbs.messageOf(e));
            return mark(round, work, n, MAYBE_POSTED, new FabricException(verb(work, round.request[round.chain[0]]) + " and " + (n - 1)
                    + " more could not be posted: " + DisniOneSidedVerbs.messageOf(e), e));
        } catch (RuntimeException e) {
            connection.credits().release(n);
            return mark(round, work, n, FAILED, e);
        }
        return mark(round, work, n, POSTED, null);
    }

    private static byte mark(Round round, WorkList work, int k, byte state, RuntimeException failure) {
        for (int c = 0; c < k; c++) {
            int e = round.chain[c];
            round.state[e] = state;
            if (failure != null) {
                work.fail(round.request[e], failure);
            }
        }
        return state;
    }

    private static String verb(WorkList work, int r) {
        return (work.isRead(r) ? "RDMA READ" : "RDMA WRITE") + " of " + work.length(r) + " bytes on memory server " + work.serverId(r);
    }
}
