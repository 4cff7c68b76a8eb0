package dev.dex.bench;

import java.util.Arrays;

import dev.dex.core.tree.SortedEntries;

/**
 * The benchmark's keys at a width of {@code 8 * words} bytes: key {@code n} of the key space is the word {@code n}
 * followed by filler words, so keys keep the key space's order and partitions (which go by a key's first word), and
 * a wider key costs what the paper's key-size experiment measures: fewer entries per 1 KiB node, so a taller tree
 * and more bytes per cached node. Not thread-safe: one per worker.
 */
final class BenchKeys {
    /** The filler words: "-key-pad" in ASCII, as a key word (big-endian, sign bit flipped). */
    static final long FILLER = 0x2d6b_6579_2d70_6164L ^ Long.MIN_VALUE;

    private final int words;
    private final long[] key;

    BenchKeys(int keyBytes) {
        this.words = keyBytes / 8;
        this.key = new long[words];
        Arrays.fill(key, FILLER);
    }

    int words() {
        return words;
    }

    /** Key {@code n}'s words, in this object's own array (valid until the next call). */
    long[] of(long n) {
        key[0] = n;
        return key;
    }

    /** The key space's entries as keys of this width, for bulk load. */
    SortedEntries entries(SortedEntries longs) {
        return SortedEntries.withWords(longs, (n, out) -> {
            out[0] = n;
            Arrays.fill(out, 1, words, FILLER);
        });
    }
}
