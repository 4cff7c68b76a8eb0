package dev.dex.actors.partition;

import static dev.dex.actors.partition.EntityProbes.get;
import static dev.dex.actors.partition.EntityProbes.put;
import static dev.dex.actors.partition.EntityProbes.scan;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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
 * The partition entity's handoff, without a cluster: the stop message sharding sends when a shard moves
 * must let batches in flight finish, write the partition's dirty cached pages back to remote memory,
 * release the partition, refuse what arrived meanwhile with NOT_HELD (so the client re-sends it to the new
 * home), and stop.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
@ExtendWith(LogCapturingExtension.class)
class PartitionHandoffTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final int P = 1;
    private static final Duration STOP = Duration.ofSeconds(5);

    @JUnit5TestKit
    ActorTestKit testKit = EntityProbes.localTestKit();

    private final EntityProbes probes = new EntityProbes(testKit);

    /**
     * An entity stopped any other way than by its handoff (sharding's handoff timeout, a failure, downing)
     * must not leave its partition held with dirty pages that a later eviction would write over the next
     * owner's: it gives the partition up without writing back, and the next owner replays the redo log.
     */
    @Test
    void anEntityStoppedWithoutAHandoffGivesItsPartitionUpAndTheNextOwnerReplaysItsWrites() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoadedWithRedoLog(LOADED, PARTITIONS, 1)) {
            TreeMap<Long, Long> model = LocalTree.loadedModel(LOADED);
            List<Long> loaded = new ArrayList<>(model.subMap(tree.table.lowerExclusive(P), false, tree.table.upperInclusive(P), true).keySet());
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));
            List<Ops.Op> updates = new ArrayList<>();
            for (int i = 0; i < loaded.size(); i += 3) {
                updates.add(put(loaded.get(i), -loaded.get(i)));
            }
            for (Ops.Result r : probes.execute(entity, updates)) {
                assertEquals(Ops.OK, r.status(), r.error());
            }
            assertTrue(tree.dirtyFrames() > 0, "updates of owned leaves stay in the cache, dirty");

            testKit.stop(entity, STOP);
            long deadline = System.nanoTime() + STOP.toNanos();
            // holds(P) turns false first, then the frames are dropped: wait for both.
            while ((tree.engine.holds(P) || tree.dirtyFrames() > 0) && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertFalse(tree.engine.holds(P), "the stopped entity's partition is no longer held");
            assertEquals(0, tree.dirtyFrames(), "its dirty pages are gone from the cache");
            TreeMap<Long, Long> remote = tree.remoteEntries();
            for (Ops.Op update : updates) {
                assertEquals(update.first() + 1, remote.get(update.first()), "nothing was written back for " + update.first());
            }

            dev.dex.core.cache.DexEngine heir = dev.dex.core.cache.DexEngine.open(tree.fabric.connect(0),
                    dev.dex.core.cache.DexEngineSettings.withCache("no-offload", 1 << 20), null, dev.dex.core.log.RedoLogSettings.ON);
            heir.acquire(P);
            try (dev.dex.core.cache.DexSession s = heir.newSession()) {
                for (Ops.Op update : updates) {
                    assertTrue(s.lookup(update.first()));
                    assertEquals(update.value(), s.value(), "the next owner replayed the write of " + update.first());
                }
            }
        }
    }

    @Test
    void handoffWritesTheDirtyPartitionBackReleasesItAndStops() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 1)) {
            TreeMap<Long, Long> model = LocalTree.loadedModel(LOADED);
            List<Long> loaded = new ArrayList<>(model.subMap(tree.table.lowerExclusive(P), false, tree.table.upperInclusive(P), true).keySet());
            assertTrue(loaded.size() > 500, "partition " + P + " holds a good share of the loaded keys: " + loaded.size());
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));

            List<Ops.Op> updates = new ArrayList<>();
            for (int i = 0; i < loaded.size(); i += 3) {
                updates.add(put(loaded.get(i), -loaded.get(i)));
            }
            List<Ops.Result> updated = probes.execute(entity, updates);
            assertEquals(updates.size(), updated.size());
            for (int i = 0; i < updates.size(); i++) {
                assertEquals(Ops.OK, updated.get(i).status(), updated.get(i).error());
                assertTrue(updated.get(i).found(), "key " + updates.get(i).first() + " existed");
                model.put(updates.get(i).first(), updates.get(i).value());
            }
            assertTrue(tree.engine.holds(P));
            assertTrue(tree.dirtyFrames() > 0, "updates of owned leaves stay in the cache, dirty");
            TreeMap<Long, Long> before = tree.remoteEntries();
            for (Ops.Op update : updates) {
                assertEquals(update.first() + 1, before.get(update.first()), "remote memory still holds the old value of " + update.first());
            }

            List<Ops.Op> inserts = new ArrayList<>();
            for (int i = 0; i < loaded.size() - 1; i += 2) {
                inserts.add(put(loaded.get(i) + 1, 7 * loaded.get(i)));
            }
            for (Ops.Result result : probes.execute(entity, inserts)) {
                assertEquals(Ops.OK, result.status(), result.error());
                assertFalse(result.found(), "odd keys are new");
            }
            inserts.forEach(op -> model.put(op.first(), op.value()));

            long from = loaded.get(10);
            List<Ops.Result> read = probes.execute(entity, List.of(get(from), get(from + 1), get(from + 3), scan(from, 40)));
            assertEquals(List.of(true, true, false), read.subList(0, 3).stream().map(Ops.Result::found).toList());
            assertEquals(model.get(from), read.get(0).value());
            assertEquals(model.get(from + 1), read.get(1).value());
            assertScanned(model, from, 40, read.get(3));

            CountDownLatch gate = EntityProbes.occupy(tree.workers);
            TestProbe<Ops.Results> late;
            try {
                entity.tell(Partition.Handoff.INSTANCE);
                late = probes.send(entity, List.of(put(from, 1), get(from)));
            } finally {
                gate.countDown();
            }
            for (Ops.Result result : late.receiveMessage(EntityProbes.REPLY).results()) {
                assertEquals(Ops.NOT_HELD, result.status(), "a batch that came while releasing is refused, to be re-sent");
            }
            testKit.createTestProbe().expectTerminated(entity, STOP);

            assertFalse(tree.engine.holds(P), "the partition is released");
            assertEquals(0, tree.dirtyFrames(), "nothing of the partition is left dirty in the cache");
            assertEquals(model, tree.remoteEntries(), "remote memory holds every write the entity acknowledged");
        }
    }

    @Test
    void handoffFinishesTheBatchInFlightAndRefusesLaterOnesWithNotHeld() throws Exception {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 1)) {
            TreeMap<Long, Long> model = LocalTree.loadedModel(LOADED);
            long a = model.higherKey(tree.table.lowerExclusive(P));
            long b = model.higherKey(a);
            long c = model.higherKey(b);
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));
            assertEquals(Ops.OK, probes.execute(entity, List.of(get(a))).get(0).status(), "the entity is up");

            CountDownLatch gate = EntityProbes.occupy(tree.workers);
            TestProbe<Ops.Results> inFlight;
            TestProbe<Ops.Results> late;
            try {
                inFlight = probes.send(entity, List.of(put(a, 111), put(b, 222)));
                entity.tell(Partition.Handoff.INSTANCE);
                late = probes.send(entity, List.of(put(c, 333), get(a)));
            } finally {
                gate.countDown();
            }

            List<Ops.Result> first = inFlight.receiveMessage(EntityProbes.REPLY).results();
            assertEquals(List.of(Ops.OK, Ops.OK), first.stream().map(Ops.Result::status).toList(), "the batch in flight completes");
            List<Ops.Result> refused = late.receiveMessage(EntityProbes.REPLY).results();
            assertEquals(2, refused.size(), "one result per operation, so the client can re-send each");
            for (Ops.Result result : refused) {
                assertEquals(Ops.NOT_HELD, result.status());
                assertTrue(result.error().contains("partition " + P), result.error());
            }
            testKit.createTestProbe().expectTerminated(entity, STOP);

            assertFalse(tree.engine.holds(P));
            TreeMap<Long, Long> remote = tree.remoteEntries();
            assertEquals(111L, remote.get(a));
            assertEquals(222L, remote.get(b));
            assertEquals(c + 1, remote.get(c), "the refused write was not applied");
            Ops.Results after = tree.workers.execute(P, List.of(get(a))).toCompletableFuture().get(10, TimeUnit.SECONDS);
            assertEquals(Ops.NOT_HELD, after.results().get(0).status(), "this compute node no longer serves the partition");
        }
    }

    /**
     * Sharding may hand a shard off right after starting its entity, before the partition is acquired. The
     * stop message must not be lost then: an entity that ignores it is stopped by sharding only after the
     * handoff timeout, without releasing the partition, so its dirty pages never reach remote memory.
     */
    @Test
    void handoffWhileAcquiringStillReleasesAndStops() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 1)) {
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(P));
            CountDownLatch gate = EntityProbes.occupy(tree.workers);
            ActorRef<Partition.Command> entity;
            TestProbe<Ops.Results> early;
            try {
                entity = testKit.spawn(Partition.create(P, tree.workers));
                early = probes.send(entity, List.of(put(key, 4242)));
                entity.tell(Partition.Handoff.INSTANCE);
            } finally {
                gate.countDown();
            }
            Ops.Result result = early.receiveMessage(EntityProbes.REPLY).results().get(0);
            assertTrue(result.status() == Ops.OK || result.status() == Ops.NOT_HELD, "answered: " + result);

            testKit.createTestProbe().expectTerminated(entity, STOP);
            assertFalse(tree.engine.holds(P), "the partition is released");
            assertEquals(result.status() == Ops.OK ? 4242L : key + 1, tree.remoteEntries().get(key));
        }
    }

    /** A partition's part of a scan: the model's entries from {@code start} up to the partition's end. */
    private static void assertScanned(TreeMap<Long, Long> model, long start, int count, Ops.Result result) {
        assertEquals(Ops.OK, result.status(), result.error());
        List<Long> keys = new ArrayList<>();
        List<Long> values = new ArrayList<>();
        for (Map.Entry<Long, Long> e : model.tailMap(start, true).entrySet()) {
            if (keys.size() == count) {
                break;
            }
            keys.add(e.getKey());
            values.add(e.getValue());
        }
        assertArrayEquals(keys.stream().mapToLong(Long::longValue).toArray(), result.keys());
        assertArrayEquals(values.stream().mapToLong(Long::longValue).toArray(), result.values());
    }
}
