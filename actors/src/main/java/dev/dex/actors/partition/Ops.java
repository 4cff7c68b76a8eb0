package dev.dex.actors.partition;

import java.util.List;

import dev.dex.actors.CborSerializable;
import dev.dex.core.node.LeafOps;

/**
 * Operations a client sends to a partition, and their results. Batched: one message carries many
 * operations of one partition.
 */
public final class Ops {
    // The index's operation codes (LeafOps), and a scan.
    public static final int GET = LeafOps.LOOKUP;
    public static final int INSERT = LeafOps.INSERT;
    public static final int UPDATE = LeafOps.UPDATE;
    public static final int PUT = LeafOps.PUT;
    public static final int DELETE = LeafOps.DELETE;
    public static final int SCAN = 5;

    /** The name of operation code {@code kind}: get, insert, update, put, delete or scan. */
    public static String kindName(int kind) {
        return kind == SCAN ? "scan" : kind == GET ? "get" : LeafOps.name(kind);
    }

    /** The most entries one scan message may ask for: 16 bytes each, well inside Artery's 256 KiB frame. */
    public static final int MAX_SCAN = 8192;
    /**
     * The most entries one scan message may ask for with keys of {@code words} words: as many bytes as
     * {@link #MAX_SCAN} entries of 8-byte keys.
     */
    public static int scanLimit(int words) {
        return words == 1 ? MAX_SCAN : Math.max(1, MAX_SCAN * 2 / (words + 1));
    }

    /** The most operations one batch message may carry. */
    public static final int MAX_BATCH = 1024;

    public static final int OK = 0;
    /** This compute node does not hold the partition (it is moving): send again through sharding. */
    public static final int NOT_HELD = 1;
    /** The operation itself is wrong (a reserved key, a scan count out of range); sending it again won't help. */
    public static final int BAD_INPUT = 2;
    /** The memory pool has no room for the split this insert needs. */
    public static final int MEMORY_FULL = 3;
    /** Anything else went wrong on the compute node; {@link Result#error()} says what. */
    public static final int FAILED = 4;
    /** The partition has too many batches waiting; nothing of the batch was applied. */
    public static final int OVERLOADED = 5;
    /**
     * A batch of writes the partition refused because it may be a late attempt: it was sent for another owner
     * (epoch) of the partition than the one that holds it now, or before its client's epoch was known, or it
     * arrived after a later batch of the same client had been applied. Nothing of it was applied; the answer's
     * {@link Results#epoch()} is the partition's current one, and the client sends the operations again with it.
     */
    public static final int STALE = 6;
    /**
     * The key is no longer in the partition the client sent it to: the partition split (docs/partition-splits.md).
     * Nothing was applied; the client reads the partition table again and sends the operation where it lies now.
     */
    public static final int MOVED = 7;

    private Ops() {
    }

    /**
     * One operation: {@code kind} one of GET..SCAN; {@code count} only for scans. {@code key} is the key's words
     * ({@code KeyFormat}: one for an 8-byte index, up to eight), the one representation of a key from the client's
     * conversion through the batch decoder to the engine's leaf; its first word is what partitions go by. Nobody
     * writes into it once the operation is built.
     */
    public record Op(int kind, long[] key, long value, int count) implements CborSerializable {
        /** The most words a key has (a 64-byte key). */
        static final int MAX_WORDS = 8;

        public Op {
            if (key == null || key.length < 1 || key.length > MAX_WORDS) {
                throw new IllegalArgumentException("a key of 1 to " + MAX_WORDS + " words: "
                        + (key == null ? "none" : key.length + " words"));
            }
        }

        /** An operation on an 8-byte key. */
        public Op(int kind, long key, long value, int count) {
            this(kind, new long[] {key}, value, count);
        }

        /** The key's first word: the whole key of an 8-byte index, and what partitions go by. */
        public long first() {
            return key[0];
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Op other && kind == other.kind && java.util.Arrays.equals(key, other.key) && value == other.value
                    && count == other.count;
        }

