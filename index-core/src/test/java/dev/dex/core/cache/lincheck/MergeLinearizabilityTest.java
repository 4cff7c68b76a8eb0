package dev.dex.core.cache.lincheck;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.StressOptions;
import org.jetbrains.lincheck.datastructures.Validate;
import org.junit.jupiter.api.Test;

import dev.dex.core.cache.CacheValidator;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexSession;
import dev.dex.core.cache.FrameHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.partition.Partitioning;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * Checks with Lincheck (stress mode) that lookups, inserts, puts and deletes stay linearizable while merge passes
 * ({@link DexEngine#merge}) run beside them: a tree of sparse leaves (bulk-loaded 15% full, so every pass merges), two
 * partitions at leaf fences, two engines with caches of a few frames each holding one, and a merge operation among
 * the others that pauses its key's partition, merges its leaves, and lets the waiting operations through. Each
 * invocation builds a fresh pool; afterwards both caches and the tree validate, and every loaded key that no
 * operation touches is still there. The test asserts that passes merged leaves while other operations ran.
 */
class MergeLinearizabilityTest {
    private static final int ITERATIONS = dev.dex.core.testing.LincheckBudget.scaled(12);
    private static final int INVOCATIONS_PER_ITERATION = dev.dex.core.testing.LincheckBudget.scaled(50);
    /** Loaded keys 10, 20, ..., 10 * LOADED. */
    static final int LOADED = 600;
    /** Test key k (1..6) is one of these: three loaded keys and three gaps, in both partitions. */
    static final long[] TEST_KEYS = {0, 1_010, 1_015, 2_990, 3_005, 5_020, 5_025};
    static final Map<Long, Long> INITIAL = new TreeMap<>(Map.of(1_010L, 1_011L, 2_990L, 2_991L, 5_020L, 5_021L));
    static final AtomicLong MERGED = new AtomicLong();
    static final AtomicLong MERGES_BESIDE_OTHERS = new AtomicLong();

    @Test
    void operationsStayLinearizableWhileMergesRun() {
        MERGED.set(0);
        MERGES_BESIDE_OTHERS.set(0);
        new StressOptions()
                .iterations(ITERATIONS)
                .invocationsPerIteration(INVOCATIONS_PER_ITERATION)
                .threads(3)
                .actorsPerThread(3)
                .actorsBefore(1)
                .actorsAfter(1)
                .sequentialSpecification(Sequential.class)
                .check(Concurrent.class);
        assertTrue(MERGED.get() > 0, "merge passes merged leaves: " + MERGED.get());
        assertTrue(MERGES_BESIDE_OTHERS.get() > 0, "a merge ran while another operation was in flight: " + MERGES_BESIDE_OTHERS.get());
    }

    @Param(name = "key", gen = IntGen.class, conf = "1:6")
    @Param(name = "value", gen = IntGen.class, conf = "1:5")
    public static class Concurrent {
        // Verbs of 5 µs: operations and passes overlap for longer.
        private final LocalFabric fabric = new LocalFabric(5_000);
        private final RemoteMemory admin;
        private final PartitionTable table;
        private final DexEngine[] engines = new DexEngine[2];
        private final Map<Thread, DexSession[]> sessions = new ConcurrentHashMap<>();
        private final java.util.concurrent.atomic.AtomicInteger inFlight = new java.util.concurrent.atomic.AtomicInteger();

        public Concurrent() {
            ExportedRegion region = fabric.export(0, 2L << 20, 16 << 10);
            admin = fabric.connect(region.serverId());
            long[] keys = new long[LOADED];
            long[] values = new long[LOADED];
            for (int i = 0; i < LOADED; i++) {
                keys[i] = 10L * (i + 1);
                values[i] = keys[i] + 1;
            }
            BulkLoader.formatAndLoad(admin, new TreeSettings(3, 0.15), new dev.dex.core.node.WideKeys(8).entries(keys, values), n -> { });
            table = Partitioning.fromLeafFences(admin, 2);
            PartitionTable.store(admin, table);
            for (int e = 0; e < 2; e++) {
                engines[e] = DexEngine.open(fabric.connect(region.serverId()),
                        new DexEngineSettings("dex", 8L * FrameHeaderDescriptor.FRAME_LENGTH, 0.1, 1.0));
                engines[e].acquire(e);
            }
        }

        private int partition(int key) {
            return table.partitionOf(TEST_KEYS[key]);
        }

        private DexSession session(int key) {
            return sessions.computeIfAbsent(Thread.currentThread(), t -> new DexSession[] {engines[0].newSession(),
                    engines[1].newSession()})[partition(key)];
        }

        /** Runs an operation counted as in flight (a merge beside it is one that overlapped another operation). */
        private <T> T counted(java.util.function.Supplier<T> operation) {
            inFlight.incrementAndGet();
            try {
                return operation.get();
            } finally {
                inFlight.decrementAndGet();
            }
        }

        @Operation
        public Long lookup(@Param(name = "key") int key) {
            return counted(() -> {
                DexSession s = session(key);
                return s.lookup(TEST_KEYS[key]) ? s.value() : null;
            });
        }

        @Operation
        public boolean insert(@Param(name = "key") int key, @Param(name = "value") int value) {
            return counted(() -> session(key).insert(TEST_KEYS[key], value));
        }

        @Operation
        public boolean put(@Param(name = "key") int key, @Param(name = "value") int value) {
            return counted(() -> session(key).put(TEST_KEYS[key], value));
        }

        @Operation
        public boolean delete(@Param(name = "key") int key) {
            return counted(() -> session(key).delete(TEST_KEYS[key]));
        }

        /** A merge pass over the key's partition: it changes no entry, so it answers nothing. */
        @Operation
        public int merge(@Param(name = "key") int key) {
            boolean beside = inFlight.get() > 0;
            int[] report = engines[partition(key)].merge(partition(key));
            MERGED.addAndGet(report[0]);
            if (beside && report[0] > 0) {
                MERGES_BESIDE_OTHERS.incrementAndGet();
            }
            return 0;
        }

        /** Both caches valid; closed (every page written back), the tree validates and keeps every untouched key. */
        @Validate
        public void validate() {
            for (DexSession[] perThread : sessions.values()) {
                for (DexSession s : perThread) {
                    s.close();
                }
            }
            for (DexEngine engine : engines) {
                CacheValidator.validate(engine);
                engine.close();
            }
            TreeMap<Long, Long> stored = new TreeMap<>();
            TreeValidator.validate(admin, stored::put);
            for (int i = 1; i <= LOADED; i++) {
                long key = 10L * i;
                if (!INITIAL.containsKey(key) && (stored.get(key) == null || stored.get(key) != key + 1)) {
                    throw new IllegalStateException("loaded key " + key + " lost or changed: " + stored.get(key));
                }
            }
            admin.close();
            fabric.close();
        }
    }

    /** The sequential specification: a map of the test keys; a merge changes nothing. */
    public static class Sequential {
        private final TreeMap<Long, Long> entries = new TreeMap<>(INITIAL);

        public Long lookup(int key) {
            return entries.get(TEST_KEYS[key]);
        }

        public boolean insert(int key, int value) {
            return entries.putIfAbsent(TEST_KEYS[key], (long) value) == null;
        }

        public boolean put(int key, int value) {
            return entries.put(TEST_KEYS[key], (long) value) != null;
        }

        public boolean delete(int key) {
            return entries.remove(TEST_KEYS[key]) != null;
        }

        public int merge(int key) {
            return 0;
        }
    }
}
