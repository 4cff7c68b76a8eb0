package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.agrona.DirectBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.core.node.WideKeys;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/**
 * Deletes that merge (docs/merges.md): a partition's sparse leaves are merged into their left siblings, every key
 * left stays where readers find it, the tree stays valid, the leaves merged away are reused by later splits, and a
 * merge whose writes fail leaves a tree every reader still reads right, repaired afterwards.
 */
class MergeTest {
    private static final DexEngineSettings CACHED = DexEngineSettings.dex(2_000L * FrameHeaderDescriptor.FRAME_LENGTH)
            .withLeafAdmission(0.5);

    private static long leaves(RemoteMemory admin) {
        return TreeValidator.validate(admin).nodesPerLevel()[0];
    }

    /** Deletes {@code share} of the loaded keys in a seeded random order, through {@code engine}; returns those left. */
    static TreeMap<Long, Long> deleteShare(DexFixture fixture, DexEngine engine, double share, long seed) {
        TreeMap<Long, Long> model = fixture.initialModel();
        List<Long> keys = new ArrayList<>(model.keySet());
        Collections.shuffle(keys, new java.util.Random(seed));
        try (DexSession session = engine.newSession()) {
            WideKeys.Session s = fixture.wide.of(session);
            for (int i = 0; i < (int) (keys.size() * share); i++) {
                assertTrue(s.delete(keys.get(i)), "delete " + keys.get(i));
                model.remove(keys.get(i));
            }
        }
        return model;
    }

    /** Every key of {@code model} is found with its value, and no other key of the loaded range is. */
    static void readsMatch(DexFixture fixture, DexEngine engine, TreeMap<Long, Long> model) {
        readsMatch(fixture, engine, model, -1);
    }

    /** As above, over the keys of {@code partition} only (-1: all). */
    static void readsMatch(DexFixture fixture, DexEngine engine, TreeMap<Long, Long> model, int partition) {
        try (DexSession session = engine.newSession()) {
            WideKeys.Session s = fixture.wide.of(session);
            for (long key = 1; key <= 2L * fixture.loaded + 2; key++) {
                if (partition >= 0 && fixture.partitionOf(key) != partition) {
                    continue;
                }
                Long expected = model.get(key);
                assertEquals(expected != null, s.lookup(key), "key " + key);
                if (expected != null) {
                    assertEquals(expected, s.value(), "value of " + key);
                }
            }
        }
    }

