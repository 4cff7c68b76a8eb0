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

import org.junit.jupiter.api.Test;

import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.engine.PartitionedEngine.ReleaseReport;

/**
 * Logical repartitioning: partitions move between two engines (release on one, acquire on the other)
 * while other partitions stay under load. Moved partitions carry dirty cached pages that the release
 * must write back, or the new owner, starting cold, would read stale nodes.
 */
class RepartitionTest {

    @Test
    void releaseWritesBackDirtyPagesAndTheNewOwnerSeesThem() {
        try (DexFixture fixture = new DexFixture(1, 3, 4_000, 4, true, 0)) {
            DexConfig config = DexConfig.dex(400L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(1.0);
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

    @Test
    void partitionsMoveBackAndForthWhileOthersAreUnderLoad() throws Exception {
        try (DexFixture fixture = new DexFixture(2, 1, 6_000, 8, false, 0)) {
            DexConfig config = DexConfig.dex(64L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(0.5);
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
                            assertEquals(model.put(key, value) == null, s.put(key, value), "put " + key);
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
                        assertEquals(movingModel.put(key, value) == null, s.put(key, value));
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
