package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;

import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.partition.PartitionedEngine.ReleaseReport;
import dev.dex.core.node.KeyFormat;

/**
 * Logical repartitioning: partitions move between two engines (release on one, acquire on the other)
 * while other partitions stay under load. Moved partitions carry dirty cached pages that the release
 * must write back, or the new owner, starting cold, would read stale nodes.
 */
class RepartitionTest {

    @Test
    void releaseWritesBackDirtyPagesAndTheNewOwnerSeesThem() {
        try (DexFixture fixture = new DexFixture(1, 3, 4_000, 4, true, 0)) {
            DexEngineSettings config = DexEngineSettings.dex(400L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);
            List<DexEngine> engines = fixture.open(2, config);
            DexEngine a = engines.get(0);
            DexEngine b = engines.get(1);
            long key = fixture.table.upperInclusive(0) - 1;
            DexSession sa = a.newSession();
            assertTrue(sa.lookup(key) || !sa.lookup(key));
            assertFalse(sa.update(-99, 1), "nothing to update outside the loaded keys");
            sa.put(key, 12345);
            assertTrue(a.dirtyFrames.get() > 0, "an owned leaf write stays in the cache, dirty");

            ReleaseReport report = a.release(0);
            assertEquals(0, report.partition());
            assertTrue(report.pagesWritten() >= 1, "the dirty leaf is written back: " + report);
            assertEquals(report.pagesWritten() * 1024, report.bytesWritten());
            assertTrue(report.framesDropped() >= report.pagesWritten());
            assertEquals(0, a.dirtyFrames.get());
            assertThrows(PartitionNotHeldException.class, () -> sa.lookup(key));
            CacheValidator.validate(a);

            b.acquire(0);
            DexSession sb = b.newSession();
            assertTrue(sb.lookup(key));
            assertEquals(12345, sb.value(), "the new owner reads what the old owner wrote back");
            ReleaseReport again = a.release(0);
            assertEquals(0, again.pagesWritten(), "releasing a partition not held does nothing");
            sa.close();
            sb.close();
        }
    }

