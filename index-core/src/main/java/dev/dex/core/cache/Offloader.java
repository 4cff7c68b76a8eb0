package dev.dex.core.cache;

import java.util.SplittableRandom;
import java.util.function.IntConsumer;

import dev.dex.core.log.RedoLog;
import dev.dex.core.node.NodeView;
import dev.dex.core.node.LeafOps;
import dev.dex.core.offload.CostModel;
import dev.dex.core.offload.OffloadChannel;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.core.offload.OffloadSettings;
import dev.dex.rdma.GlobalAddress;

/**
 * One session's offloading of cache misses to the memory side (paper §6, {@code docs/offloading.md}): which
 * misses may go, whether the cost model wants them to, and the protocol that runs one, in one message: a lookup
 * validated afterwards, a write after the engine's {@link OffloadExclusion} showed that nothing below the missed
 * node is cached here but through it. It owns the session's cost model and its reusable {@link OffloadRequest}.
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession}, so by one thread; the request is handed to the channel's
 * memory-side thread and back through OffloadRequest's volatile completion. What it shares with other threads
 * it takes by their rules: IO markers through the mapping table (held in the session's {@link Markers}), the
 * missed node's parent frame pinned (so no cooler takes it) and validated at its version, the engine's
 * RemoteChanges clock for the after-the-fact check of a lookup, a write's range entered in the exclusion (held
 * with the markers until the operation ends), and a stale cooling copy dropped under its cooling bucket's monitor
 * with its frame's lock tried, as an eviction does.
 * </pre>
 */
final class Offloader {
    private final DexEngine engine;
    /** The session this offloader belongs to (its own operation's key is in every range it writes). */
    private final DexSession session;
    private final FrameArena arena;
    private final MappingTable mapping;
    private final CoolingMap cooling;
    private final Markers markers;
    private final NodeView view;
    private final SplittableRandom random;
    /** Counts offloads and fallbacks in the session's statistics. */
    private final IntConsumer counts;
    /** Null when the engine does not offload. */
    private final OffloadChannel channel;
    private final OffloadSettings.Policy policy;
    private final CostModel costModel;
    private final OffloadRequest offload = new OffloadRequest();
    /** Set when an offload of the current operation fell back: the rest of it takes the caching path. */
    private boolean blocked;
    private boolean found;
    private long value;

    Offloader(DexEngine engine, DexSession session, Markers markers, SplittableRandom random, IntConsumer counts) {
        this.engine = engine;
        this.session = session;
        this.arena = engine.arena;
        this.mapping = engine.mapping;
        this.cooling = engine.cooling;
        this.markers = markers;
        this.random = random;
        this.counts = counts;
        this.view = new NodeView(engine.keys);
        this.channel = engine.offloadChannel;
        this.policy = engine.config.offload().policy();
        this.costModel = new CostModel(engine.config.offload());
    }

    /** Starts a new operation: an offload that falls back blocks offloading only for the rest of its operation. */
    void begin() {
        blocked = false;
    }

    /**
     * Whether a miss at {@code level} may be offloaded: an owned inner node at level 1..M (its whole subtree is on
     * one memory server), for a point operation that has not fallen back already. The caller checks the rest:
     * a point operation, a cached parent, a node that is not shared.
     */
    boolean eligible(int level) {
        return channel != null && !blocked && level >= 1 && level <= engine.subtreeLevel;
    }

    /** Whether to offload this eligible miss: always, or when the cost model says it is cheaper. */
    boolean wants(int level) {
        return policy == OffloadSettings.Policy.ALWAYS || costModel.shouldOffload(level, random);
    }

    /** Whether to time the remote read of this miss for the cost model. */
    boolean samplesRead() {
        return policy == OffloadSettings.Policy.COST_MODEL && costModel.sample(random);
    }

    /** A remote read the cost model sampled took {@code nanos}. */
    void recordRead(long nanos) {
        costModel.recordRead(nanos);
    }

    /** The outcome of the last offloaded operation: whether its key was found (see {@code LeafOps#result}). */
    boolean found() {
        return found;
    }

    /** The value the last offloaded lookup (or write) found. */
    long value() {
        return value;
    }

