package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.DirectBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * A compute node that dies: engine A writes an empty tree (so it splits leaves and inner nodes all the time)
 * through a memory connection that stops dead after a given number of remote writes, compare-and-swaps and
 * fetch-and-adds, as a process killed at that moment would; engine B then acquires every partition and must
 * find every write A acknowledged (its value, or its absence for a delete), serve every key, scan the whole
 * range in order, and keep serving writes. The redo log (docs/durability.md) is what makes this hold; with it
 * off, the same crash loses acknowledged writes, which the last test shows.
 */
class CrashRecoveryTest {
    private static final int PARTITIONS = 4;
    private static final long RANGE = 20_000;
    /** Small chunks: a log of one chunk holds about a hundred records, so it wraps and checkpoints often. */
    private static final int CHUNK = 4096;

    /** A connection that fails every verb after {@code budget} remote writes, CAS and FAA: a process that died. */
    static final class DyingMemory extends ForwardingRemoteMemory {
        private final AtomicLong budget;

        DyingMemory(RemoteMemory delegate, long budget) {
            super(delegate);
            this.budget = new AtomicLong(budget);
        }

        private void spend() {
            if (budget.decrementAndGet() < 0) {
                throw new IllegalStateException("compute node crashed");
            }
        }

        boolean dead() {
            return budget.get() < 0;
        }

        /** Dies now, whatever is left of the budget. */
        void kill() {
            budget.set(-1);
        }

        /** Dies after {@code writes} more writing verbs. */
        void arm(long writes) {
            budget.set(writes);
        }

        @Override
        public void read(long address, org.agrona.MutableDirectBuffer dst, int dstOffset, int length) {
            if (dead()) {
                throw new IllegalStateException("compute node crashed");
            }
            super.read(address, dst, dstOffset, length);
        }

        @Override
        public void write(long address, DirectBuffer src, int srcOffset, int length) {
            spend();
            super.write(address, src, srcOffset, length);
        }

        @Override
        public long compareAndSwap(long address, long expected, long desired) {
            spend();
            return super.compareAndSwap(address, expected, desired);
        }

        @Override
        public long fetchAndAdd(long address, long delta) {
            spend();
            return super.fetchAndAdd(address, delta);
        }
    }

    private static final class Pool implements AutoCloseable {
        final LocalFabric fabric = new LocalFabric();
        final PartitionTable table;

        Pool() {
            this(PARTITIONS);
        }

