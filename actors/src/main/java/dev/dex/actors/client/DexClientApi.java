package dev.dex.actors.client;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.pekko.actor.typed.ActorRef;

import dev.dex.actors.DexMetrics;
import dev.dex.actors.partition.Ops;
import dev.dex.core.node.Keys;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.tree.TreeSettings;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * The Java face of a {@link DexClient} actor in the same JVM. Every call returns a {@link CompletionStage},
 * completed exceptionally with the {@link DexException} itself (not wrapped: {@code exceptionally} and
 * {@code whenComplete} see it as it is, {@code join()} wraps it in a {@code CompletionException} as always) when the
 * cluster answers an error (a bad key, a scan too
 * long, memory full, an overloaded partition, one that stayed unreachable until the timeout: an operation
 * unanswered at its timeout fails at its next retry, so within the timeout plus a batch timeout).
 * {@link #blocking()} gives the same calls blocking.
 *
 * <p>Keys are {@code long}s or byte strings ({@code byte[]}, or a {@code String} as its UTF-8 bytes) of at most
 * the index's key width ({@code dex.tree.key-bytes}, 8 by default), ordered as unsigned bytes; a long is the
 * byte string {@link Keys#ofLong} (big-endian, sign bit flipped), so both kinds of key share one order and may be
 * mixed in an index of 8-byte keys (one of wider keys takes byte strings only). A byte-string key that is too long
 * or empty fails the call's stage with {@link DexException}, nothing is sent; a width other than the cluster's is
 * refused by the cluster.
 *
 * <p>Operations go to the client actor without an actor message each: they wait in a queue the actor drains,
 * one message per burst ({@link Submissions}). Their futures are completed on this API's own executor
 * (by default two daemon threads, {@code dex-client-api-N}), one task per batch answer, never on an actor's
 * thread or the common pool; callbacks that block hold up later completions, so block elsewhere or pass an
 * executor of your own. Operations one thread submits one after another are applied in that order.
 *
 * <p>Concurrency: thread-safe; any number of threads may call it at once. {@link #close()} shuts down the
 * executor it created (not one passed in); operations still in flight then complete on the client actor.
 */
public final class DexClientApi implements AutoCloseable {
    /**
     * One entry of a scan; {@link #key()} is the engine's long key (of a key wider than 8 bytes, its first word),
     * {@link #keyBytes()} the key as bytes.
     */
    public record Entry(long key, long value, byte[] wideKey) {
        /** An entry of an 8-byte key. */
        public Entry(long key, long value) {
            this(key, value, null);
        }

        /** The key as a byte string, without trailing zero bytes ({@link Keys#bytes}). */
        public byte[] keyBytes() {
            return wideKey != null ? wideKey.clone() : Keys.bytes(key);
        }

        /** The key for people to read: its text when it is UTF-8 text, else {@code 0x} and hex ({@link Keys#format}). */
        public String keyText() {
            return Keys.format(keyBytes());
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Entry other && key == other.key && value == other.value && Arrays.equals(wideKey, other.wideKey);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(key) * 31 + Long.hashCode(value) * 17 + Arrays.hashCode(wideKey);
        }

        @Override
        public String toString() {
            return "Entry[" + keyText() + "=" + value + "]";
        }
    }

    private static final AtomicInteger THREADS = new AtomicInteger();
    private static final long STOPPED_CLIENT_MARGIN_MS = 30_000;

    private final ActorRef<DexClient.Command> client;
    private final Duration timeout;
    private final ExecutorService ownExecutor;
    private final Submissions submissions;

    /**
     * An API with its own executor of two daemon threads.
     *
     * @param system  the actor system of {@code client}, which must run in this JVM
     * @param client  the client actor
     * @param timeout how long an operation may take, retries included
     */
    public DexClientApi(ActorSystem<?> system, ActorRef<DexClient.Command> client, Duration timeout) {
        this(client, timeout, Executors.newFixedThreadPool(2, task -> {
            Thread thread = new Thread(task, "dex-client-api-" + THREADS.getAndIncrement());
            thread.setDaemon(true);
            return thread;
        }), true, DexMetrics.get(system), keyBytes(system));
    }

    /** An API whose futures complete on {@code executor} (which the caller keeps and shuts down), for keys {@code keyBytes} wide. */
    public DexClientApi(ActorRef<DexClient.Command> client, Duration timeout, Executor executor, int keyBytes) {
        this(client, timeout, executor, false, null, keyBytes);
    }

    /** The key width the system is configured with ({@code dex.tree.key-bytes}, read as every node reads it). */
    private static int keyBytes(ActorSystem<?> system) {
        return TreeSettings.fromConfig(system.settings().config().getConfig("dex.tree")).keyFormat().bytes();
    }

    /** The width of the index's keys this API converts byte-string keys to. */
    private final KeyFormat keys;

    /** Where request latencies go ({@code dex_client_request_seconds}); null for an API built without its system. */
    private final DexMetrics metrics;

    private DexClientApi(ActorRef<DexClient.Command> client, Duration timeout, Executor executor, boolean own, DexMetrics metrics,
                         int keyBytes) {
        this.metrics = metrics;
        this.keys = KeyFormat.of(keyBytes);
        Objects.requireNonNull(executor, "executor");
        this.client = Objects.requireNonNull(client, "client");
        this.timeout = Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("the timeout must be positive: " + timeout);
        }
        this.ownExecutor = own ? (ExecutorService) executor : null;
        this.submissions = new Submissions(executor, metrics);
    }

    public CompletionStage<OptionalLong> get(long key) {
        return submit(new Ops.Op(Ops.GET, key, 0, 0), Submissions.Call.VALUE);
    }

    /** Inserts or replaces; true if the key existed. */
    public CompletionStage<Boolean> put(long key, long value) {
        return submit(new Ops.Op(Ops.PUT, key, value, 0), Submissions.Call.FOUND);
    }

    /** Removes; true if the key existed. */
    public CompletionStage<Boolean> delete(long key) {
        return submit(new Ops.Op(Ops.DELETE, key, 0, 0), Submissions.Call.FOUND);
    }

    public CompletionStage<OptionalLong> get(byte[] key) {
        if (keys.words() > 1) {
            return withWords(key, words -> submit(new Ops.Op(Ops.GET, words, 0, 0), Submissions.Call.VALUE));
        }
        return withKey(key, this::get);
    }

    public CompletionStage<OptionalLong> get(String key) {
        return get(key.getBytes(StandardCharsets.UTF_8));
    }

    /** Inserts or replaces; true if the key existed. */
    public CompletionStage<Boolean> put(byte[] key, long value) {
        if (keys.words() > 1) {
            return withWords(key, words -> submit(new Ops.Op(Ops.PUT, words, value, 0), Submissions.Call.FOUND));
        }
        return withKey(key, k -> put(k, value));
    }

    /** Inserts or replaces; true if the key existed. */
    public CompletionStage<Boolean> put(String key, long value) {
        return put(key.getBytes(StandardCharsets.UTF_8), value);
    }

    /** Removes; true if the key existed. */
    public CompletionStage<Boolean> delete(byte[] key) {
        if (keys.words() > 1) {
            return withWords(key, words -> submit(new Ops.Op(Ops.DELETE, words, 0, 0), Submissions.Call.FOUND));
        }
        return withKey(key, this::delete);
    }

    /** Removes; true if the key existed. */
    public CompletionStage<Boolean> delete(String key) {
        return delete(key.getBytes(StandardCharsets.UTF_8));
    }

    /** Up to {@code count} entries with keys {@code >= start} in byte order (the empty start is the first key). */
    public CompletionStage<List<Entry>> scan(byte[] start, int count) {
        if (keys.words() > 1) {
            long[] first = new long[keys.words()];
            if (Keys.isEmpty(Objects.requireNonNull(start, "start"))) {
                // The smallest key there is: all zero bytes but the last, which is 1.
                Arrays.fill(first, Long.MIN_VALUE);
                first[first.length - 1]++;
                return wideScan(first, count);
            }
            return withWords(start, words -> wideScan(words, count));
        }
        if (Keys.isEmpty(Objects.requireNonNull(start, "start"))) {
            return scan(Long.MIN_VALUE, count);
        }
        return withKey(start, k -> scan(k, count));
    }

    private CompletionStage<List<Entry>> wideScan(long[] start, int count) {
        CompletableFuture<DexClient.ScanReply> reply = new CompletableFuture<>();
        CompletableFuture<DexClient.ScanReply> answered = timed(reply, Ops.SCAN);
        submissions.submit(new Submissions.ScanCall(new Ops.Op(Ops.SCAN, start, 0, count), reply, deadline()), client);
        return scanned(answered, answer -> {
            int words = answer.keyWords();
            List<Entry> entries = new ArrayList<>(answer.values().length);
            for (int i = 0; i < answer.values().length; i++) {
                entries.add(new Entry(answer.keys()[i * words], answer.values()[i], keys.toBytes(answer.keys(), i * words)));
            }
            return entries;
        });
    }

    /** Up to {@code count} entries with keys {@code >= start} in byte order (the empty start is the first key). */
    public CompletionStage<List<Entry>> scan(String start, int count) {
        return scan(start.getBytes(StandardCharsets.UTF_8), count);
    }

    /** Up to {@code count} entries with keys {@code >= start}, ascending, across partitions. */
    public CompletionStage<List<Entry>> scan(long start, int count) {
        CompletableFuture<DexClient.ScanReply> reply = new CompletableFuture<>();
        CompletableFuture<DexClient.ScanReply> answered = timed(reply, Ops.SCAN);
        submissions.submit(new Submissions.ScanCall(new Ops.Op(Ops.SCAN, start, 0, count), reply, deadline()), client);
        return scanned(answered, answer -> {
            List<Entry> entries = new ArrayList<>(answer.keys().length);
            for (int i = 0; i < answer.keys().length; i++) {
                entries.add(new Entry(answer.keys()[i], answer.values()[i]));
            }
            return entries;
        });
    }

    /**
     * A scan's entries from its reply; an error answer fails the stage with the {@link DexException} itself, as a
     * get, put or delete does (not wrapped by a stage).
     */
    private static CompletionStage<List<Entry>> scanned(CompletableFuture<DexClient.ScanReply> answered,
                                                        java.util.function.Function<DexClient.ScanReply, List<Entry>> entries) {
        CompletableFuture<List<Entry>> result = new CompletableFuture<>();
        answered.whenComplete((answer, failure) -> {
            if (failure != null) {
                result.completeExceptionally(failure);
            } else if (answer.error() != null) {
                result.completeExceptionally(new DexException(answer.error()));
            } else {
                try {
                    result.complete(entries.apply(answer));
                } catch (RuntimeException e) {
                    result.completeExceptionally(e);
                }
            }
        });
        return result;
    }

    /**
     * The values of {@code keys} that exist (absent keys are left out), read in batches with everything else in
     * flight. Fails as a whole if any key fails.
     */
    public CompletionStage<Map<Long, Long>> getAll(Collection<Long> keys) {
        List<Long> order = new ArrayList<>(keys);
        List<CompletableFuture<OptionalLong>> reads = new ArrayList<>(order.size());
        for (long key : order) {
            reads.add(get(key).toCompletableFuture());
        }
        return CompletableFuture.allOf(reads.toArray(CompletableFuture[]::new)).thenApply(done -> {
            Map<Long, Long> values = new HashMap<>();
            for (int i = 0; i < order.size(); i++) {
                OptionalLong value = reads.get(i).join();
                if (value.isPresent()) {
                    values.put(order.get(i), value.getAsLong());
                }
            }
            return values;
        });
    }

    /** Inserts or replaces every entry; completes when all are acknowledged, or fails if any fails. */
    public CompletionStage<Void> putAll(Map<Long, Long> entries) {
        List<CompletableFuture<Boolean>> writes = new ArrayList<>(entries.size());
        entries.forEach((key, value) -> writes.add(put(key, value).toCompletableFuture()));
        return CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new));
    }

    /** The same operations, waiting for their answers; each throws {@link DexException} on an error answer. */
    public Blocking blocking() {
        return new Blocking();
    }

    /** Blocking calls: each waits for its answer (at most the API's timeout) and returns it. */
    public final class Blocking {
        private Blocking() {
        }

        public OptionalLong get(long key) {
            return await(DexClientApi.this.get(key));
        }

        /** Inserts or replaces; true if the key existed. */
        public boolean put(long key, long value) {
            return await(DexClientApi.this.put(key, value));
        }

        /** Removes; true if the key existed. */
        public boolean delete(long key) {
            return await(DexClientApi.this.delete(key));
        }

        public List<Entry> scan(long start, int count) {
            return await(DexClientApi.this.scan(start, count));
        }

        public OptionalLong get(String key) {
            return await(DexClientApi.this.get(key));
        }

        public OptionalLong get(byte[] key) {
            return await(DexClientApi.this.get(key));
        }

        /** Inserts or replaces; true if the key existed. */
        public boolean put(String key, long value) {
            return await(DexClientApi.this.put(key, value));
        }

        /** Inserts or replaces; true if the key existed. */
        public boolean put(byte[] key, long value) {
            return await(DexClientApi.this.put(key, value));
        }

        /** Removes; true if the key existed. */
        public boolean delete(String key) {
            return await(DexClientApi.this.delete(key));
        }

        /** Removes; true if the key existed. */
        public boolean delete(byte[] key) {
            return await(DexClientApi.this.delete(key));
        }

        public List<Entry> scan(String start, int count) {
            return await(DexClientApi.this.scan(start, count));
        }

        public List<Entry> scan(byte[] start, int count) {
            return await(DexClientApi.this.scan(start, count));
        }

        public Map<Long, Long> getAll(Collection<Long> keys) {
            return await(DexClientApi.this.getAll(keys));
        }

        public void putAll(Map<Long, Long> entries) {
            await(DexClientApi.this.putAll(entries));
        }

        private <T> T await(CompletionStage<T> stage) {
            try {
                // The client answers by the deadline plus a batch timeout; more means it is not running at all.
                return stage.toCompletableFuture().get(timeout.toMillis() + STOPPED_CLIENT_MARGIN_MS, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                throw new DexException("no answer from the client actor within " + (timeout.toMillis() + STOPPED_CLIENT_MARGIN_MS)
                        + " ms; is its actor system running?");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new DexException("interrupted while waiting for the cluster");
            } catch (ExecutionException e) {
                Throwable cause = e.getCause() instanceof CompletionException c && c.getCause() != null ? c.getCause() : e.getCause();
                if (cause instanceof DexException dex) {
                    throw dex;
                }
                throw new DexException("the operation failed: " + cause);
            }
        }
    }

    /** Shuts down the executor this API created; operations still in flight complete on the client actor. */
    @Override
    public void close() {
        if (ownExecutor != null) {
            ownExecutor.shutdown();
        }
    }

    /** {@code call} with the words of {@code key} in this API's key width, or a stage failed with why the key is wrong. */
    private <T> CompletionStage<T> withWords(byte[] key, java.util.function.Function<long[], CompletionStage<T>> call) {
        long[] words = new long[keys.words()];
        try {
            keys.toWords(Objects.requireNonNull(key, "key"), words);
        } catch (IllegalArgumentException e) {
            return CompletableFuture.failedFuture(new DexException(e.getMessage()));
        }
        return call.apply(words);
    }

    private static <T> CompletionStage<T> withKey(byte[] key, java.util.function.LongFunction<CompletionStage<T>> call) {
        long engineKey;
        try {
            engineKey = Keys.engineKey(Objects.requireNonNull(key, "key"));
        } catch (IllegalArgumentException e) {
            return CompletableFuture.failedFuture(new DexException(e.getMessage()));
        }
        return call.apply(engineKey);
    }

    /**
     * Submits a get, put or delete; the call is the caller's future too, completed with {@code answer} of the reply (or
     * failed with its error) after the latency is recorded, so no stage is added per operation.
     */
    private <T> CompletableFuture<T> submit(Ops.Op op, java.util.function.Function<DexClient.Reply, T> answer) {
        Submissions.Call<T> call = new Submissions.Call<>(op, answer, submissions, timeout.toNanos());
        submissions.submit(call, client);
        return call;
    }

    /**
     * Traces about one in {@code every} of the gets, puts and deletes submitted from now on through the cluster's hops
     * ({@link dev.dex.actors.partition.HopTrace}) and records them in {@code table}; {@code every} 0 stops tracing.
     * Scans are not traced.
     */
    public void trace(int every, HopTable table) {
        if (every < 0 || every > 0 && table == null) {
            throw new IllegalArgumentException("trace every " + every + " operations into " + table);
        }
        submissions.trace(every, table);
    }

    /**
     * {@code reply}, recording the time from now to its answer in the node's metrics if there are any; the caller
     * chains on what this returns, so the time is recorded before any of the caller's stages run.
     */
    private <T> CompletableFuture<T> timed(CompletableFuture<T> reply, int kind) {
        if (metrics == null) {
            return reply;
        }
        long start = System.nanoTime();
        return reply.whenComplete((answer, failure) -> submissions.recordRequest(kind, System.nanoTime() - start));
    }

    /**
     * When the client stops trying: an operation unanswered then fails with the reason at its next retry, so it
     * is answered within the timeout plus one batch timeout, without a timer per operation.
     */
    private long deadline() {
        return System.nanoTime() + timeout.toNanos();
    }
}