    /**
     * Runs the rest of the operation on the memory server of {@code address}, in one message. A lookup is
     * validated afterwards: the IO markers of every node on the path the memory side reported, and no change by
     * this compute node to any of them while the message was out ({@link RemoteChanges}), show that what the
     * memory side read was the latest image of every node on the path. A write is checked before it is sent:
     * its range, entered in the engine's {@link OffloadExclusion}, must hold no escape (a frame below the missed
     * node that is cached here but not through it) and no other write; from then until the operation ends no
     * escape can enter it, so nothing below the missed node is cached or read here but through the node, whose
     * IO marker this thread holds. The memory side then runs the operation on the latest images; afterwards a
     * cooling copy of the leaf it changed (clean, and unreachable meanwhile) is dropped. The parent stays pinned
     * meanwhile so it is not cooled.
     *
     * @param parent        the missed node's parent's frame, read at {@code parentVersion}
     * @param low           the missed node's range {@code (low, high]}, from its slot in the parent's image
     * @return true when the operation was completed by offloading ({@link #found}, {@link #value}); false when
     *         the caller restarts it (the node is in use, the parent changed, or the offload fell back)
     */
    boolean run(long address, int parent, long parentVersion, int level, long[] low, long[] high, int op, long[] key, long newValue,
                int partition) {
        if (mapping.putIfAbsent(address, MappingTable.IO) != MappingTable.ABSENT) {
            return false;
        }
        markers.hold(address);
        arena.pin(parent);
        try {
            if (!arena.validate(parent, parentVersion)) {
                return false;
            }
            boolean costed = policy == OffloadSettings.Policy.COST_MODEL;
            boolean timed = costed && costModel.sample(random);
            // A failed offload is charged even when not sampled: a timeout must steer the model at once.
            long start = costed ? System.nanoTime() : 0;
            boolean lookup = op == LeafOps.LOOKUP;
            // Whose request it is: the memory side runs it only for the partition's current owner (OwnershipTable).
            RedoLog log = engine.held.logs.get(partition);
            offload.owner(partition, log == null ? 0 : log.epoch());
            if (lookup) {
                long sentAt = engine.remoteChanges.now();
                offload.read(key, address);
                if (!send() || !holdPathMarkers(address)) {
                    return fallBack(start, level, timed);
                }
                for (int i = 0; i < offload.pathLength(); i++) {
                    if (engine.remoteChanges.changedSince(offload.pathNode(i), sentAt)) {
                        return fallBack(start, level, timed);
                    }
                }
            } else {
                OffloadExclusion.Range range = engine.exclusion.beginWrite(low, high, level);
                if (range != null && anotherOperationIn(low, high)) {
                    engine.exclusion.endWrite(range);
                    range = null;
                }
                if (range == null) {
                    counts.accept(CacheStats.OFFLOADS_EXCLUDED);
                    return fallBack();
                }
                markers.hold(range);
                // Not a RemoteChanges change: a read on another memory-side thread that overlaps this write sees the
                // leaf marked (SubtreeExecutor's seqlock), and one that does not is linearizable.
                offload.write(op, key, newValue, address);
                if (!send()) {
                    // Not run (a split needed, a node being written, not the owner), or, when the channel gave up on
                    // it (REJECTED), perhaps run with its answer lost, or still to run: the range and the marker stay
                    // held until the memory node may no longer start it; the caching path then applies the operation
                    // to the leaf as it finds it (docs/offloading.md, "A lost answer").
                    if (offload.status() == OffloadRequest.REJECTED) {
                        awaitRunOut(offload.mayRunUntil());
                    }
                    return fallBack(start, level, timed);
                }
                if (!validPath(address)) {
                    throw new IllegalStateException("memory server " + GlobalAddress.serverId(address) + " ran an offloaded write but"
                            + " reported a path that does not start at " + GlobalAddress.toString(address) + " on that server");
                }
                dropCoolingCopy(offload.pathNode(offload.pathLength() - 1));
            }
            if (timed) {
                costModel.recordOffload(System.nanoTime() - start);
            }
            found = offload.found();
            value = offload.value();
            counts.accept(CacheStats.OFFLOADS);
            return true;
        } finally {
            arena.unpin(parent);
        }
    }

    /**
     * Takes the IO marker of every node below {@code start} on the path the memory side reported; false
     * (fall back) if one is cached or in use here, or if the path is not one a walk from {@code start} on
     * its server could have taken.
     */
    private boolean holdPathMarkers(long start) {
        if (!validPath(start)) {
            return false;
        }
        for (int i = 1; i < offload.pathLength(); i++) {
            long node = offload.pathNode(i);
            if (mapping.putIfAbsent(node, MappingTable.IO) != MappingTable.ABSENT) {
                return false;
            }
            markers.hold(node);
        }
        return true;
    }