    @Test
    void deletesMergeTheLeavesTheyLeaveSparseAndKeepEveryOtherKey() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            DexEngine engine = fixture.open(1, CACHED).get(0);
            long before = leaves(fixture.admin);
            long levelOneBefore = TreeValidator.validate(fixture.admin).nodesPerLevel()[1];
            TreeMap<Long, Long> model = deleteShare(fixture, engine, 0.9, 7);
            long[] counts = engine.merges.counts();
            assertTrue(counts[0] > 0, "the deletes merged leaves by themselves: " + counts[0]);
            readsMatch(fixture, engine, model);
            for (int p = 0; p < fixture.table.count(); p++) {
                engine.merge(p); // the rest, over every partition
            }
            readsMatch(fixture, engine, model);
            assertEquals(model, fixture.validateFlushAndRead());
            long after = leaves(fixture.admin);
            assertTrue(after * 3 < before, "leaves: " + before + " before, " + after + " after the merges");
            long levelOneAfter = TreeValidator.validate(fixture.admin).nodesPerLevel()[1];
            assertTrue(levelOneAfter < levelOneBefore, "level-1 nodes merged too: " + levelOneBefore + " -> " + levelOneAfter);
            assertEquals(0, mergeableNeighbours(fixture, engine.merges), "no two neighbours of one partition fit in one node");
        }
    }

    /**
     * A sweep passes over a partition only once its deletes stopped for the quiet time, and only after enough of them:
     * then no two neighbours fit in one merged leaf any more, where the deletes' own passes left many that do.
     */
    @Test
    void aSweepMergesThePartitionsWhoseDeletesStoppedAndOnlyThose() throws InterruptedException {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            DexEngine engine = fixture.open(1, CACHED).get(0);
            TreeMap<Long, Long> model = deleteShare(fixture, engine, 0.9, 19);
            assertTrue(mergeableNeighbours(fixture, engine.merges) > 0, "the deletes' passes leave neighbours that fit in one");
            long quiet = TimeUnit.MILLISECONDS.toNanos(300);
            assertEquals(0, engine.sweep(quiet), "not swept while the deletes have only just stopped");
            Thread.sleep(400);
            assertEquals(fixture.table.count(), engine.sweep(quiet), "every partition swept once quiet");
            assertEquals(0, mergeableNeighbours(fixture, engine.merges), "no two neighbours of one partition fit in one node");
            assertEquals(0, engine.sweep(0), "nothing to sweep without new deletes");
            readsMatch(fixture, engine, model);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /**
     * A sweep over a partition of many level-1 nodes pauses it once per {@link MergeSweeps#PARENTS_PER_STEP} of them,
     * not once for all; and it merges all the same.
     */
    @Test
    void aSweepPausesAPartitionForAFewLevelOneNodesAtATime() {
        try (DexFixture fixture = new DexFixture(1, 3, 200_000, 1, true, 0)) {
            DexEngine engine = fixture.open(1, CACHED).get(0);
            TreeMap<Long, Long> model = fixture.initialModel();
            try (DexSession session = engine.newSession()) {
                WideKeys.Session s = fixture.wide.of(session);
                for (long key = 2; key <= 2L * fixture.loaded; key += 4) { // every other key: no leaf under a quarter
                    assertTrue(s.delete(key), "delete " + key);
                    model.remove(key);
                }
            }
            long levelOne = TreeValidator.validate(fixture.admin).nodesPerLevel()[1];
            assertEquals(1, engine.sweep(0), "the partition swept");
            long steps = engine.merges.sweeps.steps();
            assertTrue(steps >= levelOne / MergeSweeps.PARENTS_PER_STEP && steps > 1,
                    steps + " steps over " + levelOne + " level-1 nodes");
            assertTrue(engine.merges.counts()[0] > 0, "merged");
            assertEquals(0, mergeableNeighbours(fixture, engine.merges), "no two neighbours of one partition fit in one node");
            readsMatch(fixture, engine, model);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /** Under deletes that never stop for the quiet time, a due partition is swept all the same, later. */
    @Test
    void aPartitionWhoseDeletesNeverStopIsSweptLater() throws InterruptedException {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 1, true, 0)) {
            DexEngine engine = fixture.open(1, CACHED).get(0);
            TreeMap<Long, Long> model = fixture.initialModel();
            long quiet = TimeUnit.MILLISECONDS.toNanos(40); // latest: 30 quiet times, 1.2 s
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            int swept = 0;
            try (DexSession session = engine.newSession()) {
                WideKeys.Session s = fixture.wide.of(session);
                // Every other key, one every 2 ms: never 40 ms without a delete, but enough of them to be due.
                for (long key = 2; swept == 0; key += 4) {
                    assertTrue(key <= 2L * fixture.loaded && System.nanoTime() < deadline, "swept while deleting: " + swept);
                    assertTrue(s.delete(key), "delete " + key);
                    model.remove(key);
                    swept += engine.sweep(quiet);
                    Thread.sleep(2);
                }
            }
            assertTrue(engine.merges.counts()[0] > 0, "merged");
            readsMatch(fixture, engine, model);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void splitsReuseTheLeavesAMergeFreed() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            DexEngine engine = fixture.open(1, CACHED).get(0);
            TreeMap<Long, Long> model = deleteShare(fixture, engine, 0.9, 11);
            for (int p = 0; p < fixture.table.count(); p++) {
                engine.merge(p);
            }
            int free = 0;
            for (int p = 0; p < fixture.table.count(); p++) {
                free += engine.merges.freeCount(p);
            }
            assertTrue(free > 100, "dead leaves ready for reuse: " + free);
            long chunksBefore = chunksTaken(fixture.admin);
            // Insert every other odd key (5,000): the leaves fill and split again, some 250 times, fewer than the free leaves.
            try (DexSession session = engine.newSession()) {
                WideKeys.Session s = fixture.wide.of(session);
                for (long key = 1; key < 2L * fixture.loaded; key += 4) {
                    assertTrue(s.insert(key, key + 1), "insert " + key);
                    model.put(key, key + 1);
                }
            }
            long[] counts = engine.merges.counts();
            assertTrue(counts[1] > 100 && counts[1] < free, "splits reused dead leaves: " + counts[1] + " of " + free);
            // Without reuse, the ~200 splits would take 3-4 chunks of 64 nodes; the split inner nodes may take one.
            assertTrue(chunksTaken(fixture.admin) - chunksBefore <= 1,
                    "the splits took no more chunks while dead leaves were free: " + chunksBefore + " -> " + chunksTaken(fixture.admin)
                            + "; free " + free + ", reused " + engine.merges.counts()[1]);
            readsMatch(fixture, engine, model);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /** Writes to one address fail (after being applied, with {@code applied}) while switched on. */
    static final class FailingWrites extends ForwardingRemoteMemory {
        volatile long failAddress = -1;
        volatile boolean applied;
        volatile int failed;

        FailingWrites(RemoteMemory delegate) {
            super(delegate);
        }

        @Override
        public void write(long address, DirectBuffer src, int srcOffset, int length) {
            if (address == failAddress) {
                failed++;
                if (applied) {
                    super.write(address, src, srcOffset, length);
                }
                throw new FabricException("write to " + address + " failed (injected)");
            }
            super.write(address, src, srcOffset, length);
        }
    }

    /** The engines' connections {@link #open} makes from now on, each wrapped to fail writes to one address. */
    static List<FailingWrites> failingConnections(DexFixture fixture) {
        List<FailingWrites> connections = new ArrayList<>();
        fixture.connectionWrapper = memory -> {
            FailingWrites failing = new FailingWrites(memory);
            connections.add(failing);
            return failing;
        };
        return connections;
    }

    @ParameterizedTest(name = "parent write applied={0}")
    @CsvSource({"false", "true"})
    void aMergeWhoseParentWriteFailsLeavesATreeReadersReadRightAndIsRepaired(boolean applied) {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            List<FailingWrites> connections = failingConnections(fixture);
            DexEngine engine = fixture.open(1, DexEngineSettings.dex(2_000L * FrameHeaderDescriptor.FRAME_LENGTH)).get(0);
            int p = 1;
            TreeMap<Long, Long> model = deleteShare(fixture, engine, 0.9, 13);
            engine.checkpointAll();
            // A level-1 node of partition p with leaves left to merge: the first one the pass writes.
            long parent = firstLevelOneInside(fixture, p);
            FailingWrites failing = connections.get(0);
            failing.applied = applied;
            failing.failAddress = parent;
            int childrenBefore = read(fixture, dev.dex.core.tree.Superblock.read(fixture.admin).keyFormat(), parent).count();
            engine.merge(p);
            assertTrue(failing.failed > 0, "the parent's write failed");
            int childrenAfter = read(fixture, dev.dex.core.tree.Superblock.read(fixture.admin).keyFormat(), parent).count();
            assertEquals(applied, childrenAfter < childrenBefore, "the parent lost children only if its write was applied: "
                    + childrenBefore + " -> " + childrenAfter);
            readsMatch(fixture, engine, model);
            failing.failAddress = -1;
            engine.repair();
            assertEquals(0, engine.pendingUnlocks(), "nothing left pending: the widened leaves are not the split repair's");
            engine.merge(p); // clips the widened leaves the parent may not show, and merges
            readsMatch(fixture, engine, model);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void aMergeInterruptedBeforeItsParentWriteIsReadRightByTheNextOwner() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0)) {
            List<FailingWrites> connections = failingConnections(fixture);
            DexEngine first = fixture.open(1, DexEngineSettings.dex(2_000L * FrameHeaderDescriptor.FRAME_LENGTH)).get(0);
            int p = 2;
            TreeMap<Long, Long> model = deleteShare(fixture, first, 0.9, 17);
            first.checkpointAll();
            long parent = firstLevelOneInside(fixture, p);
            connections.get(0).failAddress = parent;
            first.merge(p);
            // The owner goes away without repairing (as if it died after the widened leaves' writes).
            first.splitsToRepair.clear();
            first.abandon(p);
            DexEngine next = fixture.openEngine(DexEngineSettings.dex(2_000L * FrameHeaderDescriptor.FRAME_LENGTH), null);
            next.acquire(p);
            readsMatch(fixture, next, model, p);
            next.merge(p); // its pass clips the widened leaves to their slots and merges them
            fixture.engines.remove(first);
            first.close();
            TreeMap<Long, Long> stored = fixture.validateFlushAndRead();
            assertEquals(model, stored);
        }
    }

    /** Chunks taken from memory server 0 so far (the region header's counter). */
    static long chunksTaken(RemoteMemory admin) {
        org.agrona.concurrent.UnsafeBuffer word = new org.agrona.concurrent.UnsafeBuffer(new byte[8]);
        admin.read(dev.dex.rdma.GlobalAddress.of(0, dev.dex.rdma.RegionHeaderDescriptor.NEXT_CHUNK_OFFSET), word, 0, 8);
        return word.getLong(0, java.nio.ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Pairs of neighbouring leaves under a level-1 node inside one partition whose entries together fit in a merged
     * leaf: after a merge pass over every partition there is none (the merge is greedy, left to right).
     */
    private static int mergeableNeighbours(DexFixture fixture, Merges merges) {
        dev.dex.core.node.KeyFormat keys = dev.dex.core.tree.Superblock.read(fixture.admin).keyFormat();
        int leafFill = (int) (keys.leafCapacity() * Merges.MERGED_FILL);
        int innerFill = (int) (keys.innerCapacity() * Merges.MERGED_FILL);
        int pairs = 0;
        java.util.ArrayDeque<Long> pending = new java.util.ArrayDeque<>(List.of(dev.dex.core.tree.Superblock.read(fixture.admin).root()));
        while (!pending.isEmpty()) {
            dev.dex.core.node.NodeView node = read(fixture, keys, pending.poll());
            if (node.level() == 1 || node.level() == 2) {
                for (int i = 0; i < node.count(); i++) {
                    dev.dex.core.node.NodeView left = read(fixture, keys, node.child(i));
                    dev.dex.core.node.NodeView right = read(fixture, keys, node.child(i + 1));
                    int owner = fixture.table.ownerOf(left);
                    if (owner >= 0 && owner == fixture.table.ownerOf(right) && dev.dex.core.node.NodeMerge.countAbsorbing(left, right)
                            <= (node.level() == 1 ? leafFill : innerFill)) {
                        pairs++;
                    }
                }
            }
            if (node.level() > 1) {
                for (int i = 0; i <= node.count(); i++) {
                    pending.add(node.child(i));
                }
            }
        }
        return pairs;
    }

    private static dev.dex.core.node.NodeView read(DexFixture fixture, dev.dex.core.node.KeyFormat keys, long address) {
        dev.dex.core.node.NodeView node = new dev.dex.core.node.NodeView(keys).wrap(
                new org.agrona.concurrent.UnsafeBuffer(new byte[dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH]), 0);
        fixture.admin.read(address, node.buffer(), 0, dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH);
        return node;
    }

    /**
     * Engine A caches the level-1 nodes over the boundary of its partition 0 (they span both partitions); engine B,
     * holding partition 1, deletes most of its keys and merges, rewriting those spanning nodes, so A's copies are stale.
     * Then A takes partition 1 over, and writes and reads every key of it: a stale copy would route a key to a widened
     * leaf with the old, narrower slot, and a clip of that leaf, cached dirty, would write R's entries away.
     */
    @Test
    void aNewOwnerWhoseSpanningParentsPredateAMergeReadsAndWritesItRight() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 2, true, 0)) {
            DexEngineSettings everyLeaf = DexEngineSettings.dex(4_000L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);
            DexEngine a = fixture.openEngine(everyLeaf, null);
            DexEngine b = fixture.openEngine(everyLeaf, null);
            a.acquire(0);
            b.acquire(1);
            TreeMap<Long, Long> model = fixture.initialModel();
            readsMatch(fixture, a, model, 0); // caches partition 0's paths, the spanning nodes at its end among them
            List<Long> keys = new ArrayList<>(model.keySet());
            Collections.shuffle(keys, new java.util.Random(23));
            try (DexSession session = b.newSession()) {
                WideKeys.Session s = fixture.wide.of(session);
                for (long key : keys) {
                    if (fixture.partitionOf(key) == 1 && key % 10 != 0) {
                        assertTrue(s.delete(key));
                        model.remove(key);
                    }
                }
            }
            assertTrue(b.merge(1)[0] > 0, "partition 1's leaves merged");
            b.release(1);
            a.acquire(1);
            try (DexSession session = a.newSession()) {
                WideKeys.Session s = fixture.wide.of(session);
                for (long key : new ArrayList<>(model.keySet())) {
                    if (fixture.partitionOf(key) == 1) {
                        assertTrue(s.put(key, key + 7), "put " + key);
                        model.put(key, key + 7);
                    }
                }
            }
            readsMatch(fixture, a, model, 1);
            a.release(1);
            a.acquire(1);
            readsMatch(fixture, a, model, 1); // from remote memory again
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /** The address of the first level-1 node lying wholly inside partition {@code p} (remote memory, at rest). */
    private static long firstLevelOneInside(DexFixture fixture, int p) {
        dev.dex.core.node.KeyFormat keys = dev.dex.core.tree.Superblock.read(fixture.admin).keyFormat();
        java.util.ArrayDeque<Long> pending = new java.util.ArrayDeque<>(List.of(dev.dex.core.tree.Superblock.read(fixture.admin).root()));
        while (!pending.isEmpty()) {
            dev.dex.core.node.NodeView node = new dev.dex.core.node.NodeView(keys).wrap(
                    new org.agrona.concurrent.UnsafeBuffer(new byte[dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH]), 0);
            long address = pending.poll();
            fixture.admin.read(address, node.buffer(), 0, dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH);
            if (node.level() == 1 && fixture.table.ownerOf(node) == p && node.count() > 0) {
                return address;
            }
            if (node.level() > 1) {
                for (int i = 0; i <= node.count(); i++) {
                    pending.add(node.child(i));
                }
            }
        }
        throw new AssertionError("no level-1 node inside partition " + p);
    }

    /**
     * Threads delete most of their keys and insert others back, on C engines with small caches, while the engines merge
     * what the deletes leave sparse and their splits reuse the leaves merged away, and a thread of its own sweeps the
     * engines all along (with a quiet time of 1 ns, so that the partitions are swept in steps, with parks between
     * them, as soon as they are due or late). Thread t alone writes the keys {@code k} with {@code k % threads == t};
     * its map is the model. Ends with the cache validator, a flush, the tree validator and the comparison.
     */
    @ParameterizedTest(name = "engines={0} threads={1} frames={2} P_A={3} leafFences={4} redoLog={5}")
    @CsvSource({
            "1, 2, 600, 1.0, true,  false",
            "1, 4, 48,  0.5, true,  false",
            "2, 4, 64,  0.3, false, false",
            "2, 4, 64,  0.5, false, true"})
    void concurrentDeletesAndInsertsWithMergesKeepEveryLastWrite(int engines, int threads, int frames, double admission,
                                                                  boolean leafFences, boolean redoLog) throws Exception {
        try (DexFixture fixture = new DexFixture(1, 3, 12_000, 4, leafFences, 0)) {
            fixture.redoLog = redoLog ? dev.dex.core.log.RedoLogSettings.ON.withBytes(256 << 10) : dev.dex.core.log.RedoLogSettings.OFF;
            List<DexEngine> list = fixture.open(engines, new DexEngineSettings("dex", (long) frames * FrameHeaderDescriptor.FRAME_LENGTH,
                    DexEngineSettings.DEFAULT_COOLING_RATIO, admission));
            List<Map<Long, Long>> models = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                models.add(new HashMap<>());
            }
            fixture.initialModel().forEach((k, v) -> models.get((int) (k % threads)).put(k, v));
            CountDownLatch start = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                Thread worker = new Thread(() -> {
                    WideKeys.Session[] sessions = list.stream().map(e -> fixture.wide.of(e.newSession())).toArray(WideKeys.Session[]::new);
                    try {
                        start.await();
                        churn(fixture, sessions, id, threads, models.get(id));
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        for (WideKeys.Session s : sessions) {
                            s.session().close();
                        }
                    }
                }, "dex-merge-stress-" + t);
                workers.add(worker);
                worker.start();
            }
            java.util.concurrent.atomic.AtomicBoolean churning = new java.util.concurrent.atomic.AtomicBoolean(true);
            Thread sweeper = new Thread(() -> {
                try {
                    start.await();
                    while (churning.get()) {
                        for (DexEngine engine : list) {
                            engine.sweep(1);
                        }
                        Thread.sleep(1);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "dex-merge-stress-sweeper");
            sweeper.start();
            start.countDown();
            for (Thread worker : workers) {
                worker.join(TimeUnit.MINUTES.toMillis(3));
                assertFalse(worker.isAlive(), worker.getName() + " did not finish");
            }
            churning.set(false);
            sweeper.join(TimeUnit.MINUTES.toMillis(1));
            assertFalse(sweeper.isAlive(), "the sweeper did not finish");
            assertNull(failure.get(), () -> "worker failed: " + failure.get());
            long swept = list.stream().mapToLong(e -> e.merges.sweeps.steps()).sum();
            assertTrue(swept > 0, "sweeps ran steps beside the churn: " + swept);
            long merged = 0;
            long reused = 0;
            for (DexEngine engine : list) {
                merged += engine.merges.counts()[0];
                reused += engine.merges.counts()[1];
            }
            assertTrue(merged > 50, "the deletes merged leaves: " + merged);
            assertTrue(reused > 10, "the inserts' splits reused merged leaves: " + reused);
            TreeMap<Long, Long> expected = new TreeMap<>();
            models.forEach(expected::putAll);
            assertEquals(expected, fixture.validateFlushAndRead());
        }
    }

    /** Three rounds: delete about 85% of the own keys in a random order with lookups between, then insert as many back. */
    private static void churn(DexFixture fixture, WideKeys.Session[] sessions, int id, int threads, Map<Long, Long> model) {
        SplittableRandom random = new SplittableRandom(id * 7919L + 5);
        long range = 2L * fixture.loaded + 2;
        for (int round = 0; round < 3; round++) {
            List<Long> own = new ArrayList<>(model.keySet());
            Collections.shuffle(own, new java.util.Random(random.nextLong()));
            for (int i = 0; i < own.size() * 85 / 100; i++) {
                long key = own.get(i);
                WideKeys.Session s = sessions[fixture.partitionOf(key) % sessions.length];
                assertEquals(model.remove(key) != null, s.delete(key), "delete " + key);
                long probe = random.nextLong(1, range);
                probe = probe - Math.floorMod(probe, (long) threads) + id;
                WideKeys.Session ps = sessions[fixture.partitionOf(probe) % sessions.length];
                Long expected = model.get(probe);
                assertEquals(expected != null, ps.lookup(probe), "lookup " + probe);
                if (expected != null) {
                    assertEquals(expected, ps.value(), "value of " + probe);
                }
            }
            for (int i = 0; i < own.size() * 85 / 100; i++) {
                long key = random.nextLong(1, range);
                key = key - Math.floorMod(key, (long) threads) + id;
                if (key < 1) {
                    continue;
                }
                long value = key * 31 + round;
                WideKeys.Session s = sessions[fixture.partitionOf(key) % sessions.length];
                assertEquals(model.put(key, value) != null, s.put(key, value), "put " + key);
            }
        }
    }
}
