package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** How long a memory node's process waits for its downed actor system before it starts the next one. */
@Timeout(30)
class MemoryNodeProcessTest {
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();

    @AfterEach
    void stopTimer() {
        timer.shutdownNow();
    }

    @Test
    void aTerminationThatHangsAfterTheShutdownIsGivenUpOnAfterTheGrace() throws Exception {
        CompletableFuture<Object> terminated = new CompletableFuture<>(); // never completes: the fault
        AtomicReference<Optional<?>> reason = new AtomicReference<>(Optional.empty());
        CompletableFuture<Object> shutdownDone = new CompletableFuture<>();
        timer.schedule(() -> reason.set(Optional.of("downed")), 300, TimeUnit.MILLISECONDS);
        timer.schedule(() -> shutdownDone.complete("done"), 800, TimeUnit.MILLISECONDS);

        long start = System.nanoTime();
        boolean ended = MemoryNodeProcess.awaitEnd(terminated, reason::get, () -> shutdownDone, 400);
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

        assertFalse(ended, "the hung termination is reported");
        assertTrue(millis >= 1_150, "waited for the shutdown and the grace after it: " + millis + " ms");
        assertTrue(millis < 10_000, "not stuck: " + millis + " ms");
    }

    @Test
    void aSystemThatTerminatesWithinTheGraceIsWaitedFor() throws Exception {
        CompletableFuture<Object> terminated = new CompletableFuture<>();
        CompletableFuture<Object> shutdownDone = CompletableFuture.completedFuture("done");
        timer.schedule(() -> terminated.complete("terminated"), 700, TimeUnit.MILLISECONDS);

        assertTrue(MemoryNodeProcess.awaitEnd(terminated, () -> Optional.of("downed"), () -> shutdownDone, 5_000));
        assertTrue(terminated.isDone());
    }

    @Test
    void withoutAShutdownItWaitsForTheTerminationAlone() throws Exception {
        CompletableFuture<Object> terminated = new CompletableFuture<>();
        AtomicBoolean asked = new AtomicBoolean();
        timer.schedule(() -> terminated.complete("terminated"), 1_200, TimeUnit.MILLISECONDS);

        assertTrue(MemoryNodeProcess.awaitEnd(terminated, Optional::empty, () -> {
            asked.set(true);
            return new CompletableFuture<>();
        }, 100));
        assertFalse(asked.get(), "no shutdown was asked for while none had begun");
    }

    @Test
    void aShutdownThatNeverCompletesStillEndsTheWaitOnceTheSystemTerminates() throws Exception {
        CompletableFuture<Object> terminated = new CompletableFuture<>();
        timer.schedule(() -> terminated.complete("terminated"), 900, TimeUnit.MILLISECONDS);

        assertTrue(MemoryNodeProcess.awaitEnd(terminated, () -> Optional.of("downed"), CompletableFuture::new, 100));
    }
}
