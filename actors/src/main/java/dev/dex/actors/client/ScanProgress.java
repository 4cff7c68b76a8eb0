package dev.dex.actors.client;

import java.util.Arrays;
import java.util.function.Consumer;

import dev.dex.actors.partition.Ops;
import dev.dex.core.engine.IndexSession;
import dev.dex.core.node.KeyFormat;

/**
 * A scan of a {@link DexClient} that may span partitions: it goes as one scan per partition, in key order, each
 * asked for when the previous part is answered, and the parts' entries are concatenated until the scan has what was
 * asked for or the keys run out. This is the only state of the client that outlives one batch's answer.
 */
final class ScanProgress {
    final Consumer<DexClient.ScanReply> replyTo;
    final int wanted;
    final long deadline;
    /** Words per key; {@link #keys} holds each entry's words in turn. */
    final int words;
    long[] keys = new long[0];
    long[] values = new long[0];

    ScanProgress(Consumer<DexClient.ScanReply> replyTo, int wanted, long deadline) {
        this(replyTo, wanted, deadline, 1);
    }

    ScanProgress(Consumer<DexClient.ScanReply> replyTo, int wanted, long deadline, int words) {
        this.deadline = deadline;
        this.replyTo = replyTo;
        this.wanted = wanted;
        this.words = words;
    }

    /**
     * Takes the answer to the part {@code asked}: adds its entries, and returns the scan of the next part, or null once
     * the scan is answered (it has what was asked for, the keys ran out, or the part failed).
     */
    Ops.Op take(Ops.Op asked, Ops.Result result) {
        if (result.status() != Ops.OK) {
            replyTo.accept(new DexClient.ScanReply(keys, values, Pending.errorOf(result), words));
            return null;
        }
        if (words > 1) {
            return takeWide(asked, result);
        }
        int have = keys.length;
        int take = Math.min(result.keys().length, wanted - have);
        keys = Arrays.copyOf(keys, have + take);
        values = Arrays.copyOf(values, have + take);
        System.arraycopy(result.keys(), 0, keys, have, take);
        System.arraycopy(result.values(), 0, values, have, take);
        int missing = wanted - keys.length;
        if (missing > 0 && result.next() != Long.MIN_VALUE) {
            return new Ops.Op(Ops.SCAN, result.next(), 0, Math.min(missing, Ops.MAX_SCAN));
        }
        replyTo.accept(new DexClient.ScanReply(keys, values, null));
        return null;
    }

    /**
     * A part of a scan of keys of {@link #words} words: its entries are added; the scan goes on after the last key when
     * the part was as long as asked for, else at the next partition's start ({@code result.next()}, the first word of a
     * key whose other words are minimal), until it has what was asked for or the keys run out.
     */
    private Ops.Op takeWide(Ops.Op asked, Ops.Result result) {
        if (result.keyWords() != words) {
            replyTo.accept(new DexClient.ScanReply(keys, values, "a scan answer with keys of " + result.keyWords()
                    + " words, not " + words, words));
            return null;
        }
        int have = values.length;
        int got = result.values().length;
        int take = Math.min(got, wanted - have);
        keys = Arrays.copyOf(keys, (have + take) * words);
        values = Arrays.copyOf(values, have + take);
        System.arraycopy(result.keys(), 0, keys, have * words, take * words);
        System.arraycopy(result.values(), 0, values, have, take);
        int missing = wanted - values.length;
        long[] next = null;
        if (missing > 0 && got > 0 && got == asked.count()) {
            next = Arrays.copyOfRange(result.keys(), (got - 1) * words, got * words);
            if (KeyFormat.of(8 * words).isPosInfinity(next, 0)) {
                next = null; // the largest key there is: nothing after it
            } else {
                IndexSession.successor(next, words);
            }
        } else if (missing > 0 && result.next() != Long.MIN_VALUE) {
            next = new long[words];
            Arrays.fill(next, Long.MIN_VALUE);
            next[0] = result.next();
        }
        if (next != null) {
            return new Ops.Op(Ops.SCAN, next, 0, Math.min(missing, Ops.scanLimit(words)));
        }
        replyTo.accept(new DexClient.ScanReply(keys, values, null, words));
        return null;
    }
}
