package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/** The record of this compute node's remote changes that one-message offloaded lookups check. */
class RemoteChangesTest {

    @Test
    void everyVerbThatCanChangeMemoryIsRecordedForItsNodeAndReadsAreNot() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 1 << 20, 64 << 10);
            RemoteChanges changes = new RemoteChanges();
            RemoteMemory memory = new WriteFailures(fabric.connect(0), changes); // where the engine records them
            long node = GlobalAddress.of(0, 8 << 10);
            long other = GlobalAddress.of(0, 9 << 10);
            UnsafeBuffer buffer = new UnsafeBuffer(new byte[1024]);

            long start = changes.now();
            memory.read(node, buffer, 0, 1024);
            assertFalse(changes.changedSince(node, start), "a read changes nothing");
            memory.write(node, buffer, 0, 1024);
            assertTrue(changes.changedSince(node, start));
            assertFalse(changes.changedSince(other, start), "another node (another stripe)");
            assertFalse(changes.changedSince(node, changes.now()), "nothing since the last tick");

            long afterWrite = changes.now();
            memory.compareAndSwap(other + 8, 0, 1);
            assertTrue(changes.changedSince(other, afterWrite), "a word of the node counts for the node");
            assertFalse(changes.changedSince(node, afterWrite));
            long afterCas = changes.now();
            memory.fetchAndAdd(node + 16, 1);
            assertTrue(changes.changedSince(node, afterCas));

            long beforeFailure = changes.now();
            long outside = GlobalAddress.of(0, 1 << 20);
            assertThrows(RuntimeException.class, () -> memory.write(outside, buffer, 0, 1024));
            assertTrue(changes.changedSince(outside, beforeFailure), "a failed write may have been applied");
            assertEquals(1, memory.memoryServerIds().length, "the rest is forwarded");
        }
    }

    /** Racing writers on one stripe: its last change never goes back behind a tick already recorded. */
    @Test
    void concurrentChangesLeaveTheStripeAtTheLatestTick() throws Exception {
        RemoteChanges changes = new RemoteChanges();
        long node = GlobalAddress.of(3, 5 << 10);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            Thread thread = new Thread(() -> {
                for (int i = 0; i < 200_000; i++) {
                    long before = changes.now();
                    changes.changed(node);
                    if (!changes.changedSince(node, before)) {
                        throw new AssertionError("a change after tick " + before + " is not visible once recorded");
                    }
                }
            });
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        long last = changes.now();
        assertEquals(800_000, last);
        assertTrue(changes.changedSince(node, last - 1), "the stripe holds the last tick");
        assertFalse(changes.changedSince(node, last));
    }
}
