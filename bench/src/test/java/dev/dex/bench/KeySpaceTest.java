package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

import dev.dex.core.tree.SortedEntries;

class KeySpaceTest {

    @Test
    void hottestRanksMapToScatteredKeys() {
        long keys = 1_000_000;
        long[] indexes = new long[32];
        for (int rank = 0; rank < indexes.length; rank++) {
            indexes[rank] = KeyChooser.scatter(rank, keys);
        }
        long[] sorted = indexes.clone();
        Arrays.sort(sorted);
        for (int i = 1; i < sorted.length; i++) {
            assertTrue(sorted[i] - sorted[i - 1] > 1, "hot indexes " + sorted[i - 1] + " and " + sorted[i] + " are adjacent");
        }
        // Scattered over the whole space, not bunched at its start.
        assertTrue(sorted[sorted.length - 1] - sorted[0] > keys / 2, Arrays.toString(sorted));
        assertFalse(Arrays.stream(indexes).anyMatch(i -> i < 0 || i >= keys));
    }

    @Test
    void zipfChooserMakesTheScatteredRankZeroKeyTheHottest() {
        long keys = 100_000;
        KeyChooser chooser = KeyChooser.of(Distribution.ZIPF, keys, 0.99);
        SplittableRandom random = new SplittableRandom(5);
        Map<Long, Integer> counts = new HashMap<>();
        for (int i = 0; i < 100_000; i++) {
            counts.merge(chooser.nextIndex(random), 1, Integer::sum);
        }
        long hottest = counts.entrySet().stream().max(Map.Entry.comparingByValue()).orElseThrow().getKey();
        assertEquals(KeyChooser.scatter(0, keys), hottest);
        assertTrue(counts.get(hottest) > 100_000 / 20, "the hottest key gets " + counts.get(hottest));
    }

    @Test
    void uniformChooserCoversTheKeysEvenly() {
        long keys = 10;
        KeyChooser chooser = KeyChooser.of(Distribution.UNIFORM, keys, 0);
        SplittableRandom random = new SplittableRandom(6);
        long[] counts = new long[(int) keys];
        for (int i = 0; i < 100_000; i++) {
            counts[(int) chooser.nextIndex(random)]++;
        }
        for (long c : counts) {
            assertEquals(10_000, c, 500);
        }
    }

    @Test
    void insertKeysFallStrictlyBetweenLoadedKeys() {
        KeySpace space = new KeySpace(1000);
        SplittableRandom random = new SplittableRandom(7);
        for (int i = 0; i < 100_000; i++) {
            long index = random.nextLong(space.keys());
            long key = space.insertKey(index, random);
            long below = index == 0 ? 0 : space.loadedKey(index - 1);
            assertTrue(key > below && key < space.loadedKey(index), "insert key " + key + " for index " + index);
            assertTrue(key >= space.minKey() && key <= space.maxKey());
        }
    }

    @Test
    void entriesAreTheLoadedKeysAscendingWithValueKeyPlusOne() {
        KeySpace space = new KeySpace(500);
        SortedEntries entries = space.entries();
        long count = 0;
        long previous = Long.MIN_VALUE;
        while (entries.next()) {
            assertEquals(space.loadedKey(count), entries.key());
            assertEquals(entries.key() + 1, entries.value());
            assertTrue(entries.key() > previous);
            previous = entries.key();
            count++;
        }
        assertEquals(500, count);
        assertEquals(space.maxKey(), previous);
    }
}
