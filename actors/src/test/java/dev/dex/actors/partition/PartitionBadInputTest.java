package dev.dex.actors.partition;

import static dev.dex.actors.partition.EntityProbes.delete;
import static dev.dex.actors.partition.EntityProbes.get;
import static dev.dex.actors.partition.EntityProbes.put;
import static dev.dex.actors.partition.EntityProbes.scan;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;


/**
 * Wrong operations, a full memory pool and a partition this node does not hold each get a result that
 * says so, per operation, and the entity keeps serving: nothing crashes it and nothing goes unanswered.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
@ExtendWith(LogCapturingExtension.class)
class PartitionBadInputTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final int P = 1;
    private static final Duration STOP = Duration.ofSeconds(5);

    @JUnit5TestKit
    ActorTestKit testKit = EntityProbes.localTestKit();

    private final EntityProbes probes = new EntityProbes(testKit);

    @Test
    void eachBadOperationGetsBadInputAndTheRestOfItsBatchStillRuns() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            TreeMap<Long, Long> model = LocalTree.loadedModel(LOADED);
            long inside = model.higherKey(tree.table.lowerExclusive(P) + 100);
            long below = model.floorKey(tree.table.lowerExclusive(P));
            long above = model.higherKey(tree.table.upperInclusive(P));
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));

            List<Ops.Result> results = probes.execute(entity, List.of(
                    get(Long.MIN_VALUE),
                    put(Long.MIN_VALUE, 1),
                    get(inside),
                    put(below, 1),
                    delete(above),
                    scan(inside, 0),
                    scan(inside, -1),
                    scan(inside, Ops.MAX_SCAN + 1),
                    new Ops.Op(99, inside, 0, 0),
                    new Ops.Op(-1, inside, 0, 0),
                    scan(inside, Ops.MAX_SCAN),
                    put(inside, 5)));
            assertEquals(12, results.size());
            assertBadInput(results.get(0), "Long.MIN_VALUE is reserved");
            assertBadInput(results.get(1), "Long.MIN_VALUE is reserved");
            assertEquals(Ops.OK, results.get(2).status());
            assertEquals(inside + 1, results.get(2).value());
            // A key of another partition: the sender's table is older than a split (docs/partition-splits.md).
            assertMoved(results.get(3), "key " + below + " is not in partition " + P + " but in partition " + (P - 1));
            assertMoved(results.get(4), "key " + above + " is not in partition " + P + " but in partition " + (P + 1));
            assertBadInput(results.get(5), "scan count 0 outside [1, " + Ops.MAX_SCAN + "]");
            assertBadInput(results.get(6), "scan count -1 outside");
            assertBadInput(results.get(7), "scan count " + (Ops.MAX_SCAN + 1) + " outside");
            assertBadInput(results.get(8), "unknown operation kind 99");
            assertBadInput(results.get(9), "unknown operation kind -1");

            Ops.Result scanned = results.get(10);
            assertEquals(Ops.OK, scanned.status());
            long[] expected = model.subMap(inside, true, tree.table.upperInclusive(P), true).keySet().stream()
                    .mapToLong(Long::longValue).toArray();
            assertArrayEquals(expected, scanned.keys(), "a scan stops at the partition's end");
            assertEquals(tree.table.upperInclusive(P) + 1, scanned.next(), "and says where the next partition starts");
            assertEquals(Ops.OK, results.get(11).status());
            assertTrue(results.get(11).found());

            assertEquals(below + 1, tree.remoteEntries().get(below), "the write outside the partition was not applied");
            handOff(entity);
            assertEquals(5L, tree.remoteEntries().get(inside), "the good write of the batch was applied");
        }
    }

    @Test
    void aBatchOverTheLimitIsRefusedWholeAndOneAtTheLimitRuns() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            long inside = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(P));
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));

            List<Ops.Result> refused = probes.execute(entity, Collections.nCopies(Ops.MAX_BATCH + 1, put(inside, 9)));
            assertEquals(1, refused.size(), "one result for the whole batch");
            assertBadInput(refused.get(0), "at most " + Ops.MAX_BATCH + " operations, not " + (Ops.MAX_BATCH + 1));

            List<Ops.Result> full = probes.execute(entity, Collections.nCopies(Ops.MAX_BATCH, get(inside)));
            assertEquals(Ops.MAX_BATCH, full.size());
            for (Ops.Result result : full) {
                assertEquals(Ops.OK, result.status());
                assertEquals(inside + 1, result.value(), "the refused batch wrote nothing");
            }
            handOff(entity);
        }
    }

    @Test
    void memoryFullIsReportedPerInsertAndTheEntityKeepsServing() {
        try (LocalTree tree = LocalTree.emptyInChunks(4, 1)) {
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(0, tree.workers));
            TreeMap<Long, Long> model = new TreeMap<>();
            Ops.Result full = null;
            long next = 1;
            while (full == null && next < 100_000) {
                List<Ops.Op> batch = new ArrayList<>();
                for (int i = 0; i < 100; i++, next++) {
                    batch.add(put(next, 3 * next));
                }
                List<Ops.Result> results = probes.execute(entity, batch);
                for (int i = 0; i < batch.size(); i++) {
                    Ops.Result result = results.get(i);
                    if (result.status() == Ops.OK) {
                        assertFalse(result.found());
                        model.put(batch.get(i).first(), batch.get(i).value());
                    } else {
                        assertEquals(Ops.MEMORY_FULL, result.status(), result.error());
                        full = full == null ? result : full;
                    }
                }
            }
            assertNotNull(full, "a region of 3 usable 4 KiB chunks fills up");
            assertTrue(full.error().contains("memory server 0 is full"), full.error());
            assertTrue(model.size() > 50, "inserts succeeded until then: " + model.size());

            long first = model.firstKey();
            long last = model.lastKey();
            List<Ops.Result> after = probes.execute(entity, List.of(get(first), get(last), put(first, -1), scan(first, 5),
                    put(next + 1_000, 1)));
            assertEquals(3 * first, after.get(0).value());
            assertEquals(3 * last, after.get(1).value());
            assertEquals(Ops.OK, after.get(2).status(), "updates need no new node");
            assertTrue(after.get(2).found());
            model.put(first, -1L);
            assertArrayEquals(model.keySet().stream().limit(5).mapToLong(Long::longValue).toArray(), after.get(3).keys());
            Ops.Result another = after.get(4);
            assertTrue(another.status() == Ops.OK || another.status() == Ops.MEMORY_FULL, "answered: " + another);
            if (another.status() == Ops.OK) {
                model.put(next + 1_000, 1L);
            }

            handOff(entity);
            assertEquals(model, tree.remoteEntries(), "every acknowledged write is in remote memory, in a valid tree");
        }
    }

    @Test
    void operationsOnAPartitionTheEngineDoesNotHoldAreAnsweredNotHeld() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 1)) {
            int p = 2;
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(p));
            assertFalse(tree.engine.holds(p));
            List<Ops.Result> results = tree.workers.execute(p, List.of(get(key), put(key, 1), delete(key), scan(key, 10)))
                    .toCompletableFuture().get(10, TimeUnit.SECONDS).results();
            assertEquals(4, results.size());
            for (Ops.Result result : results) {
                assertEquals(Ops.NOT_HELD, result.status());
                assertTrue(result.error().contains("partition " + p + ", which this compute node does not hold"), result.error());
            }
            assertEquals(key + 1, tree.remoteEntries().get(key), "nothing was written");
        }
    }

    /** A batch that waited for an acquire that failed is answered before the entity stops, not dropped. */
    @Test
    void anEntityThatCannotAcquireItsPartitionAnswersWhatItHeldBackAndStops() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 1)) {
            int outside = tree.table.count();
            CountDownLatch gate = EntityProbes.occupy(tree.workers);
            ActorRef<Partition.Command> entity;
            TestProbe<Ops.Results> waiting;
            try {
                entity = testKit.spawn(Partition.create(outside, tree.workers));
                waiting = probes.send(entity, List.of(get(2), get(4)));
            } finally {
                gate.countDown();
            }
            testKit.createTestProbe().expectTerminated(entity, STOP);
            List<Ops.Result> results = waiting.receiveMessage(EntityProbes.REPLY).results();
            assertEquals(2, results.size());
            for (Ops.Result result : results) {
                assertTrue(result.status() != Ops.OK && result.error() != null, "an error, not a value: " + result);
            }
        }
    }

    private void handOff(ActorRef<Partition.Command> entity) {
        entity.tell(Partition.Handoff.INSTANCE);
        testKit.createTestProbe().expectTerminated(entity, STOP);
    }

    private static void assertMoved(Ops.Result result, String says) {
        assertEquals(Ops.MOVED, result.status(), "status of " + result);
        assertTrue(result.error() != null && result.error().contains(says), "error '" + result.error() + "' says " + says);
        assertFalse(result.found());
    }

    private static void assertBadInput(Ops.Result result, String says) {
        assertEquals(Ops.BAD_INPUT, result.status(), "status of " + result);
        assertTrue(result.error() != null && result.error().contains(says), "error '" + result.error() + "' says " + says);
        assertFalse(result.found());
    }
}