        @Override
        public int hashCode() {
            return java.util.Objects.hash(kind, java.util.Arrays.hashCode(key), value, count);
        }

        @Override
        public String toString() {
            return "Op[kind=" + kind + ", key=" + (key.length == 1 ? Long.toString(key[0]) : java.util.Arrays.toString(key))
                    + ", value=" + value + ", count=" + count + "]";
        }

        /** Whether the operation may change the index (a kind it does not know counts as one). */
        boolean writes() {
            return kind != GET && kind != SCAN;
        }
    }

    /**
     * The result of one operation. GET: {@code found}/{@code value}. PUT: {@code found} = the key existed.
     * INSERT/UPDATE/DELETE: {@code found} = it changed something. SCAN: {@code keys}/{@code values}, and
     * {@code next}, the key to continue from (in this partition when the count was filled, else at the next
     * partition's start), or {@link Long#MIN_VALUE} when the key space is exhausted. With keys of more than one
     * word ({@code keyWords}), {@code keys} holds each entry's words in turn, and {@code next} is the first word of
     * the next partition's start (its other words minimal) or {@link Long#MIN_VALUE}; when the count was filled the
     * client goes on after the last key itself.
     */
    public record Result(int status, boolean found, long value, long[] keys, long[] values, long next, String error, int keyWords)
            implements CborSerializable {
        static final long[] NONE = new long[0];

        public Result(int status, boolean found, long value, long[] keys, long[] values, long next, String error) {
            this(status, found, value, keys, values, next, error, 1);
        }

        /** The answers without a value (a write's, a get that found nothing): shared; their only arrays are the empty NONE. */
        private static final Result FOUND_NO_VALUE = new Result(OK, true, 0, NONE, NONE, Long.MIN_VALUE, null);
        private static final Result NOT_FOUND = new Result(OK, false, 0, NONE, NONE, Long.MIN_VALUE, null);

        public static Result of(boolean found, long value) {
            if (value == 0) {
                return found ? FOUND_NO_VALUE : NOT_FOUND;
            }
            return new Result(OK, found, value, NONE, NONE, Long.MIN_VALUE, null);
        }

        public static Result error(int status, String error) {
            return new Result(status, false, 0, NONE, NONE, Long.MIN_VALUE, error);
        }
    }

    /**
     * The results of one batch, in the order of its operations; {@code batch} is the id the batch's
     * {@code Partition.Execute} carried, so that a client with several batches in flight knows which this
     * answers; {@code host} is the address of the compute node that answered (null before a partition stamps
     * it): the client re-sends a batch soon after the node that served its partition is removed from the
     * cluster, instead of waiting for its timeout. An answer {@link Ops#NOT_HELD} without a host comes from the router of a
     * leaving node, which did not forward the batch: the client sends it again at once through sharding; {@code epoch} names the owner of the partition that answered
     * (0 when unknown: a stand-in, or an answer given before the partition was acquired), which the client puts
     * in its next batches of writes ({@link Partition.Execute#epoch()}). On the wire in {@link BatchSerializer}'s
     * binary layout. {@code trace} is the batch's {@link HopTrace}, null unless it was traced.
     */
    public record Results(long batch, List<Result> results, String host, long epoch, long[] trace) implements CborSerializable {
        public Results(long batch, List<Result> results, String host, long epoch) {
            this(batch, results, host, epoch, null);
        }

        public Results(long batch, List<Result> results, String host) {
            this(batch, results, host, 0);
        }

        public Results(List<Result> results, String host) {
            this(0, results, host);
        }

        public Results(List<Result> results) {
            this(0, results, null);
        }
    }

    /**
     * Answers to several batches at once, each as its partition gave it: what a compute node's
     * {@link PartitionRouter} sends back for the batches of one {@link PartitionRouter.Bundle} and others
     * answered meanwhile. On the wire in {@link BatchSerializer}'s binary layout.
     */
    public record ResultsBundle(List<Results> answers) implements CborSerializable {
        public ResultsBundle {
            answers = List.copyOf(answers);
        }
    }
}
