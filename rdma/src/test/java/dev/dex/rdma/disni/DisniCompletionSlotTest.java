package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

    private static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
