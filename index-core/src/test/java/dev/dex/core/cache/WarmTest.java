package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.RemoteMemory;

/**
 * A new owner's warm-up of a partition ({@link DexEngine#warm}): it reads every inner node over the partition's keys
 * and no leaf, so the partition's first operations read only their leaves; it goes on through splits made beside it.
 */
class WarmTest {
    private static final DexEngineSettings NO_LEAVES = DexEngineSettings.dex(4_000L * FrameHeaderDescriptor.FRAME_LENGTH)
            .withLeafAdmission(0);

    /** The nodes of the tree in remote memory whose key range meets {@code partition}'s, by level (0: leaves). */
    private static List<List<NodeView>> nodesOver(DexFixture fixture, int partition) {
        RemoteMemory admin = fixture.admin;
        KeyFormat keys = KeyFormat.of(fixture.wide.words() * 8);
        int words = keys.words();
        long[] low = new long[words];
        long[] high = new long[words];
        long[] partitionLow = new long[words];
        long[] partitionHigh = new long[words];
        fixture.table.lowerExclusive(partition, partitionLow, words);
        fixture.table.upperInclusive(partition, partitionHigh, words);
        List<List<NodeView>> levels = new ArrayList<>();
        ArrayDeque<Long> pending = new ArrayDeque<>(List.of(Superblock.read(admin).root()));
        while (!pending.isEmpty()) {
            NodeView node = new NodeView(keys).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
            admin.read(pending.poll(), node.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
            node.lowFence(low);
            node.highFence(high);
            // (low, high] meets (partitionLow, partitionHigh]
            if (keys.compare(low, 0, partitionHigh, 0) >= 0 || keys.compare(partitionLow, 0, high, 0) >= 0) {
                continue;
            }
            while (levels.size() <= node.level()) {
                levels.add(new ArrayList<>());
            }
            levels.get(node.level()).add(node);
            if (!node.isLeaf()) {
                for (int i = 0; i <= node.count(); i++) {
                    pending.add(node.child(i));
                }
            }
        }
        return levels;
    }

    private static long reads(DexEngine engine) {
        return engine.memory.counters().snapshot().reads();
    }

    /** Hands partition {@code p} from the engine holding every partition to a new engine, which starts cold. */
    private static DexEngine moveToNewEngine(DexFixture fixture, int p) {
        return moveToNewEngine(fixture, p, NO_LEAVES);
    }

    /** As above, the new engine opened with {@code settings}. */
    private static DexEngine moveToNewEngine(DexFixture fixture, int p, DexEngineSettings settings) {
        fixture.engines.get(0).release(p);
        DexEngine fresh = fixture.openEngine(settings, null);
        fresh.acquire(p);
        return fresh;
    }

    /** The loaded keys of partition {@code p}. */
    private static long keysOf(DexFixture fixture, int p) {
        return fixture.initialModel().keySet().stream().filter(k -> fixture.partitionOf(k) == p).count();
    }

    @ParameterizedTest(name = "{0}-byte keys")
    @ValueSource(ints = {8, 24})
    void warmingReadsEveryInnerNodeOverThePartitionOnceAndNoLeaf(int keyBytes) {
        try (DexFixture fixture = new DexFixture(2, 2, 60_000, 8, true, 0, 0.7, false, keyBytes)) {
            fixture.open(1, NO_LEAVES);
            for (int p : new int[] {0, 5, 7}) { // the first (minus infinity below), one inside, the last (plus infinity above)
                DexEngine fresh = moveToNewEngine(fixture, p);
                List<List<NodeView>> over = nodesOver(fixture, p);
                assertTrue(over.size() >= 3, "a tree of at least three levels: " + over.size());
                long inner = over.stream().skip(1).mapToLong(List::size).sum();

                CacheStats before = fresh.stats();
                int descents = fresh.warm(p);
                CacheStats after = fresh.stats();

                assertEquals(over.get(1).size(), descents, "partition " + p + ": one descent per node above the leaves");
                assertEquals(inner, after.misses() - before.misses(), "each inner node over the partition missed once, no leaf");
                assertEquals(inner, after.admissions() - before.admissions(), "and admitted");
                long reads = reads(fresh);
                assertEquals(0, fresh.warm(p) - descents, "warmed again: the same descents");
                assertEquals(reads, reads(fresh), "warmed again: nothing read");
                for (int level = 1; level < over.size(); level++) {
                    for (NodeView node : over.get(level)) {
                        assertTrue(fresh.mapping.get(node.address()) >= 0, "inner node at level " + level + " cached");
                    }
                }
                for (NodeView leaf : over.get(0)) {
                    assertTrue(fresh.mapping.get(leaf.address()) < 0, "no leaf cached");
                }
                CacheValidator.validate(fresh);
            }
        }
    }

    /** A node whose IO marker another session keeps (a read that never ends) stops a warm-up only for its time limit. */
    @Test
    void aWarmUpThatKeepsRestartingEndsAtItsLimit() {
        try (DexFixture fixture = new DexFixture(1, 3, 60_000, 8, true, 0)) {
            fixture.open(1, NO_LEAVES);
            int p = 3;
            DexEngine fresh = moveToNewEngine(fixture, p);
            List<NodeView> levelOne = nodesOver(fixture, p).get(1);
            assertTrue(levelOne.size() >= 3);
            long blocked = levelOne.get(1).address();
            assertEquals(MappingTable.ABSENT, fresh.mapping.putIfAbsent(blocked, MappingTable.IO));
            long start = System.nanoTime();
            int descents = fresh.warm(p, TimeUnit.MILLISECONDS.toNanos(100));
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertEquals(1, descents, "it got through the first node above the leaves, and no further");
            assertTrue(millis < 5_000, "it ended at its limit, not the restart budget's minute: " + millis + " ms");
            assertTrue(fresh.mapping.remove(blocked, MappingTable.IO));
            assertEquals(levelOne.size(), fresh.warm(p), "once the marker is gone, it goes through");
            CacheValidator.validate(fresh);
        }
    }

    @Test
    void afterTheWarmUpAPartitionsFirstLookupsReadOnlyTheirLeaves() {
        try (DexFixture fixture = new DexFixture(1, 3, 60_000, 8, true, 0)) {
            fixture.open(1, NO_LEAVES);
            DexEngine warmed = moveToNewEngine(fixture, 2);
            DexEngine cold = moveToNewEngine(fixture, 6);
            assertTrue(warmed.warm(2) > 1);
            long warmedReads = firstLookupReads(fixture, warmed, 2);
            long coldReads = firstLookupReads(fixture, cold, 6);
            long warmedKeys = keysOf(fixture, 2);
            long coldKeys = keysOf(fixture, 6);
            // No leaf is admitted (P_A = 0), so every lookup reads its leaf.
            assertEquals(warmedKeys, warmedReads, "one read per lookup, its leaf, nothing above it");
            assertTrue(coldReads > coldKeys, "a cold partition's lookups read inner nodes too: " + coldReads + " for " + coldKeys);
            assertEquals(fixture.initialModel(), fixture.validateFlushAndRead());
        }
    }

    /**
     * After a warm-up a partition's leaves are admitted on their first read, though P_A is almost 0, so a second pass
     * over its keys reads nothing; a partition acquired cold still reads most of its leaves the second time, and a
     * release ends the boost.
     */
    @Test
    void afterAWarmUpAPartitionsLeavesAreAdmittedOnTheirFirstRead() {
        DexEngineSettings rare = DexEngineSettings.dex(4_000L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(0.001);
        try (DexFixture fixture = new DexFixture(1, 3, 60_000, 8, true, 0)) {
            fixture.open(1, rare);
            DexEngine warmed = moveToNewEngine(fixture, 2, rare);
            assertTrue(warmed.warm(2) > 1);
            DexEngine cold = moveToNewEngine(fixture, 6, rare);
            int leaves = nodesOver(fixture, 2).get(0).size();
            long keys = keysOf(fixture, 6);

            assertEquals(leaves, firstLookupReads(fixture, warmed, 2), "each leaf read once, then cached");
            assertEquals(0, firstLookupReads(fixture, warmed, 2), "the second pass reads nothing");
            firstLookupReads(fixture, cold, 6);
            assertTrue(firstLookupReads(fixture, cold, 6) > keys / 2, "a cold partition's leaves are still read");

            warmed.release(2);
            warmed.acquire(2); // no warm-up this time: P_A again
            long again = firstLookupReads(fixture, warmed, 2);
            assertTrue(firstLookupReads(fixture, warmed, 2) > again / 2, "the boost ended with the release");
            CacheValidator.validate(warmed);
            assertEquals(fixture.initialModel(), fixture.validateFlushAndRead());
        }
    }

    /** The boost admits at most the partition's share of the frames: all of them for an engine that holds one. */
    @Test
    void theBoostAdmitsAtMostThePartitionsShareOfTheFrames() {
        DexEngineSettings small = DexEngineSettings.dex(40L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(0.001);
        try (DexFixture fixture = new DexFixture(1, 3, 60_000, 8, true, 0)) {
            fixture.open(1, NO_LEAVES);
            DexEngine fresh = moveToNewEngine(fixture, 3, small);
            int frames = fresh.arena.frames();
            assertTrue(nodesOver(fixture, 3).get(0).size() > 2 * frames, "more leaves than frames: " + frames);
            fresh.warm(3);
            long before = fresh.stats().admissions();
            firstLookupReads(fixture, fresh, 3);
            long admitted = fresh.stats().admissions() - before;
            assertTrue(admitted >= frames - 5 && admitted <= frames + 10, "about the frames' worth (" + frames + "): " + admitted);
            CacheValidator.validate(fresh);
        }
    }

    /** Looks up every loaded key of {@code p}, in order; the remote reads they took. */
    private static long firstLookupReads(DexFixture fixture, DexEngine engine, int p) {
        long before = reads(engine);
        try (DexSession session = engine.newSession()) {
            for (long key : fixture.initialModel().keySet()) {
                if (fixture.partitionOf(key) == p) {
                    assertTrue(session.lookup(key), "key " + key);
                }
            }
        }
        return reads(engine) - before;
    }

    @Test
    void aPartitionNotHeldIsNotWarmed() {
        try (DexFixture fixture = new DexFixture(1, 3, 4_000, 4, true, 0)) {
            fixture.open(1, NO_LEAVES);
            DexEngine fresh = fixture.openEngine(NO_LEAVES, null);
            long reads = reads(fresh);
            assertEquals(-1, fresh.warm(1));
            assertEquals(reads, reads(fresh));
        }
    }

    /**
     * Writers split the partition's leaves and inner nodes while it is warmed, again and again: every warm-up ends,
     * the cache stays valid, and no write is lost.
     */
    @Test
    void warmingGoesOnThroughSplitsMadeBesideIt() throws Exception {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 4, true, 0, 1.0)) {
            DexEngine engine = fixture.open(1, NO_LEAVES).get(0);
            int p = 1;
            TreeMap<Long, Long> model = fixture.initialModel();
            List<Long> keys = new ArrayList<>();
            for (long k : model.keySet()) {
                if (fixture.partitionOf(k) == p) {
                    keys.add(k + 1); // odd keys: new, between the loaded ones, so every leaf (full) splits
                }
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> writers = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int slice = t;
                Thread writer = new Thread(() -> {
                    try (DexSession session = engine.newSession()) {
                        for (int i = slice; i < keys.size(); i += 2) {
                            session.put(keys.get(i), keys.get(i) * 3);
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                });
                writers.add(writer);
                writer.start();
            }
            int warmUps = 0;
            while (writers.stream().anyMatch(Thread::isAlive)) {
                assertTrue(engine.warm(p) > 0);
                warmUps++;
                if (ThreadLocalRandom.current().nextInt(4) == 0) {
                    Thread.onSpinWait();
                }
            }
            for (Thread writer : writers) {
                writer.join();
            }
            assertEquals(null, failure.get());
            assertTrue(warmUps > 0);
            int levelOne = nodesOver(fixture, p).get(1).size();
            assertEquals(levelOne, engine.warm(p), "at rest, one descent per node above the leaves");
            for (long k : keys) {
                model.put(k, k * 3);
            }
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }
}
