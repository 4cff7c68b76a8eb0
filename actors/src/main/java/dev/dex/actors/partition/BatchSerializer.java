package dev.dex.actors.partition;

import static dev.dex.actors.partition.WireLimits.MAX_BUNDLE;
import static dev.dex.actors.partition.WireLimits.MAX_STRING;
import static dev.dex.actors.partition.WireLimits.OP_BYTES;
import static dev.dex.actors.partition.WireLimits.opBytes;

import java.io.NotSerializableException;
import java.nio.BufferOverflowException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.ByteBufferSerializer;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The binary wire format of the hot messages, {@link Partition.Execute} and {@link Ops.Results}: every batch
 * between a client and a partition. Jackson CBOR wrote one object with field names per operation; this writes
 * fixed-width fields, 24 bytes per operation and 10 per plain result, and keeps CBOR for the control messages.
 *
 * <p>Layout (big-endian; "string" is an {@code int32} byte length, -1 for null, then UTF-8 bytes):
 * <pre>
 * Execute (manifest "E"):
 *   u8 version = 7 | i64 partition | i64 batch | i64 client | i64 seq | i64 epoch | i64 follows | trace | string replyTo
 *   | i32 count (0..WIRE_MAX_OPS)
 *   count x op
 *   op: { i32 kind | u8 r (0..7) | i64 key | i64 value | i32 count | r x i64 }
 *        kind: Ops.GET..Ops.SCAN (LeafOps codes, and 5 scan); key: the key's first word, then its r further words
 *        (a key wider than 8 bytes, KeyFormat)
 * Results (manifest "R"):
 *   u8 version = 7 | i64 batch | i64 epoch | trace | string host | i32 count (0..WIRE_MAX_OPS)
 *   count x { u8 status | u8 flags | i64 value
 *             [flags &amp; ENTRIES: i32 n (0..MAX_SCAN) | u8 w (1..8) | n x w x i64 key words | n x i64 value | i64 next]
 *             [flags &amp; ERROR: string error] }
 *   flags: FOUND 1, ENTRIES 2 (a scan's part), ERROR 4
 * Bundle (manifest "B", PartitionRouter.Bundle: batches of several partitions for one compute node):
 *   u8 version = 7 | string replyTo | i64 client | i32 n (1..MAX_BUNDLE)
 *   n x { i64 partition | i64 batch | i64 epoch | i64 follows | trace | i32 count (0..WIRE_MAX_OPS) | count x op }
 *   (at most WIRE_MAX_OPS ops in all; each batch's seq is its batch id)
 * ResultsBundle (manifest "S", Ops.ResultsBundle: the answers to several batches):
 *   u8 version = 7 | i32 n (1..MAX_BUNDLE) | n x { i32 length | a Results frame of that length, as above }
 * trace: u8 n (0: not traced, else HopTrace.STAMPS) | n x i64 (HopTrace's stamps; the encoder stamps its own slot, the
 *   decoder its own)
 * </pre>
 * A result without ENTRIES has no entries, {@code next = Long.MIN_VALUE} and keys of one word (a scan's part of
 * wider keys always has ENTRIES, so the client learns their width even when there are none). Error texts share a budget of
 * {@link #ERROR_BUDGET} per answer (each cut to its share, at least {@link #MIN_ERROR} characters, at most 4 KiB),
 * so that an answer of 1024 failed operations still fits Artery's 256 KiB frame. The reply address is the actor
 * reference's serialization format; its resolution is cached (a client answers to one stable reference).
 *
 * <p>Bad input: a frame that is truncated, has trailing bytes, an unknown version or manifest, a count or length
 * out of bounds, or unknown flags fails with {@link NotSerializableException} naming what is wrong; Artery logs
 * it and drops the message, and the sender's batch times out and is sent again. Every size is checked against
 * the bytes present before anything is allocated. What is well-formed but wrong reaches the partition, which
 * answers it {@link Ops#BAD_INPUT} with the reason: an operation kind it does not know, a batch above
 * {@link Ops#MAX_BATCH} operations (the wire takes up to {@link #WIRE_MAX_OPS}, so that such a batch is refused
 * with an answer rather than dropped).
 *
 * <p>Concurrency: Artery calls a serializer from several threads; this one keeps no state but two caches of
 * reply addresses (reference to text, text to reference), concurrent maps cleared when they outgrow
 * {@link #CACHED_REFS}; a racing miss computes the same entry twice, harmlessly.
 */
public final class BatchSerializer extends SerializerWithStringManifest implements ByteBufferSerializer {
    /** Bound in this module's {@code reference.conf}; unique among the system's serializers. */
    public static final int IDENTIFIER = 7_306_531;
    static final String EXECUTE = "E";
    static final String RESULTS = "R";
    static final String BUNDLE = "B";
    static final String RESULTS_BUNDLE = "S";
    /**
     * 2 added the guard against late attempts (client, seq and epoch); 3 numbers operation kinds as LeafOps does
     * (docs/cluster.md); 4 carries keys wider than 8 bytes (an op's further words, a scan's words per key); 5 names the
     * batch each one follows, so that a retry cannot overtake ({@link Partition.Execute#follows()}); 6 carries a sampled
     * batch's {@link HopTrace}.
     */
    static final byte VERSION = 7;
    static final int FOUND = 1;
    static final int ENTRIES = 2;
    static final int ERROR = 4;
    static final int CACHED_REFS = 1024;
    /** Bytes the error texts of one answer may take together, about: with a full scan's entries, under 256 KiB. */
    static final int ERROR_BUDGET = 64 * 1024;
    /** Characters an error text keeps however many share the budget. */
    static final int MIN_ERROR = 48;
    /** Most operations or results one message may carry on the wire. */
    static final int WIRE_MAX_OPS = 16 * Ops.MAX_BATCH;
    /** A batch's header in a bundle: routing key, batch, epoch, follows, count. */
    private static final int ROUTED_BYTES = 8 + 8 + 8 + 8 + 1 + 4;

    private final ActorRefResolver resolver;
    private final ConcurrentHashMap<String, ActorRef<?>> resolved = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<ActorRef<?>, byte[]> formatted = new ConcurrentHashMap<>();

    public BatchSerializer(ExtendedActorSystem system) {
        this.resolver = ActorRefResolver.get(Adapter.toTyped(system));
    }

    @Override
    public int identifier() {
        return IDENTIFIER;
    }

    @Override
    public String manifest(Object o) {
        if (o instanceof Partition.Execute) {
            return EXECUTE;
        }
        if (o instanceof Ops.Results) {
            return RESULTS;
        }
        if (o instanceof PartitionRouter.Bundle) {
            return BUNDLE;
        }
        if (o instanceof Ops.ResultsBundle) {
            return RESULTS_BUNDLE;
        }
        throw new IllegalArgumentException("BatchSerializer cannot serialize " + o.getClass().getName());
    }

    @Override
    public byte[] toBinary(Object o) {
        return encode(o, null).array();
    }

    /**
     * Writes {@code o} into {@code buf} at its position (Artery's pooled envelope buffer: no array per message), in
     * the same big-endian bytes as {@link #toBinary(Object)} whatever the buffer's byte order, and moves the position
     * past them. A message larger than what remains fails with {@link BufferOverflowException} before anything is
     * written, as Artery expects of an oversized message.
     */
    @Override
    public void toBinary(Object o, ByteBuffer buf) {
        ByteBuffer out = buf.slice().order(ByteOrder.BIG_ENDIAN);
        encode(o, out);
        buf.position(buf.position() + out.position());
    }

    /**
     * {@code o} encoded into {@code target} from its position, or into a heap buffer of exactly its size when
     * {@code target} is null; returns the buffer written.
     */
    private ByteBuffer encode(Object o, ByteBuffer target) {
        if (o instanceof Partition.Execute execute) {
            return execute(execute, target);
        }
        if (o instanceof Ops.Results results) {
            return results(results, plan(results), target);
        }
        if (o instanceof PartitionRouter.Bundle bundle) {
            return bundle(bundle, target);
        }
        if (o instanceof Ops.ResultsBundle answers) {
            return resultsBundle(answers, target);
        }
        throw new IllegalArgumentException("BatchSerializer cannot serialize " + o.getClass().getName());
    }

    /** {@code target}, or a heap buffer of {@code size} bytes; fails if {@code target} has less room. */
    private static ByteBuffer output(ByteBuffer target, int size) {
        if (target == null) {
            return ByteBuffer.allocate(size);
        }
        if (target.remaining() < size) {
            throw new BufferOverflowException();
        }
        return target;
    }

    @Override
    public Object fromBinary(byte[] bytes, String manifest) throws NotSerializableException {
        return decode(ByteBuffer.wrap(bytes), manifest);
    }

    /**
     * Reads a message from {@code buf}'s position to its limit (Artery's envelope buffer: no copy into an array), as
     * {@link #fromBinary(byte[], String)} reads it from an array.
     */
    @Override
    public Object fromBinary(ByteBuffer buf, String manifest) throws NotSerializableException {
        ByteBuffer in = buf.slice().order(ByteOrder.BIG_ENDIAN);
        Object message = decode(in, manifest);
        buf.position(buf.position() + in.position());
        return message;
    }

    private Object decode(ByteBuffer in, String manifest) throws NotSerializableException {
        int size = in.remaining();
        try {
            Object message = switch (manifest) {
                case EXECUTE -> readExecute(in);
                case RESULTS -> readResults(in);
                case BUNDLE -> readBundle(in);
                case RESULTS_BUNDLE -> readResultsBundle(in);
                default -> throw new NotSerializableException("BatchSerializer: unknown manifest '" + manifest + "'");
            };
            if (in.hasRemaining()) {
                throw new NotSerializableException("BatchSerializer: " + in.remaining() + " bytes after the end of a " + name(manifest));
            }
            return message;
        } catch (BufferUnderflowException e) {
            throw new NotSerializableException("BatchSerializer: a truncated " + name(manifest) + " (" + size + " bytes)");
        }
    }

    private static String name(String manifest) {
        return switch (manifest) {
            case EXECUTE -> "Execute";
            case RESULTS -> "Results";
            case BUNDLE -> "Bundle";
            case RESULTS_BUNDLE -> "ResultsBundle";
            default -> "message";
        };
    }

    // ==== Execute ==========================================================================================

    private ByteBuffer execute(Partition.Execute execute, ByteBuffer target) {
        byte[] replyTo = format(execute.replyTo());
        List<Ops.Op> ops = execute.ops();
        ByteBuffer out = output(target, 1 + 6 * 8 + traceBytes(execute.trace()) + 4 + replyTo.length + 4 + opBytes(ops));
        out.put(VERSION).putLong(execute.partition()).putLong(execute.batch()).putLong(execute.client()).putLong(execute.seq())
                .putLong(execute.epoch()).putLong(execute.follows());
        putTrace(out, execute.trace(), HopTrace.ENCODED);
        putString(out, replyTo);
        out.putInt(ops.size());
        for (Ops.Op op : ops) {
            putOp(out, op);
        }
        return out;
    }

    private static void putOp(ByteBuffer out, Ops.Op op) {
        long[] key = op.key();
        // The key's first word goes with the fixed fields, its other words after them: an 8-byte key costs no more.
        out.putInt(op.kind()).put((byte) (key.length - 1)).putLong(key[0]).putLong(op.value()).putInt(op.count());
        for (int w = 1; w < key.length; w++) {
            out.putLong(key[w]);
        }
    }

    /** A batch's partition id, which sharding routes by ({@link Partition.IdExtractor}): refused outside the ids a table has. */
    private static long partitionId(long partition) throws NotSerializableException {
        if (partition < 0 || partition >= dev.dex.core.partition.PartitionTable.MAX_PARTITIONS) {
            throw new NotSerializableException("BatchSerializer: a batch for partition " + partition + ", which no table can have");
        }
        return partition;
    }

    private Partition.Execute readExecute(ByteBuffer in) throws NotSerializableException {
        version(in, EXECUTE);
        long partition = partitionId(in.getLong());
        long batch = in.getLong();
        long client = in.getLong();
        long seq = in.getLong();
        long epoch = in.getLong();
        long follows = in.getLong();
        long[] trace = readTrace(in, HopTrace.DECODED);
        String path = readString(in, "replyTo");
        if (path == null) {
            throw new NotSerializableException("BatchSerializer: an Execute without a reply address");
        }
        List<Ops.Op> ops = readOps(in, WIRE_MAX_OPS);
        try {
            return new Partition.Execute(partition, batch, client, seq, epoch, follows, ops, resolve(path), trace);
        } catch (IllegalArgumentException e) {
            throw new NotSerializableException("BatchSerializer: " + e.getMessage());
        }
    }

    private static List<Ops.Op> readOps(ByteBuffer in, int max) throws NotSerializableException {
        int count = count(in, max, OP_BYTES, "operations");
        List<Ops.Op> ops = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int kind = in.getInt();
            int restWords = in.get();
            if (restWords < 0 || restWords > Ops.Op.MAX_WORDS - 1) {
                throw new NotSerializableException("BatchSerializer: an operation's key of " + (1 + restWords) + " words (1 to "
                        + Ops.Op.MAX_WORDS + ")");
            }
            // The key's words go into the array the engine's session will read (Ops.Op): it is not copied again.
            long[] key = new long[1 + restWords];
            key[0] = in.getLong();
            long value = in.getLong();
            int scanCount = in.getInt();
            if (in.remaining() < restWords * Long.BYTES) {
                throw new BufferUnderflowException();
            }
            for (int w = 1; w <= restWords; w++) {
                key[w] = in.getLong();
            }
            ops.add(new Ops.Op(kind, key, value, scanCount));
        }
        return ops;
    }

    // ==== Bundle ===========================================================================================

    private ByteBuffer bundle(PartitionRouter.Bundle bundle, ByteBuffer target) {
        byte[] replyTo = format(bundle.replyTo());
        List<PartitionRouter.Routed> batches = bundle.batches();
        if (batches.isEmpty() || batches.size() > MAX_BUNDLE) {
            throw new IllegalArgumentException("a bundle of " + batches.size() + " batches (1 to " + MAX_BUNDLE + ")");
        }
        int size = 1 + 4 + replyTo.length + 8 + 4;
        int ops = 0;
        for (PartitionRouter.Routed routed : batches) {
            size += ROUTED_BYTES + traceBytes(routed.trace()) - 1 + opBytes(routed.ops());
            ops += routed.ops().size();
        }
        if (ops > WIRE_MAX_OPS) {
            throw new IllegalArgumentException("a bundle of " + ops + " operations (at most " + WIRE_MAX_OPS + ")");
        }
        ByteBuffer out = output(target, size);
        out.put(VERSION);
        putString(out, replyTo);
        out.putLong(bundle.client()).putInt(batches.size());
        for (PartitionRouter.Routed routed : batches) {
            out.putLong(routed.partition()).putLong(routed.batch()).putLong(routed.epoch()).putLong(routed.follows());
            putTrace(out, routed.trace(), HopTrace.ENCODED);
            out.putInt(routed.ops().size());
            for (Ops.Op op : routed.ops()) {
                putOp(out, op);
            }
        }
        return out;
    }

    private PartitionRouter.Bundle readBundle(ByteBuffer in) throws NotSerializableException {
        version(in, BUNDLE);
        String path = readString(in, "replyTo");
        if (path == null) {
            throw new NotSerializableException("BatchSerializer: a Bundle without a reply address");
        }
        long client = in.getLong();
        int n = count(in, MAX_BUNDLE, ROUTED_BYTES, "batches");
        if (n == 0) {
            throw new NotSerializableException("BatchSerializer: a Bundle of no batches");
        }
        List<PartitionRouter.Routed> batches = new ArrayList<>(n);
        int left = WIRE_MAX_OPS;
        for (int i = 0; i < n; i++) {
            long partition = partitionId(in.getLong());
            long batch = in.getLong();
            long epoch = in.getLong();
            long follows = in.getLong();
            long[] trace = readTrace(in, HopTrace.DECODED);
            List<Ops.Op> ops = readOps(in, left);
            left -= ops.size();
            batches.add(new PartitionRouter.Routed(partition, batch, epoch, follows, ops, trace));
        }
        try {
            return new PartitionRouter.Bundle(batches, resolve(path), client);
        } catch (IllegalArgumentException e) {
            throw new NotSerializableException("BatchSerializer: " + e.getMessage());
        }
    }

    // ==== ResultsBundle ====================================================================================

    private static ByteBuffer resultsBundle(Ops.ResultsBundle bundle, ByteBuffer target) {
        List<Ops.Results> answers = bundle.answers();
        if (answers.isEmpty() || answers.size() > MAX_BUNDLE) {
            throw new IllegalArgumentException("an answer bundle of " + answers.size() + " answers (1 to " + MAX_BUNDLE + ")");
        }
        ResultsPlan[] plans = new ResultsPlan[answers.size()];
        int size = 1 + 4;
        for (int i = 0; i < plans.length; i++) {
            plans[i] = plan(answers.get(i));
            size += 4 + plans[i].size;
        }
        ByteBuffer out = output(target, size);
        out.put(VERSION).putInt(plans.length);
        for (int i = 0; i < plans.length; i++) {
            // Each answer is written in place after its length: no frame of its own to copy.
            out.putInt(plans[i].size);
            results(answers.get(i), plans[i], out);
        }
        return out;
    }

    private static Ops.ResultsBundle readResultsBundle(ByteBuffer in) throws NotSerializableException {
        version(in, RESULTS_BUNDLE);
        int n = count(in, MAX_BUNDLE, 4, "answers");
        if (n == 0) {
            throw new NotSerializableException("BatchSerializer: a ResultsBundle of no answers");
        }
        List<Ops.Results> answers = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int length = in.getInt();
            if (length < 0 || length > in.remaining()) {
                throw new NotSerializableException("BatchSerializer: answer " + i + " of " + length + " bytes, " + in.remaining()
                        + " bytes left");
            }
            ByteBuffer frame = in.slice().limit(length);
            in.position(in.position() + length);
            answers.add(readResults(frame));
            if (frame.hasRemaining()) {
                throw new NotSerializableException("BatchSerializer: " + frame.remaining() + " bytes after the end of answer " + i);
            }
        }
        return new Ops.ResultsBundle(answers);
    }

    private byte[] format(ActorRef<?> ref) {
        byte[] bytes = formatted.get(ref);
        if (bytes == null) {
            if (formatted.size() >= CACHED_REFS) {
                formatted.clear();
            }
            bytes = utf8(resolver.toSerializationFormat(ref));
            formatted.put(ref, bytes);
        }
        return bytes;
    }

    @SuppressWarnings("unchecked")
    private <T> ActorRef<T> resolve(String path) {
        ActorRef<T> ref = (ActorRef<T>) resolved.get(path);
        if (ref == null) {
            if (resolved.size() >= CACHED_REFS) {
                resolved.clear();
            }
            try {
                ref = resolver.resolveActorRef(path);
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("a reply address that does not resolve: " + e);
            }
            resolved.put(path, ref);
        }
        return ref;
    }

    // ==== Results ==========================================================================================

    /** What a Results frame needs besides its results: its size, its host's bytes, and its error texts as cut. */
    private record ResultsPlan(int size, byte[] host, byte[][] errors) {
    }

    private static ResultsPlan plan(Ops.Results results) {
        byte[] host = results.host() == null ? null : utf8(results.host());
        List<Ops.Result> list = results.results();
        int size = 1 + 8 + 8 + traceBytes(results.trace()) + 4 + (host == null ? 0 : host.length) + 4;
        int withError = 0;
        for (Ops.Result r : list) {
            withError += r.error() != null ? 1 : 0;
        }
        byte[][] errors = withError == 0 ? null : new byte[list.size()][];
        // Every answer must fit Artery's frame: at most MAX_SCAN scan entries (128 KiB) plus the error texts,
        // which share ERROR_BUDGET between them (each cut to its share, at least MIN_ERROR characters).
        int errorChars = withError == 0 ? 0 : Math.max(MIN_ERROR, Math.min(MAX_STRING / 4, ERROR_BUDGET / withError));
        for (int i = 0; i < list.size(); i++) {
            Ops.Result r = list.get(i);
            size += 1 + 1 + 8;
            if (hasEntries(r)) {
                size += 4 + 1 + 8 * r.keys().length + 8 * r.values().length + 8;
            }
            if (r.error() != null) {
                errors[i] = utf8(r.error().length() > errorChars ? r.error().substring(0, errorChars) + "..." : r.error());
                size += 4 + errors[i].length;
            }
        }
        return new ResultsPlan(size, host, errors);
    }

    private static ByteBuffer results(Ops.Results results, ResultsPlan plan, ByteBuffer target) {
        List<Ops.Result> list = results.results();
        byte[] host = plan.host;
        byte[][] errors = plan.errors;
        ByteBuffer out = output(target, plan.size);
        out.put(VERSION).putLong(results.batch()).putLong(results.epoch());
        putTrace(out, results.trace(), HopTrace.ANSWER_ENCODED);
        putString(out, host);
        out.putInt(list.size());
        for (int i = 0; i < list.size(); i++) {
            Ops.Result r = list.get(i);
            if (r.status() < 0 || r.status() > 255) {
                throw new IllegalArgumentException("status " + r.status() + " does not fit the wire format");
            }
            boolean entries = hasEntries(r);
            int flags = (r.found() ? FOUND : 0) | (entries ? ENTRIES : 0) | (r.error() != null ? ERROR : 0);
            out.put((byte) r.status()).put((byte) flags).putLong(r.value());
            if (entries) {
                if (r.keyWords() < 1 || r.keyWords() > Ops.Op.MAX_WORDS || r.keys().length != r.values().length * r.keyWords()) {
                    throw new IllegalArgumentException("a scan result with " + r.keys().length + " key words and " + r.values().length
                            + " values, at " + r.keyWords() + " words per key");
                }
                out.putInt(r.values().length);
                out.put((byte) r.keyWords());
                for (long key : r.keys()) {
                    out.putLong(key);
                }
                for (long value : r.values()) {
                    out.putLong(value);
                }
                out.putLong(r.next());
            }
            if (errors != null && errors[i] != null) {
                putString(out, errors[i]);
            }
        }
        return out;
    }

    private static boolean hasEntries(Ops.Result r) {
        return r.keys().length > 0 || r.values().length > 0 || r.next() != Long.MIN_VALUE || r.keyWords() != 1;
    }

    private static Ops.Results readResults(ByteBuffer in) throws NotSerializableException {
        version(in, RESULTS);
        long batch = in.getLong();
        long epoch = in.getLong();
        long[] trace = readTrace(in, HopTrace.ANSWER_DECODED);
        String host = readString(in, "host");
        int count = count(in, WIRE_MAX_OPS, 10, "results");
        List<Ops.Result> results = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int status = in.get() & 0xff;
            int flags = in.get() & 0xff;
            if ((flags & ~(FOUND | ENTRIES | ERROR)) != 0) {
                throw new NotSerializableException("BatchSerializer: result " + i + " has unknown flags " + flags);
            }
            long value = in.getLong();
            long[] keys = Ops.Result.NONE;
            long[] values = Ops.Result.NONE;
            long next = Long.MIN_VALUE;
            int words = 1;
            if ((flags & ENTRIES) != 0) {
                int n = count(in, Ops.MAX_SCAN, 16, "scan entries");
                words = in.get();
                if (words < 1 || words > Ops.Op.MAX_WORDS || in.remaining() < (long) n * 8 * (words + 1)) {
                    throw new NotSerializableException("BatchSerializer: result " + i + " has " + n + " scan entries of keys of "
                            + words + " words, in " + in.remaining() + " bytes");
                }
                keys = new long[n * words];
                values = new long[n];
                for (int k = 0; k < n * words; k++) {
                    keys[k] = in.getLong();
                }
                for (int k = 0; k < n; k++) {
                    values[k] = in.getLong();
                }
                next = in.getLong();
            }
            String error = (flags & ERROR) != 0 ? readString(in, "error") : null;
            results.add(new Ops.Result(status, (flags & FOUND) != 0, value, keys, values, next, error, words));
        }
        return new Ops.Results(batch, results, host, epoch, trace);
    }

    // ==== fields ===========================================================================================

    private static int traceBytes(long[] trace) {
        return 1 + (trace == null ? 0 : HopTrace.STAMPS * 8);
    }

    /** Writes {@code trace} (null: not traced), stamping its slot {@code hop} with the time of the encoding. */
    private static void putTrace(ByteBuffer out, long[] trace, int hop) {
        if (trace == null) {
            out.put((byte) 0);
            return;
        }
        if (trace.length != HopTrace.STAMPS) {
            throw new IllegalArgumentException("a trace of " + trace.length + " stamps (" + HopTrace.STAMPS + ")");
        }
        HopTrace.stamp(trace, hop);
        out.put((byte) HopTrace.STAMPS);
        for (long stamp : trace) {
            out.putLong(stamp);
        }
    }

    /** Reads a trace (null when the batch is not traced), stamping its slot {@code hop} with the time of the decoding. */
    private static long[] readTrace(ByteBuffer in, int hop) throws NotSerializableException {
        int n = in.get();
        if (n == 0) {
            return null;
        }
        if (n != HopTrace.STAMPS) {
            throw new NotSerializableException("BatchSerializer: a trace of " + n + " stamps (0 or " + HopTrace.STAMPS + ")");
        }
        long[] trace = new long[n];
        for (int i = 0; i < n; i++) {
            trace[i] = in.getLong();
        }
        HopTrace.stamp(trace, hop);
        return trace;
    }

    private static void version(ByteBuffer in, String manifest) throws NotSerializableException {
        byte version = in.get();
        if (version != VERSION) {
            throw new NotSerializableException("BatchSerializer: a " + name(manifest) + " of wire version " + version
                    + "; this node reads version " + VERSION);
        }
    }

    /** A count in [0, max] whose {@code bytesEach} bytes per element are all present. */
    private static int count(ByteBuffer in, int max, int bytesEach, String what) throws NotSerializableException {
        int count = in.getInt();
        if (count < 0 || count > max) {
            throw new NotSerializableException("BatchSerializer: " + count + " " + what + " (at most " + max + ")");
        }
        if ((long) count * bytesEach > in.remaining()) {
            throw new NotSerializableException("BatchSerializer: " + count + " " + what + " announced, " + in.remaining()
                    + " bytes left");
        }
        return count;
    }

    private static String readString(ByteBuffer in, String what) throws NotSerializableException {
        int length = in.getInt();
        if (length == -1) {
            return null;
        }
        if (length < 0 || length > MAX_STRING || length > in.remaining()) {
            throw new NotSerializableException("BatchSerializer: " + what + " of " + length + " bytes (at most "
                    + Math.min(MAX_STRING, in.remaining()) + ")");
        }
        byte[] bytes = new byte[length];
        in.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static void putString(ByteBuffer out, byte[] bytes) {
        if (bytes == null) {
            out.putInt(-1);
        } else {
            out.putInt(bytes.length).put(bytes);
        }
    }

    private static byte[] utf8(String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_STRING) {
            throw new IllegalArgumentException("a string of " + bytes.length + " bytes does not fit the wire format (at most "
                    + MAX_STRING + ")");
        }
        return bytes;
    }
}
