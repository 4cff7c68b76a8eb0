package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.core.node.WideKeys;

import dev.dex.core.engine.PartitionNotHeldException;

/**
 * Seeded random operations against a {@link TreeMap}, routed by partition to C engines whose caches are
 * a few dozen frames (constant eviction). Engines see each other's changes to shared nodes only through
 * fence checks and version checks. After the run: the cache validator, a flush, the tree validator, and a
 * full comparison of remote memory with the model.
 */
class DexModelTest {

    @ParameterizedTest(name = "{0} engines={1} frames={2} P_A={3} servers={4} M={5} partitions={6} leafFences={7} key bytes={8}")
    @CsvSource({
            "dex,         1, 40,  0.1, 1, 3, 8,  true,  8",
            "dex,         1, 24,  1.0, 2, 1, 16, false, 8",
            "dex,         2, 48,  0.5, 2, 2, 8,  false, 8",
            "dex,         3, 64,  0.3, 3, 1, 12, true,  8",
            "dex,         2, 400, 1.0, 1, 3, 4,  false, 8",
            "sherman,     2, 40,  0.0, 2, 1, 8,  false, 8",
            "partitioned, 2, 0,   0.0, 1, 3, 8,  false, 8",
            "partitioned, 1, 0,   0.0, 2, 0, 1,  true,  8",
            "dex,         2, 48,  0.5, 2, 2, 8,  false, 16",
            "dex,         3, 64,  0.3, 3, 1, 12, true,  16",
            "dex,         2, 96,  1.0, 2, 2, 6,  true,  64",
            "dex,         1, 24,  0.2, 1, 3, 4,  false, 64",
            "sherman,     2, 40,  0.0, 2, 1, 8,  false, 16",
            "partitioned, 2, 0,   0.0, 1, 3, 8,  false, 64"})
    void randomOperationsMatchTheModel(String mode, int engines, int frames, double admission, int servers,
                                       int subtreeLevel, int partitions, boolean leafFences, int keyBytes) {
        try (DexFixture fixture = new DexFixture(servers, subtreeLevel, 6_000, partitions, leafFences, 0,
                dev.dex.core.tree.TreeSettings.DEFAULT_BULK_FILL_FACTOR, false, keyBytes)) {
            DexEngineSettings config = new DexEngineSettings(mode, (long) frames * FrameHeaderDescriptor.FRAME_LENGTH,
                    DexEngineSettings.DEFAULT_COOLING_RATIO, admission);
            List<DexEngine> list = fixture.open(engines, config);
            TreeMap<Long, Long> model = fixture.initialModel();
            randomOperations(fixture, list, model, 25_000, frames * 31L + engines);
            assertEquals(model, fixture.validateFlushAndRead());
        }
    }

    /**
     * Runs seeded random lookups, inserts, updates, puts, deletes and scans, each routed to the engine that
     * holds its key's partition, checking every result against {@code model} (which it keeps up to date),
     * with the cache validator every 5000 operations.
     */
    static void randomOperations(DexFixture fixture, List<DexEngine> list, TreeMap<Long, Long> model, int operations,
                                 long seed) {
        int engines = list.size();
        WideKeys.Session[] sessions = list.stream().map(e -> fixture.wide.of(e.newSession())).toArray(WideKeys.Session[]::new);
        SplittableRandom random = new SplittableRandom(seed);
        long range = 2L * fixture.loaded + 400;
        long[] scanKeys = new long[300];
        long[] scanValues = new long[300];
        for (int op = 0; op < operations; op++) {
            long key = random.nextInt(10) == 0 ? random.nextLong(-50, 0) : random.nextLong(1, range);
            int p = fixture.partitionOf(key);
            WideKeys.Session s = sessions[p % engines];
            long value = random.nextLong();
            String context = list.get(0).mode() + " op " + op + " key " + key;
            switch (random.nextInt(10)) {
                case 0, 1, 2 -> {
                    boolean found = s.lookup(key);
                    assertEquals(model.containsKey(key), found, context);
                    if (found) {
                        assertEquals(model.get(key), s.value(), context);
                    }
                }
                case 3, 4 -> assertEquals(model.putIfAbsent(key, value) == null, s.insert(key, value), context);
                case 5 -> assertEquals(model.replace(key, value) != null, s.update(key, value), context);
                case 6 -> assertEquals(model.put(key, value) != null, s.put(key, value), context);
                case 7 -> assertEquals(model.remove(key) != null, s.delete(key), context);
                default -> {
                    int count = random.nextInt(scanKeys.length + 1);
                    // One scan in three asks for the start's partition alone, as a partition's owner in the cluster does.
                    boolean onePartition = random.nextInt(3) == 0;
                    int n = onePartition ? s.scanPartition(key, count, scanKeys, scanValues) : s.scan(key, count, scanKeys, scanValues);
                    long end = fixture.table.upperInclusive(p);
                    Iterator<Map.Entry<Long, Long>> expected = model.tailMap(key, true).entrySet().iterator();
                    int i = 0;
                    while (i < count && expected.hasNext()) {
                        Map.Entry<Long, Long> e = expected.next();
                        int ep = fixture.partitionOf(e.getKey());
                        if (ep != p && ep % engines != p % engines) {
                            break;
                        }
                        if (ep != p && (onePartition || !list.get(p % engines).holds(ep))) {
                            break;
                        }
                        assertEquals(e.getKey(), scanKeys[i], context + " scan entry " + i);
                        assertEquals(e.getValue(), scanValues[i], context + " scan entry " + i);
                        i++;
                    }
                    assertTrue(n >= Math.min(i, count), context + " scan returned " + n + " of " + i);
                    assertEquals(i, n, context + " scan length (ends at the last held partition, " + end + ")");
                }
            }
            if (op % 5_000 == 4_999) {
                list.forEach(CacheValidator::validate);
            }
        }
        if (engines > 1) {
            long foreign = fixture.wide.largestWithFirstWord(fixture.table.upperInclusive(1));
            assertThrows(PartitionNotHeldException.class, () -> sessions[0].lookup(foreign));
        }
        for (WideKeys.Session s : sessions) {
            s.session().close();
        }
    }
}
