package dev.dex.actors.partition;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import dev.dex.actors.PartitionLoad;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.cache.DexSession;
import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.partition.PartitionedEngine;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.MemoryFullException;

/**
 * A compute node's engine and its worker threads: actors hand batches to the workers and never block.
 * Each worker thread has its own engine session.
 *
 * <p>An operation or commit that fails because a memory node fenced this compute node ({@link FencedException}:
 * another node took over one of its partitions, or the cluster downed it) tells the owner once, through
 * {@link #onFenced}: nothing this node sends is applied any more, and it must leave.
 *
 * <p>Concurrency: the executor's queue is the only hand-over; sessions are thread-confined (thread-local).
 * The fenced callback is a volatile reference, fired at most once (an atomic flag). What last failed a batch of a
 * partition is written by the worker that ran it, into a concurrent map, before the batch's future completes; the
 * partition's entity reads it after that completion (its batches run one at a time).
 */
public final class EngineWorkers implements AutoCloseable {
    private volatile Runnable onFenced = () -> { };
    private final java.util.concurrent.atomic.AtomicBoolean fenced = new java.util.concurrent.atomic.AtomicBoolean();
    private final DexEngine engine;
    private final ExecutorService pool;
    private final ThreadLocal<DexSession> sessions;
    private final List<DexSession> allSessions = new ArrayList<>();
    /** Per partition: when its failed acquire was last logged (nanoTime), and how many failed since then. */
    private final java.util.Map<Integer, long[]> acquireFailures = new java.util.concurrent.ConcurrentHashMap<>();
    /** A partition whose acquire keeps failing (a memory node away) is logged at most once in this long. */
    static final long ACQUIRE_LOG_INTERVAL_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
    /** Per partition, what last failed an operation or the commit of one of its batches. */
    private final java.util.Map<Integer, Throwable> failures = new java.util.concurrent.ConcurrentHashMap<>();
    private final PartitionLoad load;
    private final boolean warmOnAcquire;
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(EngineWorkers.class);

    public EngineWorkers(DexEngine engine, int threads, String name) {
        this(engine, threads, name, PartitionLoad.DEFAULT_WINDOW);
    }

    /** Workers that measure each partition's load over windows of {@code loadWindow} ({@code dex.compute.load-window}). */
    public EngineWorkers(DexEngine engine, int threads, String name, java.time.Duration loadWindow) {
        this(engine, threads, name, loadWindow, true);
    }

    /**
     * As above; {@code warmOnAcquire} ({@code dex.compute.warm-on-acquire}): whether a partition's inner nodes are read
     * into the cache when it is acquired, before its first batch ({@link #acquire}).
     */
    public EngineWorkers(DexEngine engine, int threads, String name, java.time.Duration loadWindow, boolean warmOnAcquire) {
        this.engine = engine;
        this.warmOnAcquire = warmOnAcquire;
        this.load = new PartitionLoad(PartitionTable.MAX_PARTITIONS, loadWindow, System.nanoTime()); // by id: splits add ids
        AtomicInteger ids = new AtomicInteger();
        this.pool = Executors.newFixedThreadPool(threads, task -> {
            Thread thread = new Thread(task, name + "-worker-" + ids.getAndIncrement());
            thread.setDaemon(true);
            return thread;
        });
        this.sessions = ThreadLocal.withInitial(() -> {
            DexSession session = engine.newSession();
            synchronized (allSessions) {
                allSessions.add(session);
            }
            return session;
        });
    }

    DexEngine engine() {
        return engine;
    }

