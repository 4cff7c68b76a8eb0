package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** {@link CompletionSlot}: how a posting thread meets its completion. */
class DisniCompletionSlotTest {
    private static final long LONG_WAIT = TimeUnit.SECONDS.toNanos(30);
    private static final long SPIN = 10_000;

    @Test
    void completionFromAnotherThreadWakesTheWaiterWithItsStatus() throws Exception {
        CompletionSlot slot = new CompletionSlot(0);
        long wrId = slot.arm();
        Thread completer = new Thread(() -> {
            sleepQuietly(20);
            slot.complete(wrId, 0);
        });
        completer.start();

        assertEquals(0, slot.await(wrId, LONG_WAIT, SPIN));

        completer.join();
    }

    @Test
    void errorStatusIsHandedOver() {
        CompletionSlot slot = new CompletionSlot(4);
        long wrId = slot.arm();

        slot.complete(wrId, 12);

        assertEquals(12, slot.await(wrId, LONG_WAIT, SPIN));
    }

    @Test
    void waiterWithoutCompletionTimesOut() {
        CompletionSlot slot = new CompletionSlot(1);
        long wrId = slot.arm();

        assertEquals(CompletionSlot.TIMED_OUT, slot.await(wrId, TimeUnit.MILLISECONDS.toNanos(5), SPIN));
    }

    @Test
    void lateCompletionOfAnAbandonedRequestIsDropped() {
        CompletionSlot slot = new CompletionSlot(2);
        long abandoned = slot.arm();
        assertEquals(CompletionSlot.TIMED_OUT, slot.await(abandoned, 0, 0));
        long current = slot.arm();

        slot.complete(abandoned, 5);
        assertEquals(CompletionSlot.TIMED_OUT, slot.await(current, TimeUnit.MILLISECONDS.toNanos(5), SPIN),
                "the late completion did not complete the current request");

        long next = slot.arm();
        slot.complete(next, 0);
        slot.complete(current, 9);
        assertEquals(0, slot.await(next, LONG_WAIT, SPIN), "nor did it overwrite the current one's status");
    }

    @Test
    void cancelledRequestIgnoresItsCompletion() {
        CompletionSlot slot = new CompletionSlot(3);
        long neverPosted = slot.arm();
        slot.cancel(neverPosted);
        long posted = slot.arm();

        slot.complete(neverPosted, 7);
        slot.complete(posted, 0);

        assertEquals(0, slot.await(posted, LONG_WAIT, SPIN));
    }

    @Test
    void workRequestIdsNameTheSlotAreDistinctAndNeverZero() {
        CompletionSlot first = new CompletionSlot(0);
        long a = first.arm();
        first.cancel(a);
        long b = first.arm();
        first.cancel(b);
        CompletionSlot other = new CompletionSlot(Integer.MAX_VALUE);
        long c = other.arm();

        assertNotEquals(0, a);
        assertNotEquals(a, b);
        assertEquals(0, CompletionSlot.slotIdOf(a));
        assertEquals(0, CompletionSlot.slotIdOf(b));
        assertEquals(Integer.MAX_VALUE, CompletionSlot.slotIdOf(c));
        assertTrue(c > 0, "ids stay positive");
        assertThrows(IllegalArgumentException.class, () -> new CompletionSlot(-1));
    }

    @Test
    void aRoundCompletedOutOfOrderFromAnotherThreadHandsOverEveryStatus() throws Exception {
        CompletionSlot slot = new CompletionSlot(6);
        int count = CompletionSlot.CAPACITY;
        long first = slot.arm(count);
        Thread completer = new Thread(() -> {
            for (int i = count - 1; i >= 0; i--) {
                if (i % 7 == 0) {
                    sleepQuietly(1);
                }
                slot.complete(first + i, i % 5 == 0 ? 10 + i : 0);
            }
        });
        completer.start();
        int[] status = new int[count];

        assertEquals(0, slot.await(first, count, status, LONG_WAIT, SPIN), "nothing timed out");

        completer.join();
        for (int i = 0; i < count; i++) {
            assertEquals(i % 5 == 0 ? 10 + i : 0, status[i], "entry " + i);
        }
    }

