package dev.dex.actors.partition;

import static dev.dex.actors.partition.EntityProbes.get;
import static dev.dex.actors.partition.EntityProbes.put;
import static dev.dex.actors.partition.EntityProbes.scan;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.core.cache.DexEngine;
import dev.dex.core.tree.SuperblockDescriptor;
import dev.dex.rdma.ForwardingRemoteMemory;

/**
 * A partition entity whose partition is merged into its left neighbour under it (PartitionMerges): a scan that waited
 * for it is sent again (NOT_HELD: where its partition ends changed under it), never failed; the batch's later operations
 * and later batches are answered MOVED, and an entity started again for the id merged away answers MOVED too.
 */
@ExtendWith({TestKitJUnit5Extension.class, LogCapturingExtension.class})
class PartitionMergeEntityTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;

    @JUnit5TestKit
    ActorTestKit testKit = EntityProbes.localTestKit();

    private final EntityProbes probes = new EntityProbes(testKit);

    @Test
    void batchesOfThePartitionMergedAwayAreServedOrSentOnAndNeverFailed() throws Exception {
        CountDownLatch locking = new CountDownLatch(1);
        CountDownLatch commit = new CountDownLatch(1);
        AtomicBoolean armed = new AtomicBoolean();
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2, memory -> new ForwardingRemoteMemory(memory) {
            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                if (address == SuperblockDescriptor.TABLE_VERSION_ADDRESS && (desired & 1) == 1 && armed.get()) {
                    locking.countDown(); // the merge is about to commit, both partitions paused: hold it there
                    try {
                        commit.await();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return super.compareAndSwap(address, expected, desired);
            }
        }, false)) {
            ActorRef<Partition.Command> left = testKit.spawn(Partition.create(0, tree.workers));
            ActorRef<Partition.Command> right = testKit.spawn(Partition.create(1, tree.workers));
            long boundary = tree.table.upperInclusive(0);
            long key = boundary + 2; // partition 1's first key
            assertEquals(Ops.OK, probes.execute(left, List.of(get(2))).get(0).status(), "partition 0 acquired");
            assertEquals(Ops.OK, probes.execute(right, List.of(get(key))).get(0).status(), "partition 1 acquired");

            armed.set(true);
            CompletableFuture<DexEngine.MergeReport> merge = CompletableFuture.supplyAsync(() -> tree.engine.mergePartitions(0, 1));
            assertTrue(locking.await(10, TimeUnit.SECONDS));
            TestProbe<Ops.Results> waited = probes.send(right, List.of(scan(key, 10), put(key, 99)));
            Thread.sleep(100);
            waited.expectNoMessage(java.time.Duration.ofMillis(50));
            commit.countDown();
            assertEquals(1, merge.get(10, TimeUnit.SECONDS).removed());
            List<Ops.Result> results = waited.receiveMessage(EntityProbes.REPLY).results();
            assertEquals(Ops.NOT_HELD, results.get(0).status(), "the scan that waited goes again, not FAILED: " + results.get(0));
            assertEquals(Ops.MOVED, results.get(1).status(), "the put after it finds the key in partition 0: " + results.get(1));
            assertEquals(Ops.OK, probes.execute(left, List.of(put(key, 99))).get(0).status());

            List<Ops.Result> later = probes.execute(right, List.of(get(key), put(key, 100)));
            for (Ops.Result result : later) {
                assertEquals(Ops.MOVED, result.status(), result.toString());
                assertTrue(result.error().contains("merged into its neighbour"), result.error());
            }
            // Started again for the id (as sharding would, for a batch that was on its way): its acquire fails, and the
            // batch it stashed meanwhile (both workers held until it is there) is answered MOVED.
            CountDownLatch first = EntityProbes.occupy(tree.workers);
            CountDownLatch second = EntityProbes.occupy(tree.workers);
            ActorRef<Partition.Command> again = testKit.spawn(Partition.create(1, tree.workers));
            TestProbe<Ops.Results> stashed = probes.send(again, List.of(get(key)));
            Thread.sleep(100);
            first.countDown();
            second.countDown();
            assertEquals(Ops.MOVED, stashed.receiveMessage(EntityProbes.REPLY).results().get(0).status(), "an id that left the table");

            List<Ops.Result> served = probes.execute(left, List.of(get(key), scan(boundary - 4, 5)));
            assertEquals(99, served.get(0).value(), "partition 0 serves the key now");
            assertArrayEquals(new long[] {boundary - 4, boundary - 2, boundary, boundary + 2, boundary + 4}, served.get(1).keys(),
                    "a scan of 0 goes on past the old boundary");
            assertFalse(tree.engine.holds(1));
        }
    }
}