    /**
     * Whether another session's operation is descending to a key in {@code (low, high]}: it may hold images of nodes
     * below the missed node that it read before this write was entered (uncached, or cached and evicted since), and
     * it would write them back over the write. Read after the write entered its range: an operation that publishes
     * its key later meets the missed node's IO marker or the range on its way down.
     */
    private boolean anotherOperationIn(long[] low, long[] high) {
        for (DexSession other : engine.sessions) {
            if (other != session && other.activeKey().in(low, high)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Waits until {@code until} ({@link System#nanoTime}), when a request the channel gave up on can no longer run on
     * the memory side ({@link OffloadRequest#mayRunUntil()}); returns at once for 0. An interrupt does not cut it short
     * (the write would race the fallback); it is kept for the caller.
     */
    private static void awaitRunOut(long until) {
        if (until == 0) {
            return;
        }
        boolean interrupted = false;
        long left;
        while ((left = until - System.nanoTime()) > 0) {
            try {
                Thread.sleep(left / 1_000_000, (int) (left % 1_000_000));
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Whether the reported path is one a walk from {@code start} on its server could have taken. */
    private boolean validPath(long start) {
        int length = offload.pathLength();
        if (length < 1 || offload.pathNode(0) != start) {
            return false;
        }
        int server = GlobalAddress.serverId(start);
        for (int i = 1; i < length; i++) {
            long node = offload.pathNode(i);
            if (GlobalAddress.isSwizzled(node) || GlobalAddress.serverId(node) != server) {
                return false;
            }
        }
        return true;
    }

    /**
     * Drops the cooling copy of the leaf at {@code address}, if this compute node holds one: an offloaded write just
     * changed the leaf in remote memory. A cooling frame is clean, so nothing is lost. The leaf cannot be cached
     * otherwise (hot) here: the write's range held no escape, and none could enter it since.
     */
    private void dropCoolingCopy(long address) {
        long mapped = mapping.get(address);
        if (mapped >= 0) {
            drop((int) mapped, address);
        }
    }

    /** Takes cooling frame {@code f} of {@code address} out of the cache, as an eviction does, without a write-back. */
    private void drop(int f, long address) {
        int bucket = cooling.bucketOf(address);
        while (true) {
            synchronized (cooling.monitor(bucket)) {
                if (arena.tryLock(f)) {
                    try {
                        if (arena.address(f) != address || mapping.get(address) != f) {
                            return; // evicted meanwhile
                        }
                        if (arena.state(f) != FrameHeaderDescriptor.COOLING || arena.flag(f, FrameHeaderDescriptor.DIRTY)) {
                            throw new IllegalStateException("an offloaded write changed a leaf cached here: "
                                    + arena.wrap(view, f));
                        }
                        cooling.remove(bucket, f);
                        mapping.remove(address, f);
                        engine.exclusion.leaveFrame(f);
                        arena.reset(f);
                    } finally {
                        arena.unlock(f);
                    }
                    engine.returnFrame(f);
                    counts.accept(CacheStats.EVICTIONS);
                    return;
                }
            }
            Thread.onSpinWait();
        }
    }

    /** Sends the offload request, waits for the answer, counts the two-sided message. */
    private boolean send() {
        channel.submit(offload);
        offload.await();
        engine.memory.counters().recordTwoSided(offload.wireBytes());
        return offload.status() == OffloadRequest.OK;
    }

    /**
     * {@link #fallBack()} after messages were sent: the cost model is charged what the attempt cost, always
     * when the channel gave up on it (a timeout, a lost connection, a full queue), else when sampled.
     */
    private boolean fallBack(long start, int level, boolean timed) {
        if (policy == OffloadSettings.Policy.COST_MODEL && (timed || offload.status() == OffloadRequest.REJECTED)) {
            costModel.recordFailedOffload(System.nanoTime() - start, level);
        }
        return fallBack();
    }

    /** The rest of this operation takes the caching path (a split is needed, a node is cached, ...). */
    private boolean fallBack() {
        blocked = true;
        counts.accept(CacheStats.OFFLOAD_FALLBACKS);
        return false;
    }
}