    @Test
    void aRoundThatTimesOutReportsWhichEntriesCompletedAndDropsTheLateOnes() {
        CompletionSlot slot = new CompletionSlot(7);
        long first = slot.arm(4);
        slot.complete(first + 1, 0);
        slot.complete(first + 3, 13);
        int[] status = new int[4];

        assertEquals(2, slot.await(first, 4, status, TimeUnit.MILLISECONDS.toNanos(5), SPIN));
        assertEquals(List.of(CompletionSlot.TIMED_OUT, 0, CompletionSlot.TIMED_OUT, 13), List.of(status[0], status[1], status[2], status[3]));

        long next = slot.arm(2);
        slot.complete(first, 0);
        slot.complete(first + 2, 0);
        slot.complete(next + 1, 4);
        assertEquals(1, slot.await(next, 2, status, TimeUnit.MILLISECONDS.toNanos(5), SPIN),
                "the earlier round's late completions completed nothing of this one");
        assertEquals(CompletionSlot.TIMED_OUT, status[0]);
        assertEquals(4, status[1]);
    }

    @Test
    void aCancelledEntryOfARoundIsNotWaitedFor() {
        CompletionSlot slot = new CompletionSlot(8);
        long first = slot.arm(3);
        slot.cancel(first + 2);
        slot.complete(first, 0);
        slot.complete(first + 1, 0);
        slot.complete(first + 2, 9);
        int[] status = new int[3];

        assertEquals(0, slot.await(first, 3, status, LONG_WAIT, SPIN));
        assertEquals(0, status[2], "the cancelled entry's completion was dropped");
        assertThrows(IllegalArgumentException.class, () -> slot.arm(CompletionSlot.CAPACITY + 1));
        assertThrows(IllegalArgumentException.class, () -> slot.arm(0));
    }

    /**
     * An interrupted thread waits parked, not spinning, and keeps its interrupt for after the wait: interrupted before
     * the wait and again during it, it is parked whenever looked at, then gets its completion with the flag still set.
     */
    @Test
    void anInterruptedWaiterParksAndKeepsItsInterrupt() throws Exception {
        Waiter waiter = new Waiter(true, LONG_WAIT);
        waiter.awaitParked();
        waiter.thread.interrupt();
        waiter.awaitParked();

        waiter.slot.complete(waiter.wrId, 3);

        assertEquals(3, waiter.result());
        assertTrue(waiter.interruptedAfter, "the interrupt is kept");
    }

    /** Interrupted only while it waits, the thread still gets its completion, and its interrupt afterwards. */
    @Test
    void anInterruptDuringTheWaitIsKeptForAfterIt() throws Exception {
        Waiter waiter = new Waiter(false, LONG_WAIT);
        waiter.awaitParked();
        waiter.thread.interrupt();
        waiter.awaitParked();

        waiter.slot.complete(waiter.wrId, 0);

        assertEquals(0, waiter.result());
        assertTrue(waiter.interruptedAfter, "the interrupt is kept");
    }

    /** Interrupted, a request that never completes still times out at its deadline, with the flag set after. */
    @Test
    void anInterruptedWaiterTimesOutAtItsDeadline() throws Exception {
        Waiter waiter = new Waiter(true, TimeUnit.MILLISECONDS.toNanos(300));

        assertEquals(CompletionSlot.TIMED_OUT, waiter.result());
        assertTrue(waiter.interruptedAfter);
        assertTrue(waiter.waitedNanos >= TimeUnit.MILLISECONDS.toNanos(300), "waited " + waiter.waitedNanos / 1_000_000 + " ms");
    }

    /** A thread of its own that arms a slot and waits for it, optionally interrupted first. */
    private static final class Waiter {
        final CompletionSlot slot;
        final long wrId;
        final Thread thread;
        volatile int status = Integer.MIN_VALUE;
        volatile boolean interruptedAfter;
        volatile long waitedNanos;

