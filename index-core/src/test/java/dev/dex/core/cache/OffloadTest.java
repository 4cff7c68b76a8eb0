package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.core.node.LeafOps;
import dev.dex.core.node.WideKeys;
import dev.dex.core.offload.LocalOffloadChannel;
import dev.dex.core.offload.OffloadChannel;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.core.offload.OffloadSettings;

/**
 * Offloading through the engine (paper §6): 20,000 keys on two memory servers, four leaf-fence partitions
 * (so most level-1 nodes are owned), caches small enough that level-1 nodes keep missing.
 */
class OffloadTest {

    private static DexFixture fixture(double fill) {
        return fixture(fill, false);
    }

    /** {@code overTcp}: the memory servers serve over loopback TCP and offloads travel as fabric messages. */
    private static DexFixture fixture(double fill, boolean overTcp) {
        return fixture(fill, overTcp, 8);
    }

    /** As above, with keys {@code keyBytes} wide. */
    private static DexFixture fixture(double fill, boolean overTcp, int keyBytes) {
        return new DexFixture(2, 2, 20_000, 4, true, 0, fill, overTcp, keyBytes);
    }

    private static DexEngineSettings config(String mode, int frames) {
        DexEngineSettings settings = DexEngineSettings.withCache(mode, (long) frames * FrameHeaderDescriptor.FRAME_LENGTH)
                .withLeafAdmission(0.3);
        return mode.equals("dex") ? settings.withOffload(EXPLORING) : settings;
    }

    /**
     * The cost model of the defaults without their explore budget: every decision the explore rate draws is flipped,
     * so that a dex engine offloads often enough here, where an offload costs more than a miss and the model would
     * otherwise seldom try one.
     */
    private static final OffloadSettings EXPLORING = new OffloadSettings(OffloadSettings.Policy.COST_MODEL, 50, 0.01, 0.01, 40, 1.2);

    /** A window of 1: the first eligible miss takes the caching path (bootstrap), the second offloads. */
    private static final OffloadSettings ONE_SAMPLE = new OffloadSettings(OffloadSettings.Policy.COST_MODEL, 1, 0.01, 0.0, 40, 1.2);
    /** The key the hand-built hazards use: leaf 10, under the first level-1 node, which lies inside partition 0. */
    private static final long HAZARD_KEY = 2L * 480 + 2;

    /** An engine of {@link #ONE_SAMPLE} (leaves always admitted) and a session whose lookups cached {@code key}'s path. */
    private record Warmed(DexEngine engine, DexSession session) {
        static Warmed up(DexFixture fixture, long key) {
            DexEngine engine = fixture.open(1, config("dex", 200).withLeafAdmission(1.0).withOffload(ONE_SAMPLE), 1).get(0);
            DexSession session = engine.newSession();
            for (int i = 0; i < 3; i++) {
                session.lookup(key);
            }
            return new Warmed(engine, session);
        }
    }

    /** {@code channel}, with {@code then} run on each request once it is answered, before its sender sees the answer. */
    private static OffloadChannel afterAnswer(OffloadChannel channel, java.util.function.Consumer<OffloadRequest> then) {
        return new OffloadChannel() {
            @Override
            public void submit(OffloadRequest request) {
                channel.submit(request);
                request.await();
                then.accept(request);
            }

            @Override
            public void close() {
                channel.close();
            }
        };
    }

    private static CacheStats total(List<DexEngine> engines) {
        long offloads = 0;
        long fallbacks = 0;
        for (DexEngine e : engines) {
            offloads += e.stats().offloads();
            fallbacks += e.stats().offloadFallbacks();
        }
        return new CacheStats(0, 0, 0, 0, 0, 0, 0, offloads, fallbacks, 0, 0, 0);
    }