    /**
     * Takes {@code partition} over ({@link DexEngine#acquireReport}) and, with warm-on-acquire, warms it: its inner
     * nodes are read into the cache before its first batch runs ({@link DexEngine#warm}), so the batches that waited
     * for the handoff do not all miss on the same few nodes at once. A warm-up that fails is logged (a fenced node's
     * owner is told, as by a failed batch) and otherwise ignored: the partition is held, and its operations read what
     * they need (and report what fails). A warm-up ends after {@link DexEngine#WARM_LIMIT_NANOS} whatever it read.
     */
    DexEngine.AcquireReport acquire(int partition) {
        DexEngine.AcquireReport report = engine.acquireReport(partition);
        if (warmOnAcquire) {
            long start = System.nanoTime();
            try {
                int nodes = engine.warm(partition);
                LOG.debug("partition {} warmed in {} µs: {} nodes above its leaves", partition,
                        (System.nanoTime() - start) / 1_000, nodes);
            } catch (dev.dex.rdma.FabricException e) {
                // A memory node out of reach, or this node fenced (then its owner learns it now, not at the first batch).
                noteFailure(e);
                LOG.warn("partition {} was not warmed ({}); its operations read its inner nodes as they come", partition,
                        e.toString());
            } catch (RuntimeException e) {
                LOG.error("partition {} was not warmed; its operations read its inner nodes as they come", partition, e);
            }
        }
        return report;
    }

    /** The partitions the engine holds (acquired and not yet released), in order. */
    public List<Integer> held() {
        List<Integer> held = new ArrayList<>();
        for (int p : engine.partitions().ids()) {
            if (engine.holds(p)) {
                held.add(p);
            }
        }
        held.sort(null);
        return held;
    }

    /** The operations the workers ran per partition, and their rates: the load this node measures. */
    public PartitionLoad load() {
        return load;
    }

    /** What to do (once) when a memory node turns out to have fenced this compute node. */
    public void onFenced(Runnable action) {
        onFenced = action;
    }