        Waiter(boolean interruptedBefore, long timeoutNanos) throws InterruptedException {
            java.util.concurrent.SynchronousQueue<Object[]> made = new java.util.concurrent.SynchronousQueue<>();
            thread = new Thread(() -> {
                CompletionSlot own = new CompletionSlot(10);
                long id = own.arm();
                try {
                    made.put(new Object[] {own, id});
                } catch (InterruptedException e) {
                    return;
                }
                if (interruptedBefore) {
                    Thread.currentThread().interrupt();
                }
                long start = System.nanoTime();
                status = own.await(id, timeoutNanos, SPIN);
                waitedNanos = System.nanoTime() - start;
                interruptedAfter = Thread.currentThread().isInterrupted();
            });
            thread.setDaemon(true);
            thread.start();
            Object[] both = made.take();
            slot = (CompletionSlot) both[0];
            wrId = (long) both[1];
        }

        /** Looked at 50 times over 100 ms, the thread is parked on the slot every time: it does not spin. */
        void awaitParked() {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (java.util.concurrent.locks.LockSupport.getBlocker(thread) != slot || thread.getState() != Thread.State.TIMED_WAITING) {
                assertTrue(System.nanoTime() < deadline, "the waiter parks; it is " + thread.getState());
                Thread.onSpinWait();
            }
            // Right after an interrupt the thread may still be about to wake (its park returns, it clears the flag and
            // parks again): a look in that moment saw it RUNNABLE in CI. So the first 10 looks (20 ms) are grace; a
            // waiter that spins instead of parking fails every look after them.
            for (int i = 0; i < 50; i++) {
                boolean parked = thread.getState() == Thread.State.TIMED_WAITING
                        && java.util.concurrent.locks.LockSupport.getBlocker(thread) == slot;
                assertTrue(parked || i < 10, "look " + i + ": " + thread.getState());
                sleepQuietly(2);
            }
        }

        int result() throws InterruptedException {
            thread.join(10_000);
            assertTrue(!thread.isAlive(), "the waiter returned");
            return status;
        }
    }

    /** Many rounds of every size, each completed by another thread in a shuffled order, some entries late. */
    @Test
    void roundsCompletedConcurrentlyNeverMixUp() throws Exception {
        CompletionSlot slot = new CompletionSlot(9);
        java.util.concurrent.BlockingQueue<long[]> toComplete = new java.util.concurrent.LinkedBlockingQueue<>();
        Thread completer = new Thread(() -> {
            try {
                while (true) {
                    long[] work = toComplete.take();
                    if (work.length == 0) {
                        return;
                    }
                    for (long wrId : work) {
                        slot.complete(wrId, (int) (wrId & 0x3F));
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        completer.start();
        java.util.SplittableRandom random = new java.util.SplittableRandom(31);
        int[] status = new int[CompletionSlot.CAPACITY];
        long[] previousLate = new long[0];
        for (int round = 0; round < 2_000; round++) {
            int count = 1 + random.nextInt(CompletionSlot.CAPACITY);
            long first = slot.arm(count);
            List<Long> ids = new java.util.ArrayList<>();
            for (int i = 0; i < count; i++) {
                ids.add(first + i);
            }
            java.util.Collections.shuffle(ids, new java.util.Random(round));
            long[] work = new long[count + previousLate.length];
            for (int i = 0; i < count; i++) {
                work[i] = ids.get(i);
            }
            // The last round's ids come again, as late completions would: they must complete nothing here.
            System.arraycopy(previousLate, 0, work, count, previousLate.length);
            toComplete.put(work);
            assertEquals(0, slot.await(first, count, status, LONG_WAIT, SPIN));
            for (int i = 0; i < count; i++) {
                assertEquals((int) ((first + i) & 0x3F), status[i], "round " + round + " entry " + i);
            }
            previousLate = new long[] {first, first + count - 1};
        }
        toComplete.put(new long[0]);
        completer.join();
    }

    private static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