    @ParameterizedTest(name = "{0} engines={1} frames={2} cooling={3} key bytes={4}")
    @CsvSource({
            "offload-only, 1, 6,  0.1, 8",
            "offload-only, 2, 8,  0.1, 8",
            "dex,          1, 6,  0.1, 8",
            "dex,          2, 8,  0.1, 8",
            "offload-only, 2, 8,  0.1, 16",
            "dex,          2, 8,  0.1, 64"})
    void randomOperationsThroughOffloadingMatchTheModel(String mode, int engines, int frames, double cooling, int keyBytes) {
        try (DexFixture fixture = fixture(0.8, false, keyBytes)) {
            Phases phases = new Phases();
            fixture.offloadWrapper = phases::wrap;
            List<DexEngine> list = fixture.open(engines, config(mode, frames).withCoolingRatio(cooling), 1);
            TreeMap<Long, Long> model = fixture.initialModel();
            DexModelTest.randomOperations(fixture, list, model, 20_000, frames * 7L + engines);
            CacheStats stats = total(list);
            assertTrue(stats.offloads() > 100, "operations were offloaded: " + stats);
            phases.assertOneMessagePerOffload(list, stats);
            assertEquals(phases.messages(), fixture.channel.executed(), "the channel ran every message");
            assertEquals(0, fixture.channel.failures());
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void aKeyArrayLongerThanTheWidthIsCutSoItsOffloadsAreNotRefused() {
        try (DexFixture fixture = fixture(0.8, false)) {
            DexEngine engine = fixture.open(1, config("offload-only", 8), 1).get(0);
            try (DexSession session = engine.newSession()) {
                for (long k = 1; k <= 500; k++) {
                    long key = 2 * k + 2;
                    // A caller's array of two words on an index of one: only the first is the key.
                    long[] longer = {key, 0x5eed};
                    assertTrue(session.put(longer, -key), "the loaded key " + key + " is there");
                    assertTrue(session.lookup(new long[] {key, -1}), "key " + key);
                    assertEquals(-key, session.value());
                    assertEquals(0x5eed, longer[1], "the caller's array is not written");
                }
            }
            CacheStats stats = engine.stats();
            assertTrue(stats.offloads() > 100, "the operations were offloaded, not refused: " + stats);
            assertEquals(0, fixture.channel.failures(), "no offload was refused");
        }
    }

    @ParameterizedTest(name = "over tcp: {0} engines={1} frames={2} key bytes={3}")
    @CsvSource({
            "offload-only, 1, 6, 8",
            "dex,          2, 8, 8",
            "dex,          2, 8, 32"})
    void randomOperationsOffloadedAsTcpMessagesMatchTheModel(String mode, int engines, int frames, int keyBytes) {
        try (DexFixture fixture = fixture(0.8, true, keyBytes)) {
            Phases phases = new Phases();
            fixture.offloadWrapper = phases::wrap;
            List<DexEngine> list = fixture.open(engines, config(mode, frames), 1);
            TreeMap<Long, Long> model = fixture.initialModel();
            DexModelTest.randomOperations(fixture, list, model, 10_000, frames * 7L + engines);
            CacheStats stats = total(list);
            assertTrue(stats.offloads() > 100, "operations were offloaded: " + stats);
            phases.assertOneMessagePerOffload(list, stats);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /**
     * A lookup's side of the hazard offloading must exclude: a node below the missed one is still cached here
     * (dirty), so remote memory is stale. Built by hand: a dirty leaf is orphaned and its level-1 parent
     * evicted, as a split moving it away or a stale shared parent would leave it. The offloaded lookup must find
     * the cached node on the path it was answered for, fall back, and the caching path must return the cached value.
     */
    @Test
    void anOffloadWhosePathMeetsACachedNodeFallsBackToTheCache() {
        try (DexFixture fixture = fixture(0.8)) {
            long key = HAZARD_KEY;
            Warmed warmed = Warmed.up(fixture, key);
            DexEngine engine = warmed.engine();
            DexSession session = warmed.session();
            cacheDirtyLeafUnderEvictedParent(engine, session, key, 123_456);

            long before = engine.stats().offloadFallbacks();
            assertTrue(session.lookup(key));
            assertEquals(123_456, session.value(), "the cached (dirty) value, not remote memory's stale one");
            assertTrue(engine.stats().offloadFallbacks() > before, "the offload met the cached leaf and fell back");
            session.close();
            TreeMap<Long, Long> stored = fixture.validateFlushAndRead();
            assertEquals(123_456L, stored.get(key));
        }
    }

    /**
     * A lookup goes in one message, and its answer is checked afterwards: here remote memory is stale when
     * the memory side reads it (the leaf's only current copy is cached here, dirty and orphaned, as above),
     * and the cached copy is written back and dropped while the answer is on its way, as another thread's
     * eviction would do. The path markers then find nothing cached; only the count of this compute node's
     * remote changes shows that the answer may be stale. The lookup must fall back and return the new value.
     */
    @Test
    void aLookupAnsweredWhileItsLeafWasWrittenBackFallsBack() {
        try (DexFixture fixture = fixture(0.8)) {
            long key = HAZARD_KEY;
            AtomicReference<Runnable> onAnswer = new AtomicReference<>();
            List<Long> answers = new ArrayList<>();
            fixture.offloadWrapper = channel -> afterAnswer(channel, request -> {
                if (request.phase() == OffloadRequest.READ && request.key()[0] == key) {
                    answers.add(request.found() ? request.value() : null);
                    Runnable action = onAnswer.getAndSet(null);
                    if (action != null) {
                        action.run();
                    }
                }
            });
            Warmed warmed = Warmed.up(fixture, key);
            DexEngine engine = warmed.engine();
            DexSession session = warmed.session();
            int leaf = cacheDirtyLeafUnderEvictedParent(engine, session, key, 123_456);
            long leafAddress = engine.arena.address(leaf);
            onAnswer.set(() -> {
                FrameArena arena = engine.arena;
                assertTrue(arena.tryLock(leaf));
                new FrameWriter(engine).writeBack(leaf);
                engine.mapping.remove(leafAddress, leaf);
                engine.exclusion.leaveFrame(leaf);
                arena.state(leaf, FrameHeaderDescriptor.FREE);
                arena.address(leaf, 0);
                arena.ownerHint(leaf, FrameArena.NO_OWNER);
                arena.clearFlags(leaf);
                arena.unlock(leaf);
            });

            long fallbacks = engine.stats().offloadFallbacks();
            assertTrue(session.lookup(key));
            assertEquals(List.of(key + 1), answers, "the memory side read the stale leaf, in one message");
            assertEquals(123_456, session.value(), "the written-back value, not the stale answer");
            assertEquals(fallbacks + 1, engine.stats().offloadFallbacks(), "the answer failed validation");
            session.close();
            assertEquals(123_456L, fixture.validateFlushAndRead().get(key));
        }
    }

    /**
     * The hazard a one-message write must exclude: the leaf below the missed level-1 node is cached here, dirty and
     * orphaned (as a split moving it to an uncached sibling leaves it), so remote memory's leaf is stale. The write
     * must not be sent (the orphan is an escape in its range), and must take the caching path, onto the cached
     * leaf. Sent anyway, it would change remote memory's stale leaf, and the dirty leaf's write-back would undo it.
     */
    @Test
    void anOffloadedWriteIsNotSentWhileANodeBelowTheMissedOneIsCachedThroughAnotherWay() {
        try (DexFixture fixture = fixture(0.8)) {
            long key = HAZARD_KEY;
            Warmed warmed = Warmed.up(fixture, key);
            DexEngine engine = warmed.engine();
            DexSession session = warmed.session();
            cacheDirtyLeafUnderEvictedParent(engine, session, key, 123_456);
            assertEquals(1, engine.exclusion.escapes(), "the orphan is an escape: " + engine.exclusion);
            long twoSided = engine.verbs().twoSided();

            assertTrue(session.put(key, 999), "the key is there: put replaces it");
            assertEquals(1, engine.stats().offloadsExcluded(), "the write met the orphan below the missed node: " + engine.stats());
            assertEquals(twoSided, engine.verbs().twoSided(), "and was not sent");
            assertEquals(0, engine.exclusion.writes(), "nothing is left in flight");
            assertTrue(session.lookup(key));
            assertEquals(999, session.value());
            session.close();
            assertEquals(999L, fixture.validateFlushAndRead().get(key), "the write reached the cached leaf, and remote memory");
        }
    }

    /**
     * An offloaded write changes a leaf of which this compute node holds a cooling copy (clean, and unreachable
     * while the write was out, its parent not cached). The copy is dropped when the answer comes, so a later
     * caching path reads the leaf from remote memory instead of reheating the stale copy.
     */
    @Test
    void anOffloadedWriteDropsTheCoolingCopyOfTheLeafItChanged() {
        try (DexFixture fixture = fixture(0.8)) {
            long key = HAZARD_KEY;
            Warmed warmed = Warmed.up(fixture, key);
            DexEngine engine = warmed.engine();
            DexSession session = warmed.session();
            long leafAddress = coolLeafAndEvictItsParent(engine, key);
            long offloads = engine.stats().offloads();

            assertTrue(session.put(key, 4_242), "the key is there: put replaces it");
            assertEquals(offloads + 1, engine.stats().offloads(), "the write was offloaded: " + engine.stats());
            assertEquals(MappingTable.ABSENT, engine.mapping.get(leafAddress), "the leaf's stale cooling copy was dropped");
            for (int i = 0; i < 3; i++) {
                assertTrue(session.lookup(key));
                assertEquals(4_242, session.value(), "lookup " + i + " after the write");
            }
            session.close();
            assertEquals(4_242L, fixture.validateFlushAndRead().get(key));
        }
    }

    /**
     * The memory side runs an offloaded write, but its answer is lost (the channel gives up on it: a timeout or a
     * broken connection), and the channel says it may still run for 300 ms. The writer keeps its range that long,
     * then falls back and applies the write through the cache; the range is given up with the fallback (else the
     * caching path, and every later write into the range, would wait on it).
     */
    @Test
    void aWriteWhoseAnswerIsLostFallsBackAndGivesItsRangeUp() {
        try (DexFixture fixture = fixture(0.8)) {
            long key = HAZARD_KEY;
            fixture.offloadWrapper = channel -> afterAnswer(channel, request -> {
                if (request.phase() == OffloadRequest.WRITE) {
                    request.mayRunUntil(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300));
                    request.refuse(); // ran, but the sender never hears of it
                }
            });
            Warmed warmed = Warmed.up(fixture, key);
            DexEngine engine = warmed.engine();
            DexSession session = warmed.session();
            coolLeafAndEvictItsParent(engine, key);
            long fallbacks = engine.stats().offloadFallbacks();

            long start = System.nanoTime();
            assertTrue(session.put(key, 5_151), "the key is there: put replaces it");
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(300),
                    "the writer waited until the request could no longer run");
            assertEquals(fallbacks + 1, engine.stats().offloadFallbacks(), "the lost answer made the write fall back");
            assertEquals(0, engine.exclusion.writes(), "the write's range was given up: " + engine.exclusion);
            assertTrue(session.lookup(key));
            assertEquals(5_151, session.value());
            session.close();
            assertEquals(5_151L, fixture.validateFlushAndRead().get(key));
        }
    }

    /**
     * A descent that steps from a shared node (here the root) into an owned node below the offloading level enters an
     * escape before it reads the node: the shared image it followed may be stale, so the node may lie below a node
     * another thread is about to offload a write into. Checked in the middle of the read: the escape is there, and a
     * write over the node is refused. Without it, such a write would be sent while this thread reads (and then writes)
     * the subtree it changes.
     */
    @Test
    void aDescentFromASharedNodeIntoAnOwnedOneIsAnEscapeBeforeItsRead() {
        try (DexFixture fixture = fixture(0.8);
             LocalOffloadChannel channel = new LocalOffloadChannel(fixture.regions, 1, 64, 0)) {
            dev.dex.core.node.NodeView root = new dev.dex.core.node.NodeView()
                    .wrap(new org.agrona.concurrent.UnsafeBuffer(new byte[dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH]), 0);
            fixture.admin.read(dev.dex.core.tree.Superblock.read(fixture.admin).root(), root.buffer(), 0, root.buffer().capacity());
            assertEquals(2, root.level());
            int slot = -1;
            for (int i = 0; i <= root.count() && slot < 0; i++) {
                long low = i == 0 ? root.lowFence() : root.key(i - 1);
                long high = i == root.count() ? root.highFence() : root.key(i);
                if (low > 0 && fixture.table.partitionOf(low + 1) == fixture.table.partitionOf(high)) {
                    slot = i;
                }
            }
            assertTrue(slot > 0, "a level-1 node inside one partition");
            long levelOne = root.child(slot);
            long key = root.key(slot - 1) + 1;
            AtomicReference<String> seen = new AtomicReference<>();
            AtomicReference<DexEngine> opened = new AtomicReference<>();
            dev.dex.rdma.RemoteMemory watched = new dev.dex.rdma.ForwardingRemoteMemory(fixture.fabric.connect(0)) {
                @Override
                public void read(long address, org.agrona.MutableDirectBuffer dst, int dstOffset, int length) {
                    DexEngine engine = opened.get();
                    if (address == levelOne && engine != null && seen.get() == null) {
                        OffloadExclusion.Range write = engine.exclusion.beginWrite(new long[] {Long.MIN_VALUE}, new long[] {Long.MAX_VALUE}, 2);
                        seen.set("escapes " + engine.exclusion.escapes() + ", a write over the node " + (write == null
                                ? "refused" : "entered"));
                        if (write != null) {
                            engine.exclusion.endWrite(write);
                        }
                    }
                    super.read(address, dst, dstOffset, length);
                }
            };
            DexEngine engine = DexEngine.open(watched, config("dex", 200), channel);
            opened.set(engine);
            for (int p = 0; p < fixture.table.count(); p++) {
                engine.acquire(p);
            }
            try (DexSession session = engine.newSession()) {
                session.lookup(key); // the cost model's first decisions take the caching path
            }
            assertEquals("escapes 1, a write over the node refused", seen.get());
            assertTrue(engine.exclusion.isEscape((int) engine.mapping.get(levelOne)),
                    "admitted under the shared root, the node stays an escape as long as it is cached");
            CacheValidator.validate(engine);
            engine.close();
        }
    }

    /**
     * An operation that went below the missed node before the write was checked: thread A's put passed the level-1
     * node while it was cached and holds the leaf's uncached image (leaf admission off); the level-1 node is then
     * evicted, and thread B's put of another key of the same leaf misses it and would offload. A's published key lies
     * in the node's range, so B's write is not sent; B takes the caching path and waits for A's leaf. Sent, B's
     * write was undone by A's write of its older image of the leaf (checked: the key was lost).
     */
    @Test
    void anOffloadedWriteIsNotSentWhileAnotherOperationIsBelowTheMissedNode() throws Exception {
        try (DexFixture fixture = fixture(0.8);
             LocalOffloadChannel channel = new LocalOffloadChannel(fixture.regions, 1, 64, 0)) {
            long k1 = HAZARD_KEY + 1;
            long k2 = k1 + 2;
            java.util.concurrent.CountDownLatch reading = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch resume = new java.util.concurrent.CountDownLatch(1);
            AtomicReference<Long> leafAddress = new AtomicReference<>();
            AtomicReference<Thread> blocked = new AtomicReference<>();
            dev.dex.rdma.RemoteMemory watched = new dev.dex.rdma.ForwardingRemoteMemory(fixture.fabric.connect(0, 1)) {
                @Override
                public void read(long address, org.agrona.MutableDirectBuffer dst, int dstOffset, int length) {
                    super.read(address, dst, dstOffset, length);
                    Long leaf = leafAddress.get();
                    if (leaf != null && address == leaf && Thread.currentThread() == blocked.get()) {
                        blocked.set(null);
                        reading.countDown();
                        try {
                            resume.await();
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                }
            };
                        DexEngine engine = DexEngine.open(watched, config("dex", 200).withLeafAdmission(0.0).withOffload(ONE_SAMPLE), channel);
            for (int p = 0; p < fixture.table.count(); p++) {
                engine.acquire(p);
            }
            DexSession a = engine.newSession();
            DexSession b = engine.newSession();
            assertTrue(a.lookup(k1 - 1), "A's first eligible miss takes the caching path: the level-1 node is cached");
            assertTrue(b.lookup(2L * 9_000 + 2), "B's first eligible miss, elsewhere, takes the caching path too");
            CachedPath path = CachedPath.of(engine, k1);
            leafAddress.set(path.levelOneView().child(path.leafSlot()));
            assertEquals(path.leafSlot(), path.levelOneView().childIndex(k2), "both keys go to one leaf");

            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread threadA = new Thread(() -> a.put(k1, 11), "A");
            threadA.setUncaughtExceptionHandler((t, e) -> failed.set(e));
            blocked.set(threadA);
            threadA.start();
            assertTrue(reading.await(10, TimeUnit.SECONDS), "A reads the leaf");
            path.evictLevelOne(); // as a cooler would, while A is below it

            long excluded = engine.stats().offloadsExcluded();
            long sent = channel.executed();
            Thread threadB = new Thread(() -> b.put(k2, 22), "B");
            threadB.setUncaughtExceptionHandler((t, e) -> failed.set(e));
            threadB.start();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (engine.stats().offloadsExcluded() == excluded && channel.executed() == sent && System.nanoTime() < until) {
                Thread.sleep(1);
            }
            resume.countDown();
            threadA.join(10_000);
            threadB.join(10_000);
            assertNull(failed.get());
            assertEquals(excluded + 1, engine.stats().offloadsExcluded(), "B's write met A's key in the node's range");
            assertEquals(sent, channel.executed(), "and was not sent");
            assertTrue(a.lookup(k1));
            assertEquals(11, a.value());
            assertTrue(a.lookup(k2), "B's put survived A's write of the leaf");
            assertEquals(22, a.value());
            a.close();
            b.close();
            CacheValidator.validate(engine);
            engine.close();
        }
    }

    /**
     * The cached path of {@code key} below the pinned root: the root's image and the slot of the level-1 node, the
     * level-1 frame and its image, the slot of the leaf and the leaf's frame (both cached, asserted).
     */
    private record CachedPath(DexEngine engine, dev.dex.core.node.NodeView root, int slot, int levelOne,
                              dev.dex.core.node.NodeView levelOneView, int leafSlot, int leaf) {
        static CachedPath of(DexEngine engine, long key) {
            FrameArena arena = engine.arena;
            dev.dex.core.node.NodeView root = arena.wrap(new dev.dex.core.node.NodeView(), engine.rootFrame.get());
            int slot = root.childIndex(key);
            assertTrue(dev.dex.rdma.GlobalAddress.isSwizzled(root.child(slot)), "the level-1 node is cached");
            int levelOne = (int) dev.dex.rdma.GlobalAddress.unswizzle(root.child(slot));
            dev.dex.core.node.NodeView levelOneView = arena.wrap(new dev.dex.core.node.NodeView(), levelOne);
            assertFalse(arena.flag(levelOne, FrameHeaderDescriptor.SHARED), "the level-1 node is owned, so its miss is offloaded");
            int leafSlot = levelOneView.childIndex(key);
            long pointer = levelOneView.child(leafSlot);
            int leaf = dev.dex.rdma.GlobalAddress.isSwizzled(pointer) ? (int) dev.dex.rdma.GlobalAddress.unswizzle(pointer)
                    : FrameHeaderDescriptor.NO_FRAME;
            return new CachedPath(engine, root, slot, levelOne, levelOneView, leafSlot, leaf);
        }

        /** Unswizzles the leaf from the level-1 node: it is left with no parent. */
        void detachLeaf() {
            assertTrue(leaf != FrameHeaderDescriptor.NO_FRAME, "the leaf is cached");
            levelOneView.child(leafSlot, engine.arena.address(leaf));
            engine.arena.parent(leaf, FrameHeaderDescriptor.NO_FRAME);
        }

        /** Evicts the level-1 node as an eviction does (it has no swizzled child left on the key's path). */
        void evictLevelOne() {
            FrameArena arena = engine.arena;
            long address = arena.address(levelOne);
            assertTrue(arena.tryLock(levelOne));
            root.child(slot, address);
            engine.mapping.remove(address, levelOne);
            engine.exclusion.leaveFrame(levelOne);
            arena.state(levelOne, FrameHeaderDescriptor.FREE);
            arena.address(levelOne, 0);
            arena.ownerHint(levelOne, FrameArena.NO_OWNER);
            arena.clearFlags(levelOne);
            arena.unlock(levelOne);
        }
    }

    /**
     * Leaves the leaf of {@code key} (cached, clean) in the cooling map with no parent, and its owned level-1 parent
     * evicted, as cooling and eviction would; returns the leaf's address.
     */
    private static long coolLeafAndEvictItsParent(DexEngine engine, long key) {
        CachedPath path = CachedPath.of(engine, key);
        FrameArena arena = engine.arena;
        path.detachLeaf();
        assertFalse(arena.flag(path.leaf(), FrameHeaderDescriptor.DIRTY), "the leaf was only read");
        long leafAddress = arena.address(path.leaf());
        arena.state(path.leaf(), FrameHeaderDescriptor.COOLING);
        int bucket = engine.cooling.bucketOf(leafAddress);
        synchronized (engine.cooling.monitor(bucket)) {
            engine.cooling.append(bucket, path.leaf());
        }
        path.evictLevelOne();
        return leafAddress;
    }

    /**
     * Puts {@code value} under {@code key} through {@code session}, leaving the leaf cached and dirty but
     * orphaned, and its owned level-1 parent evicted, so the next miss on the parent may be offloaded while
     * remote memory holds the old leaf. Returns the leaf's frame.
     */
    private static int cacheDirtyLeafUnderEvictedParent(DexEngine engine, DexSession session, long key, long value) {
        assertTrue(session.put(key, value), "the loaded key is replaced");
        CachedPath path = CachedPath.of(engine, key);
        assertTrue(engine.arena.flag(path.leaf(), FrameHeaderDescriptor.DIRTY), "the leaf holds the only copy of the new value");
        path.detachLeaf();
        new FrameWriter(engine).orphaned(path.leaf()); // as a split or a refresh that orphans a frame does
        path.evictLevelOne();
        return path.leaf();
    }

    /**
     * Lookups only, one thread: every offload attempt is exactly one message, and every two-sided verb the
     * engine counts is one of them.
     */
    @Test
    void anOffloadedLookupIsOneMessage() {
        try (DexFixture fixture = fixture(0.8)) {
            Phases phases = new Phases();
            fixture.offloadWrapper = phases::wrap;
            DexEngine engine = fixture.open(1, config("offload-only", 8), 1).get(0);
            DexSession session = engine.newSession();
            TreeMap<Long, Long> model = fixture.initialModel();
            java.util.SplittableRandom random = new java.util.SplittableRandom(11);
            for (int i = 0; i < 5_000; i++) {
                long key = 1 + random.nextLong(2L * fixture.loaded + 2);
                boolean found = session.lookup(key);
                assertEquals(model.containsKey(key), found, "lookup " + key);
                if (found) {
                    assertEquals(model.get(key), session.value(), "lookup " + key);
                }
            }
            session.close();
            CacheStats stats = engine.stats();
            assertTrue(stats.offloads() > 1_000, "lookups were offloaded: " + stats);
            assertEquals(0, phases.writes.get(), "lookups only");
            assertEquals(stats.offloads() + stats.offloadFallbacks(), phases.reads.get(), "one message per offload attempt");
            assertEquals(phases.reads.get(), engine.verbs().twoSided());
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /**
     * A memory server that never answers in time (here: each request is refused after 20 ms, as the actor
     * channel's timeout does): the cost model is charged each failure, so after its bootstrap offloads it
     * stops offloading, instead of paying the timeout on every eligible miss.
     */
    @Test
    void timeoutsTurnTheCostModelAwayFromOffloading() {
        try (DexFixture fixture = fixture(0.8)) {
            java.util.concurrent.atomic.AtomicLong sent = new java.util.concurrent.atomic.AtomicLong();
            fixture.offloadWrapper = channel -> new OffloadChannel() {
                @Override
                public void submit(OffloadRequest request) {
                    sent.incrementAndGet();
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    request.refuse();
                }

                @Override
                public void close() {
                    channel.close();
                }
            };
            OffloadSettings smallWindow = new OffloadSettings(OffloadSettings.Policy.COST_MODEL, 5, 0.01, 0.0, 40, 1.2);
            DexEngine engine = fixture.open(1, config("dex", 8).withOffload(smallWindow), 1).get(0);
            DexSession session = engine.newSession();
            TreeMap<Long, Long> model = fixture.initialModel();
            java.util.SplittableRandom random = new java.util.SplittableRandom(5);
            for (int i = 0; i < 2_000; i++) {
                long key = 1 + random.nextLong(2L * fixture.loaded + 2);
                assertEquals(model.containsKey(key), session.lookup(key), "lookup " + key);
            }
            session.close();
            CacheStats stats = engine.stats();
            assertEquals(0, stats.offloads());
            assertEquals(sent.get(), stats.offloadFallbacks(), "every attempt fell back");
            assertTrue(sent.get() >= 5 && sent.get() <= 10, "the bootstrap's 5 offloads, then hardly any: " + sent.get());
            assertTrue(stats.misses() > 500, "misses kept coming: " + stats);
        }
    }

    /** Counts the offload messages by phase and checks that lookups are reads and writes are writes. */
    private static final class Phases {
        final java.util.concurrent.atomic.AtomicLong reads = new java.util.concurrent.atomic.AtomicLong();
        final java.util.concurrent.atomic.AtomicLong writes = new java.util.concurrent.atomic.AtomicLong();
        final java.util.concurrent.atomic.AtomicLong misfits = new java.util.concurrent.atomic.AtomicLong();

        OffloadChannel wrap(OffloadChannel channel) {
            return new OffloadChannel() {
                @Override
                public void submit(OffloadRequest request) {
                    boolean lookup = request.op() == LeafOps.LOOKUP;
                    if (request.phase() == OffloadRequest.READ) {
                        reads.incrementAndGet();
                    } else {
                        writes.incrementAndGet();
                    }
                    if (lookup != (request.phase() == OffloadRequest.READ) || !lookup && request.phase() != OffloadRequest.WRITE) {
                        misfits.incrementAndGet();
                    }
                    channel.submit(request);
                }

                @Override
                public void close() {
                    channel.close();
                }
            };
        }

        long messages() {
            return reads.get() + writes.get();
        }

        /** Every offload attempt that was sent is one message; one that was not is a write the exclusion refused. */
        void assertOneMessagePerOffload(List<DexEngine> engines, CacheStats stats) {
            assertEquals(0, misfits.get(), "a lookup is one read; a write one write");
            assertTrue(reads.get() > 0 && writes.get() > 0, "lookups and writes were offloaded: " + this);
            long excluded = engines.stream().mapToLong(e -> e.stats().offloadsExcluded()).sum();
            assertEquals(stats.offloads() + stats.offloadFallbacks() - excluded, messages(),
                    "one message per offload attempt, none for a write the exclusion refused: " + this);
            assertEquals(messages(), engines.stream().mapToLong(e -> e.verbs().twoSided()).sum(),
                    "each message is one two-sided verb");
        }

        @Override
        public String toString() {
            return "reads=" + reads + ", writes=" + writes;
        }
    }

    @Test
    void noOffloadModeNeverOffloads() {
        try (DexFixture fixture = fixture(0.8)) {
            List<DexEngine> list = fixture.open(1, config("no-offload", 16), 1);
            TreeMap<Long, Long> model = fixture.initialModel();
            DexModelTest.randomOperations(fixture, list, model, 5_000, 3);
            assertEquals(0, list.get(0).stats().offloads());
            assertEquals(0, list.get(0).verbs().twoSided());
            assertEquals(0, fixture.channel.executed());
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @Test
    void insertsIntoFullLeavesFallBackToTheCachingPathWhichSplits() {
        try (DexFixture fixture = fixture(1.0)) {
            List<DexEngine> list = fixture.open(1, config("offload-only", 16), 1);
            DexSession session = list.get(0).newSession();
            TreeMap<Long, Long> model = fixture.initialModel();
            for (long k = 1; k < 2L * fixture.loaded; k += 2) {
                if (k % 7 == 0) {
                    assertTrue(session.insert(k, -k));
                    model.put(k, -k);
                }
            }
            session.close();
            CacheStats stats = total(list);
            assertTrue(stats.offloadFallbacks() > 0, "inserts into full leaves need a split: " + stats);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    @ParameterizedTest(name = "over tcp: {0}, key bytes {1}")
    @CsvSource({"false, 8", "true, 8", "false, 16", "true, 64"})
    void computeThreadsAndOffloadThreadsTogetherKeepEveryLastWrite(boolean overTcp, int keyBytes) throws Exception {
        try (DexFixture fixture = fixture(0.8, overTcp, keyBytes)) {
            List<DexEngine> list = fixture.open(2, config("offload-only", 24), 2);
            int threads = 4;
            List<Map<Long, Long>> models = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                models.add(new HashMap<>());
            }
            for (int e = 0; e < list.size(); e++) {
                WideKeys.Session s = fixture.wide.of(list.get(e).newSession());
                for (var entry : fixture.initialModel().entrySet()) {
                    long key = entry.getKey();
                    if (fixture.partitionOf(key) % list.size() == e) {
                        s.update(key, DexStressTest.encode(key, 0));
                        models.get((int) (key % threads)).put(key, DexStressTest.encode(key, 0));
                    }
                }
                s.session().close();
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                Thread worker = new Thread(() -> {
                    WideKeys.Session[] sessions = list.stream().map(e -> fixture.wide.of(e.newSession()))
                            .toArray(WideKeys.Session[]::new);
                    try {
                        DexStressTest.run(fixture, sessions, id, threads, 8_000, 2L * fixture.loaded + 200, models.get(id));
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        for (WideKeys.Session s : sessions) {
                            s.session().close();
                        }
                    }
                }, "offload-stress-" + t);
                workers.add(worker);
                worker.start();
            }
            for (Thread worker : workers) {
                worker.join(TimeUnit.MINUTES.toMillis(3));
                assertTrue(!worker.isAlive(), worker.getName() + " did not finish");
            }
            assertNull(failure.get(), () -> "worker failed: " + failure.get());
            assertTrue(total(list).offloads() > 100, "operations were offloaded: " + total(list));
            TreeMap<Long, Long> expected = new TreeMap<>();
            models.forEach(expected::putAll);
            assertEquals(expected, fixture.validateFlushAndRead());
        }
    }
}