        Pool(int partitions) {
            table = PartitionTable.equalWidth(partitions, 0, RANGE);
            fabric.export(0, 64L << 20, CHUNK);
            fabric.export(1, 64L << 20, CHUNK);
            RemoteMemory admin = fabric.connect(0, 1);
            Superblock.format(admin, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            PartitionTable.store(admin, table);
        }

        DexEngine open(RemoteMemory memory, int frames, RedoLogSettings log, DexEngine... gone) {
            DexEngine engine = DexEngine.open(memory, new DexEngineSettings("no-offload", (long) frames * FrameHeaderDescriptor.FRAME_LENGTH,
                    DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, log);
            for (DexEngine dead : gone) {
                engine.instanceGone(dead.instanceId());
            }
            for (int p = 0; p < table.count(); p++) {
                engine.acquire(p);
            }
            return engine;
        }

        @Override
        public void close() {
            fabric.close();
        }
    }

    /** What A acknowledged, and the one write it had in progress when it died (either outcome is right). */
    private record Outcome(TreeMap<Long, Long> acknowledged, long inFlightKey, Long inFlightValue, int acknowledgedOps) {
    }

    /** Runs random inserts, puts and deletes (mostly inserts) on {@code session} until the memory dies. */
    private static Outcome writeUntilDead(DexSession session, long seed, int maxOps) {
        TreeMap<Long, Long> model = new TreeMap<>();
        SplittableRandom random = new SplittableRandom(seed);
        for (int op = 0; op < maxOps; op++) {
            long key = random.nextLong(1, RANGE);
            long value = random.nextLong();
            int kind = random.nextInt(10);
            try {
                if (kind < 6) {
                    assertEquals(!model.containsKey(key), session.insert(key, value));
                    model.putIfAbsent(key, value);
                } else if (kind < 9) {
                    session.put(key, value);
                    model.put(key, value);
                } else {
                    session.delete(key);
                    model.remove(key);
                }
            } catch (IllegalStateException e) {
                Long attempted = kind < 6 ? model.getOrDefault(key, value) : kind < 9 ? Long.valueOf(value) : null;
                return new Outcome(model, key, attempted, op);
            }
        }
        return new Outcome(model, Long.MIN_VALUE, null, maxOps);
    }

    private static void assertServes(DexEngine engine, TreeMap<Long, Long> expected, long inFlightKey, Long inFlightValue,
                                     String context) {
        try (DexSession s = engine.newSession()) {
            if (inFlightKey != Long.MIN_VALUE) {
                boolean found = s.lookup(inFlightKey);
                Long now = found ? s.value() : null;
                Long before = expected.get(inFlightKey);
                assertTrue(java.util.Objects.equals(now, before) || java.util.Objects.equals(now, inFlightValue),
                        context + ": key " + inFlightKey + " holds " + now + ", neither its acknowledged " + before
                                + " nor the write in flight " + inFlightValue);
                if (now == null) {
                    expected.remove(inFlightKey);
                } else {
                    expected.put(inFlightKey, now);
                }
            }
            int lost = 0;
            StringBuilder firstLost = new StringBuilder();
            for (Map.Entry<Long, Long> e : expected.entrySet()) {
                if (!s.lookup(e.getKey()) || s.value() != e.getValue()) {
                    if (lost++ == 0) {
                        firstLost.append(e);
                    }
                }
            }
            assertEquals(0, lost, context + ": acknowledged writes lost, first " + firstLost);
            long[] keys = new long[expected.size() + 10];
            long[] values = new long[keys.length];
            int n = s.scan(Long.MIN_VALUE + 1, keys.length, keys, values);
            TreeMap<Long, Long> scanned = new TreeMap<>();
            for (int i = 0; i < n; i++) {
                assertTrue(i == 0 || keys[i] > keys[i - 1], context + ": scan out of order at " + i);
                scanned.put(keys[i], values[i]);
            }
            assertEquals(expected, scanned, context + ": a scan of the whole range");
        }
    }

    @ParameterizedTest(name = "crash after {0} remote writes")
    @ValueSource(longs = {40, 97, 150, 233, 377, 610, 987, 1597, 2584, 4181, 6765, 10946})
    void everyAcknowledgedWriteSurvivesACrashAtAnyPoint(long budget) {
        for (long seed = 0; seed < 3; seed++) {
            try (Pool pool = new Pool()) {
                DyingMemory dying = new DyingMemory(pool.fabric.connect(0, 1), budget);
                DexEngine a;
                try {
                    a = pool.open(dying, 48, RedoLogSettings.ON.withBytes(CHUNK));
                } catch (IllegalStateException crashedWhileAcquiring) {
                    // A died while it acquired its partitions (logs, ownership tables half made): nothing was
                    // acknowledged, and B must take over and serve all the same.
                    assertTrue(dying.dead(), "acquiring failed without the crash: " + crashedWhileAcquiring);
                    DexEngine b = pool.open(pool.fabric.connect(0, 1), 4096, RedoLogSettings.ON.withBytes(CHUNK));
                    assertServes(b, new TreeMap<>(), Long.MIN_VALUE, null, "crash while acquiring after " + budget + " verbs");
                    continue;
                }
                Outcome outcome;
                try (DexSession session = a.newSession()) {
                    outcome = writeUntilDead(session, budget * 31 + seed, 20_000);
                } catch (IllegalStateException closedAfterDeath) {
                    outcome = null;
                }
                if (outcome == null) {
                    continue;
                }
                assertTrue(dying.dead(), "the run ended before the crash (raise the operation count)");
                // A is gone without a word: no release, no write-back. B takes over.
                DexEngine b = pool.open(pool.fabric.connect(0, 1), 4096, RedoLogSettings.ON.withBytes(CHUNK), a);
                String context = "crash after " + budget + " verbs, seed " + seed + ", " + outcome.acknowledgedOps() + " writes acknowledged";
                TreeMap<Long, Long> expected = new TreeMap<>(outcome.acknowledged());
                assertServes(b, expected, outcome.inFlightKey(), outcome.inFlightValue(), context);
                // The partitions keep serving: more writes (splits included), then everything again.
                try (DexSession s = b.newSession()) {
                    SplittableRandom random = new SplittableRandom(seed);
                    for (int i = 0; i < 2_000; i++) {
                        long key = random.nextLong(1, RANGE);
                        long value = random.nextLong();
                        s.put(key, value);
                        expected.put(key, value);
                    }
                }
                assertServes(b, expected, Long.MIN_VALUE, null, context + ", after more writes");
                CacheValidator.validate(b);
            }
        }
    }

    /**
     * One partition, so the leaves' parent is owned: a leaf split writes the new right leaf and the parent,
     * and keeps the narrowed left leaf dirty in the cache. A vanishes with those left leaves never written:
     * remote memory holds them at their old, wider range, with stale copies of the keys that moved right.
     * B must read them clipped to their parent's slot, or its scans return the stale copies.
     */
    @Test
    void aSplitWhoseNarrowedLeftLeafNeverReachedMemoryReadsAsNarrowed() {
        try (Pool pool = new Pool(1)) {
            DexEngine a = pool.open(pool.fabric.connect(0, 1), 4096, RedoLogSettings.ON);
            TreeMap<Long, Long> model = new TreeMap<>();
            try (DexSession s = a.newSession()) {
                for (long key = 1; key <= 1_000; key++) {
                    s.insert(key, key);
                    model.put(key, key);
                }
                for (long key = 1; key <= 1_000; key++) {
                    s.put(key, -key);
                    model.put(key, -key);
                }
            }
            assertTrue(a.dirtyFrames.get() > 0, "A holds dirty leaves when it vanishes");
            DexEngine b = pool.open(pool.fabric.connect(0, 1), 4096, RedoLogSettings.ON, a);
            assertServes(b, model, Long.MIN_VALUE, null, "after A vanished");
            assertTrue(b.stats().repairs() > 0, "B met a leaf wider than its slot: " + b.stats());
        }
    }

    @Test
    void acknowledgedWritesOfManyThreadsSurviveWhenTheirNodeVanishes() throws Exception {
        try (Pool pool = new Pool()) {
            DexEngine a = pool.open(pool.fabric.connect(0, 1), 64, RedoLogSettings.ON.withBytes(CHUNK));
            Map<Long, Long> acknowledged = new ConcurrentHashMap<>();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                long seed = t;
                threads.add(new Thread(() -> {
                    DexSession session = a.newSession(); // never closed: the node vanishes
                    SplittableRandom random = new SplittableRandom(seed);
                    for (int i = 0; i < 6_000; i++) {
                        // Each thread owns the keys equal to its number mod 4: one writer per key.
                        long key = random.nextLong(1, RANGE / 4) * 4 + seed;
                        long value = random.nextLong();
                        if (random.nextInt(8) == 0) {
                            session.delete(key);
                            acknowledged.put(key, Long.MIN_VALUE);
                        } else {
                            session.put(key, value);
                            acknowledged.put(key, value);
                        }
                    }
                }));
            }
            threads.forEach(Thread::start);
            for (Thread thread : threads) {
                thread.join();
            }
            assertTrue(a.dirtyFrames.get() > 0, "A holds dirty pages when it vanishes");
            DexEngine b = pool.open(pool.fabric.connect(0, 1), 4096, RedoLogSettings.ON.withBytes(CHUNK));
            TreeMap<Long, Long> expected = new TreeMap<>();
            acknowledged.forEach((k, v) -> {
                if (v != Long.MIN_VALUE) {
                    expected.put(k, v);
                }
            });
            assertServes(b, expected, Long.MIN_VALUE, null, "after A vanished");
        }
    }

    @Test
    void withoutTheLogTheSameCrashLosesAcknowledgedWrites() {
        try (Pool pool = new Pool()) {
            DexEngine a = pool.open(pool.fabric.connect(0, 1), 4096, RedoLogSettings.OFF);
            TreeMap<Long, Long> model = new TreeMap<>();
            try (DexSession s = a.newSession()) {
                SplittableRandom random = new SplittableRandom(7);
                for (int i = 0; i < 3_000; i++) {
                    long key = random.nextLong(1, RANGE);
                    long value = random.nextLong();
                    s.put(key, value);
                    model.put(key, value);
                }
            }
            DexEngine b = pool.open(pool.fabric.connect(0, 1), 4096, RedoLogSettings.OFF);
            int lost = 0;
            try (DexSession s = b.newSession()) {
                for (Map.Entry<Long, Long> e : model.entrySet()) {
                    if (!s.lookup(e.getKey()) || s.value() != e.getValue()) {
                        lost++;
                    }
                }
            }
            assertTrue(lost > 0, "a crash without the log loses the writes of dirty pages (the check above can fail)");
        }
    }
}