    /**
     * A split of a shared node can narrow it into a partition this engine does not hold. Its cached copy
     * must then be treated as another engine's node (it goes stale as that engine changes it), and
     * acquiring the partition later must not trust it.
     */
    @Test
    void aNodeNarrowedIntoAnotherEnginesPartitionIsNotTrustedAfterAcquiringIt() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 1, false, 0, 1.0)) {
            RemoteMemory admin = fixture.admin;
            FullSharedNode shared = FullSharedNode.storeTableThrough(admin);
            NodeView x = shared.x();
            long bound = shared.bound();
            DexEngineSettings config = DexEngineSettings.withCache("no-offload", 400L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);
            DexEngine a = DexEngine.open(fixture.fabric.connect(0), config);
            DexEngine b = DexEngine.open(fixture.fabric.connect(0), config);
            a.acquire(0);
            b.acquire(1);
            TreeMap<Long, Long> model = fixture.initialModel();
            DexSession sb = b.newSession();
            // B's insert below the full shared node splits it at `bound`: its left half now lies in A.
            long bKey = bound + 1 + 2 * 200;
            assertTrue(sb.insert(bKey, 1));
            model.put(bKey, 1L);
            // A inserts under the left half: leaf splits add separators there, dirty in A's cache.
            DexSession sa = a.newSession();
            List<Long> aKeys = new ArrayList<>();
            for (long k = x.lowFence() + 1 + 60; k < bound; k += 118) {
                long key = k | 1;
                assertTrue(sa.insert(key, -key));
                model.put(key, -key);
                aKeys.add(key);
            }
            assertTrue(aKeys.size() > 20);
            sa.close();
            assertTrue(a.release(0).pagesWritten() > 0, "A's dirty nodes are written back");
            b.acquire(0);
            for (long key : aKeys) {
                assertTrue(sb.lookup(key), "key " + key + " written by A is found by B after the move");
                assertEquals(-key, sb.value());
            }
            sb.close();
            CacheValidator.validate(a);
            CacheValidator.validate(b);
            a.close();
            b.close();
            TreeMap<Long, Long> stored = new TreeMap<>();
            TreeValidator.validate(admin, stored::put);
            assertEquals(model, stored);
        }
    }

    /**
     * A release finds a partition's frames by the owner hints set at admission ({@link FrameArena#ownerHint}). A node
     * that spanned two partitions when it was cached and was then narrowed into one by a split is hinted as spanning:
     * a release of that partition must still find it and drop it.
     */
    @Test
    void aCachedNodeNarrowedIntoAPartitionLeavesTheCacheWithItsRelease() {
        try (DexFixture fixture = new DexFixture(1, 3, 20_000, 1, false, 0, 1.0)) {
            RemoteMemory admin = fixture.admin;
            FullSharedNode shared = FullSharedNode.storeTableThrough(admin);
            NodeView root = shared.root();
            NodeView x = shared.x();
            long bound = shared.bound();
            DexEngineSettings config = DexEngineSettings.withCache("no-offload", 400L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);
            try (DexEngine a = DexEngine.open(fixture.fabric.connect(0), config)) {
                a.acquire(0);
                a.acquire(1);
                DexSession session = a.newSession();
                assertTrue(session.lookup(x.key(1)), "x is cached, spanning both partitions");
                int spanning = frameOf(a, root.child(2));
                assertEquals(FrameArena.SPANS, a.arena.ownerHint(spanning));
                // An insert below x in partition 1 splits x at `bound`: its left half, still in the same frame, lies in 0.
                assertTrue(session.insert(bound + 1 + 2 * 200, 1));
                NodeView narrowed = a.arena.wrap(new NodeView(a.keys), spanning);
                assertEquals(root.child(2), a.arena.address(spanning), "x's left half stays cached in its frame");
                assertEquals(0, a.partitions.ownerOf(narrowed), "x's left half lies in partition 0: " + narrowed);
                session.close();

                a.release(0);
                assertEquals(List.of(), framesIn(a, 0), "no frame of partition 0 stays cached after its release");
                CacheValidator.validate(a);
            }
        }
    }

    /**
     * A full level-1 node {@code x} below {@code root} of a tree bulk-loaded at fill 1.0, and the two-partition table
     * stored with its bound at {@code x}'s middle key, so that x spans both partitions and its split there narrows it.
     */
    private record FullSharedNode(NodeView root, NodeView x, long bound) {
        static FullSharedNode storeTableThrough(RemoteMemory admin) {
            NodeView root = read(admin, Superblock.read(admin).root());
            NodeView x = read(admin, root.child(2));
            assertTrue(x.isFull(), "bulk load at fill 1.0 leaves level-1 nodes full");
            long bound = x.key(KeyFormat.EIGHT.innerCapacity() / 2);
            PartitionTable.store(admin, PartitionTable.ofUpperBounds(bound));
            return new FullSharedNode(root, x, bound);
        }
    }

    /** The frame that caches {@code address} in {@code engine}, or fails. */
    private static int frameOf(DexEngine engine, long address) {
        for (int f = 0; f < engine.arena.frames(); f++) {
            if (engine.arena.state(f) != FrameHeaderDescriptor.FREE && engine.arena.address(f) == address) {
                return f;
            }
        }
        throw new AssertionError("nothing caches " + address);
    }

    /** The frames of {@code engine} that cache a node inside {@code partition}. */
    private static List<Integer> framesIn(DexEngine engine, int partition) {
        List<Integer> frames = new ArrayList<>();
        NodeView view = new NodeView(engine.keys);
        for (int f = 0; f < engine.arena.frames(); f++) {
            if (engine.arena.state(f) != FrameHeaderDescriptor.FREE && engine.partitions.ownerOf(engine.arena.wrap(view, f)) == partition) {
                frames.add(f);
            }
        }
        return frames;
    }

    private static NodeView read(RemoteMemory memory, long address) {
        NodeView view = new NodeView().wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        memory.read(address, view.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
        return view;
    }

    @Test
    void partitionsMoveBackAndForthWhileOthersAreUnderLoad() throws Exception {
        try (DexFixture fixture = new DexFixture(2, 1, 6_000, 8, false, 0)) {
            DexEngineSettings config = DexEngineSettings.dex(64L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(0.5);
            List<DexEngine> engines = fixture.open(2, config);
            // Partitions 0 and 1 move; the rest stay where fixture.open put them (p % 2).
            int[] moving = {0, 1};
            Map<Long, Long> stableModel = new HashMap<>();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> loaders = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int id = t;
                Map<Long, Long> model = new HashMap<>();
                Thread loader = new Thread(() -> {
                    DexSession[] sessions = {engines.get(0).newSession(), engines.get(1).newSession()};
                    SplittableRandom random = new SplittableRandom(id + 11);
                    long low = fixture.table.upperInclusive(1) + 1;
                    long high = 2L * fixture.loaded;
                    try {
                        for (int op = 1; !stop.get(); op++) {
                            // Odd keys were never loaded; thread id owns the keys 4r + 1 + 2 id.
                            long key = random.nextLong(low, high) / 4 * 4 + 1 + 2 * id;
                            DexSession s = sessions[fixture.table.partitionOf(key) % 2];
                            long value = key * 1000 + op % 1000;
                            assertEquals(model.put(key, value) != null, s.put(key, value), "put " + key);
                            long neighbour = key - 4;
                            if (fixture.table.partitionOf(neighbour) >= 2) {
                                DexSession n = sessions[fixture.table.partitionOf(neighbour) % 2];
                                assertEquals(model.containsKey(neighbour), n.lookup(neighbour), "lookup " + neighbour);
                                if (model.containsKey(neighbour)) {
                                    assertEquals(model.get(neighbour), n.value(), "value of " + neighbour);
                                }
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        synchronized (stableModel) {
                            stableModel.putAll(model);
                        }
                        for (DexSession s : sessions) {
                            s.close();
                        }
                    }
                }, "stable-load-" + t);
                loaders.add(loader);
                loader.start();
            }

            TreeMap<Long, Long> movingModel = new TreeMap<>(fixture.initialModel().headMap(fixture.table.upperInclusive(1), true));
            int[] owner = {0, 1};
            SplittableRandom random = new SplittableRandom(5);
            long movedPages = 0;
            for (int round = 0; round < 40; round++) {
                for (int i = 0; i < moving.length; i++) {
                    int p = moving[i];
                    DexEngine current = engines.get(owner[i]);
                    DexSession s = current.newSession();
                    for (int w = 0; w < 30; w++) {
                        long low = Math.max(0, fixture.table.lowerExclusive(p)) + 1;
                        long key = low + random.nextLong(fixture.table.upperInclusive(p) - low + 1);
                        long value = round * 100_000L + w;
                        assertEquals(movingModel.put(key, value) != null, s.put(key, value));
                    }
                    s.close();
                    ReleaseReport report = current.release(p);
                    movedPages += report.pagesWritten();
                    owner[i] = 1 - owner[i];
                    engines.get(owner[i]).acquire(p);
                    DexSession check = engines.get(owner[i]).newSession();
                    for (var e : movingModel.entrySet()) {
                        if (fixture.table.partitionOf(e.getKey()) == p) {
                            assertTrue(check.lookup(e.getKey()), "key " + e.getKey() + " after move " + round);
                            assertEquals(e.getValue(), check.value(), "key " + e.getKey() + " after move " + round);
                        }
                    }
                    check.close();
                }
            }
            stop.set(true);
            for (Thread loader : loaders) {
                loader.join(TimeUnit.MINUTES.toMillis(2));
            }
            assertNull(failure.get(), () -> "load failed: " + failure.get());
            assertTrue(movedPages > 0, "moves wrote dirty pages back");

            TreeMap<Long, Long> expected = fixture.initialModel();
            expected.putAll(movingModel);
            expected.putAll(stableModel);
            assertEquals(expected, fixture.validateFlushAndRead());
        }
    }
}
