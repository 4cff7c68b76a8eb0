package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.SplittableRandom;
import java.util.TreeMap;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.client.DexException;
import dev.dex.actors.partition.Ops;
import dev.dex.core.partition.PartitionTable;

/**
 * A cluster formatted with keys wider than 8 bytes (a memory node, two compute nodes, a client in this JVM), used
 * through the Java API with byte-string keys: every operation agrees with a model ordered as unsigned bytes, scans
 * cross partitions and, with 64-byte keys, outgrow one message's part ({@link Ops#scanLimit}) and go on after its last
 * key. Keys share long prefixes, so the engine compares whole keys; their first bytes spread them over the partitions.
 */
@ExtendWith(LogCapturingExtension.class)
class WideKeyClusterTest {

    @ParameterizedTest(name = "{0}-byte keys")
    @ValueSource(ints = {16, 64})
    void byteStringKeysThroughTheClusterMatchAModel(int keyBytes) throws Exception {
        // Partitions by a key's first 8 bytes: equal width over the first words of keys starting with 'a'..'z'.
        long low = firstWord("a");
        long high = firstWord("{");
        try (TestCluster cluster = new TestCluster()) {
            cluster.memoryNode(keyBytes, PartitionTable.equalWidth(TestCluster.PARTITIONS, low, high));
            cluster.computeNode(4L << 20);
            cluster.computeNode(4L << 20);
            DexClientApi client = cluster.client(keyBytes);
            cluster.awaitUp(Duration.ofSeconds(30));
            DexClientApi.Blocking blocking = client.blocking();

            TreeMap<byte[], Long> model = new TreeMap<>(Arrays::compareUnsigned);
            SplittableRandom random = new SplittableRandom(keyBytes);
            int keys = keyBytes == 64 ? 2_500 : 1_500;
            String prefix = "-".repeat(keyBytes - 13);
            for (int i = 0; i < keys; i++) {
                // A first letter that spreads keys over the partitions, a long shared middle, a number at the end.
                String key = (char) ('a' + random.nextInt(26)) + prefix + String.format("%011d", random.nextLong(100_000_000_000L));
                byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
                long value = random.nextLong();
                assertEquals(model.put(bytes, value) != null, blocking.put(key, value), key);
            }
            // Many keys in one partition: a scan of them is longer than one part of 64-byte keys.
            for (int i = 0; i < keys; i++) {
                String key = "q" + prefix + String.format("%011d", i);
                model.put(key.getBytes(StandardCharsets.UTF_8), (long) i);
                client.put(key, i);
            }
            for (int i = 0; i < 300; i++) {
                byte[] key = randomKey(random, model);
                OptionalLong found = blocking.get(key);
                assertEquals(model.containsKey(key) ? OptionalLong.of(model.get(key)) : OptionalLong.empty(), found);
                if (i % 3 == 0) {
                    assertEquals(model.remove(key) != null, blocking.delete(key));
                }
            }

            int all = model.size() + 5;
            assertScan(model, blocking.scan("", all), all, "a scan of everything from the empty key");
            byte[] q = ("q" + prefix).getBytes(StandardCharsets.UTF_8);
            int many = keyBytes == 64 ? Ops.scanLimit(8) + 400 : 2 * keys;
            assertScan(model.tailMap(q, true), blocking.scan(q, many), many, "a scan past one part's limit");
            byte[] middle = model.keySet().stream().skip(model.size() / 2).findFirst().orElseThrow();
            assertScan(model.tailMap(middle, true), blocking.scan(middle, 50), 50, "a scan from a key in the middle");

            DexException wide = assertThrows(DexException.class, () -> blocking.put("x".repeat(keyBytes + 1), 1));
            assertTrue(wide.getMessage().contains("this index's keys are at most " + keyBytes + " bytes"), wide.getMessage());
            DexException longKey = assertThrows(DexException.class, () -> blocking.get(42L));
            assertTrue(longKey.getMessage().contains("this index's keys are " + keyBytes + " bytes"), longKey.getMessage());
            assertEquals(model.size(), blocking.scan("", all).size(), "the refused operations changed nothing");
        }
    }

    private static void assertScan(Map<byte[], Long> expected, List<DexClientApi.Entry> scanned, int count, String what) {
        List<String> want = new ArrayList<>();
        for (Map.Entry<byte[], Long> e : expected.entrySet()) {
            if (want.size() == count) {
                break;
            }
            want.add(new String(e.getKey(), StandardCharsets.UTF_8) + "=" + e.getValue());
        }
        List<String> got = new ArrayList<>();
        for (DexClientApi.Entry e : scanned) {
            got.add(e.keyText() + "=" + e.value());
        }
        assertEquals(want.size(), got.size(), what + ": entries");
        assertEquals(want, got, what);
    }

    private static byte[] randomKey(SplittableRandom random, TreeMap<byte[], Long> model) {
        if (random.nextBoolean()) {
            return model.keySet().stream().skip(random.nextInt(model.size())).findFirst().orElseThrow();
        }
        byte[] key = model.firstKey().clone();
        key[key.length - 1] ^= 1;
        return key;
    }

    private static long firstWord(String text) {
        byte[] eight = Arrays.copyOf(text.getBytes(StandardCharsets.US_ASCII), 8);
        long word = 0;
        for (byte b : eight) {
            word = (word << 8) | (b & 0xFF);
        }
        return word ^ Long.MIN_VALUE;
    }
}