    /** Fires the fenced callback when {@code failure} was caused by a fence. */
    public void noteFailure(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t instanceof FencedException) {
                if (fenced.compareAndSet(false, true)) {
                    onFenced.run();
                }
                return;
            }
        }
    }

    /**
     * What last failed an operation or the commit of a batch of {@code partition} (the fabric's exception, say,
     * when its redo log could not be written), or null when none has failed.
     */
    Throwable lastFailure(int partition) {
        return failures.get(partition);
    }

    /**
     * Notes a failed acquire of {@code partition}: returns how many failed since the last one logged (0: none) when
     * this one is to be logged, or -1 when it is not (one was logged less than {@link #ACQUIRE_LOG_INTERVAL_NANOS}
     * ago). A partition that cannot be acquired is tried again with every batch a client sends it, so while a memory
     * node is away its log would otherwise fill with the same line many times a second.
     */
    int acquireFailed(int partition) {
        long now = System.nanoTime();
        long[] state = acquireFailures.computeIfAbsent(partition, p -> new long[] {now - ACQUIRE_LOG_INTERVAL_NANOS - 1, 0});
        synchronized (state) {
            if (now - state[0] > ACQUIRE_LOG_INTERVAL_NANOS) {
                int suppressed = (int) Math.min(Integer.MAX_VALUE, state[1]);
                state[0] = now;
                state[1] = 0;
                return suppressed;
            }
            state[1]++;
            return -1;
        }
    }

    /** {@code partition} was acquired: the next failure to acquire it is logged at once. */
    void acquired(int partition) {
        acquireFailures.remove(partition);
    }

    PartitionTable partitions() {
        return engine.partitions();
    }

    /** Notes {@code failure} as what last failed a batch of {@code partition}, and fires the fenced callback if it was a fence. */
    private void noteFailure(int partition, Throwable failure) {
        failures.put(partition, failure);
        noteFailure(failure);
    }

    /** Runs {@code ops} of {@code partition} on a worker. */
    CompletionStage<Ops.Results> execute(int partition, List<Ops.Op> ops) {
        return execute(partition, ops, null);
    }

    /** As {@link #execute(int, List)}, stamping the worker's start and end in {@code trace} (a {@link HopTrace}, or null). */
    CompletionStage<Ops.Results> execute(int partition, List<Ops.Op> ops, long[] trace) {
        return CompletableFuture.supplyAsync(() -> {
            HopTrace.stamp(trace, HopTrace.WORKER_START);
            load.add(partition, ops.size());
            if (!ops.isEmpty() && ops.get(0).key().length > 0 && engine.partitions().partitionOf(ops.get(0).key()) == partition) {
                load.sample(partition, ops.get(0).key()[0]); // a split's boundary: only keys the partition still holds
            }
            DexSession session = sessions.get();
            List<Ops.Result> results = new ArrayList<>(ops.size());
            session.beginBatch();
            try {
                for (Ops.Op op : ops) {
                    results.add(run(session, partition, op));
                }
            } finally {
                try {
                    // Group commit: the batch's writes reach the partition's redo log in one fabric write.
                    session.commit();
                } catch (RuntimeException e) {
                    noteFailure(partition, e);
                    notDurable(ops, results, e);
                }
            }
            HopTrace.stamp(trace, HopTrace.WORKER_END);
            return new Ops.Results(results);
        }, pool);
    }

    /**
     * The log could not take the batch's records, or the writes its reads saw are not durable: no write is
     * acknowledged and no read answered, since either might not survive a crash.
     */
    private static void notDurable(List<Ops.Op> ops, List<Ops.Result> results, RuntimeException e) {
        for (int i = 0; i < results.size(); i++) {
            if (results.get(i).status() == Ops.OK) {
                String what = ops.get(i).kind() == Ops.GET || ops.get(i).kind() == Ops.SCAN ? "what the read saw" : "the write";
                results.set(i, Ops.Result.error(Ops.FAILED, what + " is not durable: " + e));
            }
        }
    }

    /** Runs a task (acquire, release) on a worker. */
    public <T> CompletionStage<T> submit(java.util.function.Supplier<T> task) {
        return CompletableFuture.supplyAsync(task, pool);
    }

    private Ops.Result run(DexSession session, int partition, Ops.Op op) {
        int words = session.keyWords();
        long[] key = op.key();
        if (key.length != words) {
            return Ops.Result.error(Ops.BAD_INPUT, "a key of " + 8 * key.length + " bytes; this index's keys are "
                    + 8 * words + " bytes (dex.tree.key-bytes)");
        }
        if (engine.keyFormat().isNegInfinity(key, 0)) {
            return Ops.Result.error(Ops.BAD_INPUT, words == 1 ? NodeHeaderDescriptor.RESERVED_KEY
                    : "the empty key (all zero bytes) is reserved");
        }
        int lies = engine.partitions().partitionOf(key);
        if (lies != partition) {
            // Routed by a table from before a split (docs/partition-splits.md): the client reads the table again.
            return Ops.Result.error(Ops.MOVED, "key " + (words == 1 ? Long.toString(key[0])
                    : "0x" + java.util.HexFormat.of().formatHex(engine.keyFormat().toBytes(key, 0))) + " is not in partition "
                    + partition + " but in partition " + lies + " (partition table version " + engine.servedTable(false).version() + ")");
        }
        // What the engine throws is answered: not held, memory full, or a failure (noted). No lambda per operation.
        try {
            return switch (op.kind()) {
                case Ops.GET -> {
                    boolean found = session.lookup(key);
                    yield Ops.Result.of(found, found ? session.value() : 0);
                }
                case Ops.PUT -> Ops.Result.of(session.put(key, op.value()), 0);
                case Ops.INSERT -> Ops.Result.of(session.insert(key, op.value()), 0);
                case Ops.UPDATE -> Ops.Result.of(session.update(key, op.value()), 0);
                case Ops.DELETE -> Ops.Result.of(session.delete(key), 0);
                case Ops.SCAN -> words == 1 ? scan(session, partition, op) : scanWide(session, partition, op, key, words);
                default -> Ops.Result.error(Ops.BAD_INPUT, "unknown operation kind " + op.kind());
            };
        } catch (PartitionNotHeldException e) {
            return Ops.Result.error(Ops.NOT_HELD, e.getMessage());
        } catch (MemoryFullException e) {
            return Ops.Result.error(Ops.MEMORY_FULL, e.getMessage());
        } catch (RuntimeException e) {
            noteFailure(partition, e);
            return Ops.Result.error(Ops.FAILED, e.toString());
        }
    }

    /**
     * A scan during which the engine's table changed (a split or a merge, here or elsewhere): where its partition ends is
     * not known for sure, so it goes again (the partition it waited for may have been merged into its neighbour, which
     * served it, PartitionMerges).
     */
    private static Ops.Result tableChanged() {
        return Ops.Result.error(Ops.NOT_HELD, "the partition table changed during the scan (a split or a merge): send it again");
    }

    /** A scan of the partition holding its first key, as the table read before it has it; {@code next}: where the next starts. */
    private Ops.Result scan(DexSession session, int partition, Ops.Op op) {
        if (op.count() < 1 || op.count() > Ops.MAX_SCAN) {
            return Ops.Result.error(Ops.BAD_INPUT, "scan count " + op.count() + " outside [1, " + Ops.MAX_SCAN + "]");
        }
        long[] keys = new long[op.count()];
        long[] values = new long[op.count()];
        PartitionTable table = engine.partitions();
        int n = session.scanPartition(op.first(), op.count(), keys, values);
        if (engine.partitions() != table) {
            return tableChanged();
        }
        long upper = table.upperInclusive(table.partitionOf(op.first()));
        int inPartition = 0;
        while (inPartition < n && keys[inPartition] <= upper) {
            inPartition++;
        }
        long next;
        if (inPartition == op.count()) {
            long last = keys[inPartition - 1];
            next = last == Long.MAX_VALUE ? Long.MIN_VALUE : last + 1;
        } else {
            next = upper == Long.MAX_VALUE ? Long.MIN_VALUE : upper + 1;
        }
        return new Ops.Result(Ops.OK, inPartition > 0, 0, java.util.Arrays.copyOf(keys, inPartition),
                java.util.Arrays.copyOf(values, inPartition), next, null);
    }

    /**
     * {@link #scan} of keys of {@code words} words: at most {@link Ops#scanLimit} entries, each key's words in turn;
     * {@code next} is the first word of the next partition's start. A client that got as many entries as it asked
     * for goes on after the last key itself ({@link Ops.Result}).
     */
    private Ops.Result scanWide(DexSession session, int partition, Ops.Op op, long[] start, int words) {
        int limit = Ops.scanLimit(words);
        if (op.count() < 1 || op.count() > limit) {
            return Ops.Result.error(Ops.BAD_INPUT, "scan count " + op.count() + " outside [1, " + limit + "] for keys of "
                    + 8 * words + " bytes");
        }
        long[] keys = new long[op.count() * words];
        long[] values = new long[op.count()];
        PartitionTable table = engine.partitions();
        int n = session.scanPartition(start, op.count(), keys, values);
        if (engine.partitions() != table) {
            return tableChanged();
        }
        long upper = table.upperInclusive(table.partitionOf(start));
        int inPartition = 0;
        while (inPartition < n && keys[inPartition * words] <= upper) {
            inPartition++;
        }
        long next = upper == Long.MAX_VALUE ? Long.MIN_VALUE : upper + 1;
        return new Ops.Result(Ops.OK, inPartition > 0, 0, java.util.Arrays.copyOf(keys, inPartition * words),
                java.util.Arrays.copyOf(values, inPartition), next, null, words);
    }

    @Override
    public void close() {
        closeAndWait();
    }

    /**
     * Stops taking batches and waits up to 10 s for the running and queued ones (on a node that lost its
     * partitions they end at once, as not held). Returns whether every worker stopped: if not, a worker may
     * still touch the memory pool, and the caller must not release it (unmapping an {@code shm} region under
     * a running thread crashes the JVM).
     */
    public boolean closeAndWait() {
        pool.shutdown();
        boolean stopped;
        try {
            stopped = pool.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stopped = false;
        }
        if (stopped) {
            synchronized (allSessions) {
                allSessions.forEach(DexSession::close);
            }
        }
        return stopped;
    }

    PartitionedEngine.ReleaseReport release(int partition) {
        return engine.release(partition);
    }
}
