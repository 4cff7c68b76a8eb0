package dev.dex.core.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import dev.dex.core.node.WideKeys;
import dev.dex.rdma.RemoteMemory;

/**
 * Seeded random operations against a {@link TreeMap} model, through two tree instances that share the
 * pool (so each instance sees the other's splits only through fence checks and its stale root pointer).
 * Sweeps memory servers, subtree level M, key width (8 to 64 bytes, {@link WideKeys}) and empty versus bulk-loaded
 * starts; ends with the validator
 * and a full comparison of the tree with the model.
 */
class TreeModelTest {

    static Stream<Arguments> configurations() {
        return Stream.of(
                // servers, M, bulk-loaded keys, key range, operations, seed, key bytes
                Arguments.of(1, 3, 0, 5_000, 30_000, 1L, 8),
                Arguments.of(3, 1, 0, 20_000, 30_000, 2L, 8),
                Arguments.of(2, 0, 4_000, 50_000, 30_000, 3L, 8),
                Arguments.of(3, 2, 20_000, 200_000, 20_000, 4L, 8),
                Arguments.of(4, 3, 0, 1_000_000_000_000L, 20_000, 5L, 8),
                Arguments.of(2, 1, 0, 20_000, 20_000, 6L, 16),
                Arguments.of(3, 2, 4_000, 5_000_000_000_000L, 20_000, 7L, 32),
                Arguments.of(2, 0, 2_000, 50_000, 20_000, 8L, 64));
    }

    @ParameterizedTest(name = "servers={0} M={1} bulk={2} range={3} ops={4} seed={5} key bytes={6}")
    @MethodSource("configurations")
    void randomOperationsMatchTheModel(int servers, int subtreeLevel, int bulk, long range, int operations, long seed, int keyBytes) {
        SplittableRandom random = new SplittableRandom(seed);
        TreeMap<Long, Long> model = new TreeMap<>();
        WideKeys wide = new WideKeys(keyBytes);
        try (TestPools pools = new TestPools(servers, 64)) {
            RemoteMemory memory = pools.connect();
            TreeSettings config = TreeSettings.defaults().withSubtreeLevel(subtreeLevel).withKeyBytes(keyBytes);
            if (bulk > 0) {
                long[] keys = random.longs(bulk * 2L, -range, range).distinct().limit(bulk).sorted().toArray();
                long[] values = new long[keys.length];
                for (int i = 0; i < keys.length; i++) {
                    values[i] = keys[i] ^ 0x5555;
                    model.put(keys[i], values[i]);
                }
                BulkLoader.formatAndLoad(memory, config, wide.entries(keys, values), n -> { });
            } else {
                Superblock.format(memory, config);
            }
            WideKeys.Session[] sessions = {
                    wide.of(BaselineTree.open(memory).newSession()),
                    wide.of(BaselineTree.open(pools.connect()).newSession())};
            long[] scanKeys = new long[512];
            long[] scanValues = new long[512];
            for (int op = 0; op < operations; op++) {
                WideKeys.Session s = sessions[random.nextInt(sessions.length)];
                long key = randomKey(random, range);
                long value = random.nextLong();
                String context = "op " + op + " key " + key;
                switch (random.nextInt(10)) {
                    case 0, 1 -> {
                        boolean found = s.lookup(key);
                        assertEquals(model.containsKey(key), found, context);
                        if (found) {
                            assertEquals(model.get(key), s.value(), context);
                        }
                    }
                    case 2, 3 -> assertEquals(model.putIfAbsent(key, value) == null, s.insert(key, value), context);
                    case 4 -> assertEquals(model.replace(key, value) != null, s.update(key, value), context);
                    case 5 -> assertEquals(model.put(key, value) != null, s.put(key, value), context);
                    case 6, 7 -> assertEquals(model.remove(key) != null, s.delete(key), context);
                    default -> {
                        int count = random.nextInt(scanKeys.length + 1);
                        int n = s.scan(key, count, scanKeys, scanValues);
                        Iterator<Map.Entry<Long, Long>> expected = model.tailMap(key, true).entrySet().iterator();
                        int i = 0;
                        while (i < count && expected.hasNext()) {
                            Map.Entry<Long, Long> e = expected.next();
                            assertEquals(e.getKey(), scanKeys[i], context + " scan entry " + i);
                            assertEquals(e.getValue(), scanValues[i], context + " scan entry " + i);
                            i++;
                        }
                        assertEquals(i, n, context + " scan length");
                    }
                }
            }
            long[] reserved = new long[wide.words()];
            java.util.Arrays.fill(reserved, Long.MIN_VALUE);
            assertThrows(IllegalArgumentException.class, () -> sessions[0].session().insert(reserved, 1));
            assertThrows(IllegalArgumentException.class, () -> sessions[0].session().lookup(reserved));
            if (keyBytes > 8) {
                assertThrows(IllegalArgumentException.class, () -> sessions[0].session().lookup(42L), "a long key on wide keys");
            }

            List<long[]> stored = new ArrayList<>();
            TreeValidator.Report report = TreeValidator.validateWords(memory, (k, v) -> stored.add(new long[] {wide.fromWords(k, 0), v}));
            assertEquals(model.size(), report.entries());
            Iterator<Map.Entry<Long, Long>> expected = model.entrySet().iterator();
            for (long[] entry : stored) {
                Map.Entry<Long, Long> e = expected.next();
                assertEquals(e.getKey(), entry[0]);
                assertEquals(e.getValue(), entry[1]);
            }
            assertTrue(report.height() >= 2, "the run must grow the tree beyond one leaf: " + report.height());
        }
    }

    /** Mostly uniform keys, with the extremes and a dense low range so leaves fill and split. */
    private static long randomKey(SplittableRandom random, long range) {
        return switch (random.nextInt(20)) {
            case 0 -> Long.MAX_VALUE - random.nextInt(3);
            case 1 -> Long.MIN_VALUE + 1 + random.nextInt(3);
            case 2, 3, 4 -> random.nextLong(0, 300);
            default -> random.nextLong(-range, range);
        };
    }
}
