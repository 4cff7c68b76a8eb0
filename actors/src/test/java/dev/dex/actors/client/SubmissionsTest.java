package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import dev.dex.actors.partition.HopTrace;
import dev.dex.actors.partition.Ops;

/**
 * A get, put or delete of the Java API as one object ({@link Submissions.Call}): answered once, on the API's executor,
 * with the answer or the {@link DexException} itself, and never held up by its own bookkeeping.
 */
class SubmissionsTest {
    /** An executor that keeps its tasks until the test runs them. */
    private static final class Held implements java.util.concurrent.Executor {
        final List<Runnable> tasks = new ArrayList<>();

        @Override
        public void execute(Runnable task) {
            tasks.add(task);
        }

        void runAll() {
            List<Runnable> now = new ArrayList<>(tasks);
            tasks.clear();
            now.forEach(Runnable::run);
        }
    }

    private static Submissions.Call<OptionalLong> get(Submissions submissions, long key) {
        return new Submissions.Call<>(new Ops.Op(Ops.GET, key, 0, 0), Submissions.Call.VALUE, submissions, TimeUnit.SECONDS.toNanos(5));
    }

    @Test
    void aCallCompletesOnTheExecutorWithItsFirstAnswerOnlyAndRecordsItOnce() {
        Held executor = new Held();
        Submissions submissions = new Submissions(executor, null);
        HopTable table = new HopTable();
        submissions.trace(1, table);
        Submissions.Call<OptionalLong> call = get(submissions, 5);
        call.accept(new DexClient.Reply(true, 7, null));
        call.accept(new DexClient.Reply(true, 8, null)); // a late duplicate
        assertFalse(call.isDone(), "nothing completes on the actor's thread");
        submissions.flushAnswered();
        assertEquals(1, executor.tasks.size(), "one task per batch");
        executor.runAll();
        assertEquals(OptionalLong.of(7), call.join());
        assertEquals(1, table.count(), "the trace is recorded once, not once per answer");
        submissions.flushAnswered();
        assertTrue(executor.tasks.isEmpty(), "nothing left to hand over");
    }

    @Test
    void anErrorFailsTheFutureWithTheDexExceptionItself() {
        Held executor = new Held();
        Submissions submissions = new Submissions(executor, null);
        Submissions.Call<Boolean> put = new Submissions.Call<>(new Ops.Op(Ops.PUT, 1, 2, 0), Submissions.Call.FOUND, submissions,
                TimeUnit.SECONDS.toNanos(5));
        AtomicReference<Throwable> seen = new AtomicReference<>();
        put.whenComplete((value, failure) -> seen.set(failure));
        put.accept(new DexClient.Reply(false, 0, "memory server 3 is out"));
        submissions.flushAnswered();
        executor.runAll();
        assertInstanceOf(DexException.class, seen.get());
        assertEquals("memory server 3 is out", seen.get().getMessage());
        CompletionException joined = org.junit.jupiter.api.Assertions.assertThrows(CompletionException.class, put::join);
        assertSame(seen.get(), joined.getCause());
    }

    @Test
    void aStoppedClientFailsWhatWaitsAndWhatComesAfterOnTheCallersThread() {
        Submissions submissions = new Submissions(new Held(), null);
        Submissions.Call<OptionalLong> waiting = get(submissions, 1);
        submissions.queue.add(waiting);
        CompletableFuture<DexClient.ScanReply> scan = new CompletableFuture<>();
        submissions.queue.add(new Submissions.ScanCall(new Ops.Op(Ops.SCAN, 1, 0, 10), scan, 0));
        submissions.stop("the client stopped");
        assertTrue(waiting.isCompletedExceptionally());
        assertEquals("the client stopped", scan.join().error());
        Submissions.Call<OptionalLong> late = get(submissions, 2);
        submissions.submit(late, null); // never rings: the client is gone
        assertTrue(late.isCompletedExceptionally(), "a call after the stop fails at once");
        assertTrue(submissions.queue.isEmpty());
    }

    @Test
    void aShutDownExecutorLeavesTheBatchToTheActorsThread() {
        java.util.concurrent.Executor closed = task -> {
            throw new RejectedExecutionException("closed");
        };
        Submissions submissions = new Submissions(closed, null);
        HopTable table = new HopTable();
        submissions.trace(1, table);
        List<Submissions.Call<OptionalLong>> calls = List.of(get(submissions, 1), get(submissions, 2), get(submissions, 3));
        for (Submissions.Call<OptionalLong> call : calls) {
            assertTrue(call.trace() != null && call.trace()[HopTrace.SUBMIT] != 0, "traced");
            call.accept(new DexClient.Reply(true, call.op().first() * 10, null));
        }
        submissions.flushAnswered();
        for (Submissions.Call<OptionalLong> call : calls) {
            assertEquals(OptionalLong.of(call.op().first() * 10), call.getNow(null), "completed here, each of them");
        }
        assertEquals(3, table.count());
    }

    @Test
    void runningACallBeforeItsAnswerDoesNothing() {
        Submissions submissions = new Submissions(new Held(), null);
        Submissions.Call<OptionalLong> call = get(submissions, 4);
        call.run();
        assertFalse(call.isDone());
    }
}
