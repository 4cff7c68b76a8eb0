package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.COOLING;
import static dev.dex.core.cache.FrameHeaderDescriptor.DIRTY;
import static dev.dex.core.cache.FrameHeaderDescriptor.FREE;
import static dev.dex.core.cache.FrameHeaderDescriptor.HOT;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.agrona.collections.IntArrayList;

import dev.dex.core.partition.PartitionedEngine;
import dev.dex.core.log.RedoLog;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.offload.OffloadChannel;
import dev.dex.core.offload.OffloadSettings;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.NodeAllocator;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.SuperblockDescriptor;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbSnapshot;

/**
 * One compute node's DEX engine (paper §4-§5): a cache of inner and leaf nodes in local frames, with
 * swizzled child pointers, path-aware cooling, lazy leaf admission, and logical partitions that make the
 * nodes inside one partition single-writer (no remote locks, write-back caching).
 *
 * <p>The operations run in {@link DexSession}s (one per thread). This class owns what the sessions share:
 * the frame arena, the mapping table, the cooling map, the free frames, the partitions held, and the
 * cached root. See {@code docs/dex-cache.md} for the protocol.
 *
 * <pre>
 * Concurrency:
 *   Frames: local optimistic version locks (FrameArena). Readers never write shared memory; writers
 *   try-lock and restart on failure, so no thread ever blocks on a frame lock.
 *   Lock order: parent frame before child frame; a cooling-map bucket monitor may be taken while holding
 *   frame locks, and while holding a bucket monitor frame locks are only tried. Remote locks (shared
 *   nodes) are taken after the local locks of the same nodes, parent before child.
 *   Partitions and redo logs: see HeldPartitions (held, in flight, and failed partitions; takeover and handoff).
 *   Root: rootAddress only moves forward by compare-and-set from the value a session saw before it read
 *   the superblock; rootFrame is cleared by compare-and-set, and whoever clears it drops its pin. The old
 *   root frame stays cached as an ordinary node.
 *   Ownership: a node is owned here only while its partition is held (treatAsShared). acquire drops the
 *   frames of the partition's range cached while it was not held; admission requires the node to cover
 *   the search key, so an operation only ever caches nodes of its own (held) partition as owned.
 * </pre>
 */
public final class DexEngine implements PartitionedEngine {
    final RemoteMemory memory;
    final DexEngineSettings config;
    /** The partition table served: replaced only while the partitions whose range changed are not entered. */
    volatile PartitionTable partitions;
    /** The width of the tree's keys (superblock). */
    final KeyFormat keys;
    final int subtreeLevel;
    final FrameArena arena;
    final MappingTable mapping;
    final CoolingMap cooling;
    final NodeAllocator allocator;
    final long instanceId;
    final int coolingTarget;
    /** Where offloaded operations go; null when this engine never offloads. */
    final OffloadChannel offloadChannel;
    /** This engine's changes to remote memory, for one-message offloaded lookups; counted only when offloading. */
    final RemoteChanges remoteChanges = new RemoteChanges();
    /** Escapes and offloaded writes in flight, for one-message offloaded writes; kept only when offloading. */
    final OffloadExclusion exclusion;
    /** P_A, fixed or tuned. */
    final AdmissionTuner admissionTuner;

    /** The engine's writing verbs that failed: for the decision to give a partition up, and for the node's health. */
    final WriteFailures writeFailures;
    /** Remote locks of this engine that a failed verb left held, released once the memory servers answer again. */
    final dev.dex.core.tree.PendingUnlocks pendingUnlocks = new dev.dex.core.tree.PendingUnlocks();
    final RedoLogSettings redoLog;
    /** The partitions this engine holds, and their redo logs. */
    final HeldPartitions held;
    /** Merges of sparse leaves, and the dead leaves splits reuse (docs/merges.md). */
    final Merges merges;
    private final java.util.Set<Long> goneInstances = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** Which member runs each engine instance (remote memory). */
    private final InstanceRegistry registry;
    /** The cluster's answer to "is the member with this unique id still in the cluster?", or null. */
    private volatile java.util.function.LongPredicate memberAlive;
    /** A lock tag is the instance number above this many bits of session number. */
    static final int SESSION_BITS = 20;
    /** The session number of merge passes' remote locks ({@link Merges}): no session's. */
    static final int MERGE_SESSION = (1 << SESSION_BITS) - 1;

    private final AtomicInteger nextFresh = new AtomicInteger();
    private final IntArrayList returnedFrames = new IntArrayList();
    private final AtomicInteger sessionIds = new AtomicInteger();
    final CopyOnWriteArrayList<DexSession> sessions = new CopyOnWriteArrayList<>();
    final AtomicLong dirtyFrames = new AtomicLong();
    /** Counters of sessions already closed, and those of no session (frames dropped: Flush). */
    final java.util.concurrent.atomic.AtomicLongArray closedCounters =
            new java.util.concurrent.atomic.AtomicLongArray(CacheStats.COUNTERS);

    /** The root node's address as this engine knows it; only ever moved forward, by compare-and-set. */
    final java.util.concurrent.atomic.AtomicLong rootAddress = new java.util.concurrent.atomic.AtomicLong();
    final AtomicInteger rootFrame = new AtomicInteger(NO_FRAME);

    private DexEngine(RemoteMemory memory, DexEngineSettings config, PartitionTable.Versioned table, Superblock.Contents superblock,
                      long instanceId, OffloadChannel offloadChannel, RedoLogSettings redoLog) {
        PartitionTable partitions = table.table();
        this.redoLog = redoLog;
        this.offloadChannel = config.offload().policy() == OffloadSettings.Policy.NEVER ? null : offloadChannel;
        this.writeFailures = new WriteFailures(memory, this.offloadChannel == null ? null : remoteChanges);
        this.memory = writeFailures;
        this.config = config;
        this.partitions = partitions;
        this.subtreeLevel = superblock.subtreeLevel();
        this.keys = superblock.keyFormat();
        this.rootAddress.set(superblock.root());
        this.instanceId = instanceId;
        this.arena = new FrameArena(config.cacheBytes());
        this.cooling = new CoolingMap(Math.max(1, arena.frames()), config.coolingRatio());
        this.exclusion = new OffloadExclusion(arena.frames(), this.offloadChannel == null ? 0 : subtreeLevel, keys);
        this.coolingTarget = Math.min(cooling.capacity(), Math.max(1, (int) (arena.frames() * config.coolingRatio())));
        this.mapping = new MappingTable(Math.max(1024, arena.frames()), Runtime.getRuntime().availableProcessors());
        this.allocator = new NodeAllocator(this.memory, subtreeLevel);
        this.admissionTuner = new AdmissionTuner(config, arena.frames(), this.memory.counters()::sinceStart);
        this.registry = new InstanceRegistry(this.memory);
        this.held = new HeldPartitions(this, table);
        this.merges = new Merges(this);
    }

    /**
     * Opens the tree on the connected memory pool as one compute node, holding no partition yet.
     *
     * @throws IllegalStateException when the pool holds no tree or no partition table
     */
    public static DexEngine open(RemoteMemory memory, DexEngineSettings config) {
        return open(memory, config, null);
    }

    /**
     * Opens the tree as one compute node that offloads through {@code channel} (paper §6) when its
     * configuration's policy says so.
     *
     * @param channel the memory servers' offload executors; null to never offload
     */
    public static DexEngine open(RemoteMemory memory, DexEngineSettings config, OffloadChannel channel) {
        return open(memory, config, channel, RedoLogSettings.OFF);
    }

    /**
     * Opens the tree as one compute node that logs every write of a held partition in that partition's
     * redo log before the write is acknowledged, and replays the log when it acquires a partition
     * ({@code docs/durability.md}); with {@link RedoLogSettings#OFF}, writes since a page's last
     * write-back are lost when this compute node crashes.
     */
    public static DexEngine open(RemoteMemory memory, DexEngineSettings config, OffloadChannel channel, RedoLogSettings redoLog) {
        Superblock.Contents superblock = Superblock.read(memory);
        PartitionTable.Versioned table = PartitionTable.loadVersioned(memory);
        long instance = memory.fetchAndAdd(SuperblockDescriptor.INSTANCE_COUNT_ADDRESS, 1) + 1;
        return new DexEngine(memory, config, table, superblock, instance, channel, redoLog);
    }

    /** This engine's instance number, unique in the tree; the upper bits of its remote lock tags. */
    public long instanceId() {
        return instanceId;
    }

    /**
     * Declares that the engine instance {@code instance} is gone for good (its compute node left the
     * cluster, was downed, or crashed): remote locks it still holds are taken over when met. Never declare
     * an instance that may still run; ownership fencing is what keeps such an instance out.
     */
    public void instanceGone(long instance) {
        if (instance != instanceId) {
            goneInstances.add(instance);
        }
    }

    /**
     * Records in remote memory that this engine instance runs on the cluster member with unique id {@code memberUid}
     * ({@link InstanceRegistry}), so that every compute node, also one started after this one is gone, can tell from
     * the cluster's membership whether a remote lock of this instance has a living holder. Call once after
     * {@link #open}, before serving.
     */
    public void registerInstance(long memberUid) {
        registry.register(instanceId, memberUid);
    }

    /**
     * Tells the engine whether a cluster member (by unique id) is still in it: false only for one that left or was removed
     * for good. From then on a remote lock of an instance registered to a member not alive is taken over when met.
     */
    public void instanceLiveness(java.util.function.LongPredicate memberAlive) {
        this.memberAlive = memberAlive;
    }

    /** Whether a remote lock tag belongs to an instance that is gone: declared so, or registered to a member that left. */
    boolean lockHolderGone(long tag) {
        if (tag <= 0) {
            return false;
        }
        long instance = tag >>> SESSION_BITS;
        if (!goneInstances.isEmpty() && goneInstances.contains(instance)) {
            return true;
        }
        java.util.function.LongPredicate alive = memberAlive;
        if (alive == null || instance == instanceId) {
            return false;
        }
        long member = registry.memberOf(instance);
        if (member == 0 || alive.test(member)) {
            return false;
        }
        goneInstances.add(instance); // a member that left never comes back under the same unique id
        return true;
    }

    /** Whether writes are logged before they are acknowledged. */
    public boolean logsWrites() {
        return redoLog.enabled();
    }

    @Override
    public String mode() {
        return config.mode().label();
    }

    @Override
    public PartitionTable partitions() {
        return partitions;
    }

    /** The width of the tree's keys, from the superblock. */
    public KeyFormat keyFormat() {
        return keys;
    }

    public DexEngineSettings config() {
        return config;
    }

    /** Frames in the cache. */
    public int frames() {
        return arena.frames();
    }

    @Override
    public DexSession newSession() {
        int id = sessionIds.incrementAndGet();
        if (id >= LeafCuts.CUT_SESSION) {
            throw new IllegalStateException("more than 2^20 - 3 sessions opened on one engine");
        }
        DexSession session = new DexSession(this, (instanceId << SESSION_BITS) | id);
        sessions.add(session);
        return session;
    }

    /** {@code session} closed: its counters are kept, its frames and its markers (and descent slots) given back. */
    void closed(DexSession session, Markers markers) {
        markers.close();
        if (sessions.remove(session)) {
            for (int i = 0; i < CacheStats.COUNTERS; i++) {
                closedCounters.addAndGet(i, session.counters().get(i));
            }
            session.frames().returnAll();
        }
    }

    // ---- partitions -------------------------------------------------------------------------------------

    /**
     * Starts serving {@code partition} with a cold cache for it: frames of nodes inside it that this engine
     * cached while it did not hold it (read-only copies, written through if ever written, but possibly
     * stale now) are dropped first.
     */
    @Override
    public void acquire(int partition) {
        acquireReport(partition);
    }

    /**
     * Reads every inner node over a held {@code partition}'s keys into the cache, as its new owner does before its
     * first operation: one descent per node above the leaves, left to right, each stopping there, nothing offloaded
     * ({@link DexSession#warmStep}); splits beside it only add descents. The operations that waited for the partition's
     * handoff then do not all miss on the same few nodes at once. Its leaves are not read, but the partition's next leaf
     * misses are admitted on their first read, whatever P_A says (unless 0), up to its share of the frames: lazy
     * admission would take some ten remote reads per leaf to warm it. Returns the nodes above the leaves gone through
     * (a tree of one leaf: 1, the root), or -1 when this engine does not hold the partition.
     */
    public int warm(int partition) {
        return warm(partition, WARM_LIMIT_NANOS);
    }

    /**
     * Merges the sparse leaves of a held partition now, over all of it (docs/merges.md), as the engine does by itself
     * over the leaves that deletes left sparse. The partition's operations wait meanwhile.
     *
     * @return {merged leaves, level-1 nodes merged under, dead leaves ready for reuse}; zeros when the partition is
     *         not held or its operations did not drain
     */
    public int[] merge(int partition) {
        held.checkPartition(partition);
        Merges.Report report = merges.mergeAll(partition);
        return new int[] {report.merged(), report.parents(), report.freed()};
    }

    /**
     * Sweeps the quiet partitions (docs/merges.md, "Sweeps"): merges over all of each held partition that saw enough
     * deletes since its last sweep and none for {@code quietNanos} (0: at once), in short pauses. A compute node calls
     * it every second ({@code dex.compute.merge-sweep}). Returns the partitions whose sweep ended in this call (one that
     * could not pause its partition goes on at a later call).
     */
    public int sweep(long quietNanos) {
        return merges.sweeps.sweep(quietNanos);
    }

    /** How long a warm-up may take (worth only a short delay of a first batch; a node kept locked restarts it). */
    public static final long WARM_LIMIT_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(500);

    /**
     * Leaves merged away; dead leaves reused by splits; nodes left behind (merged inner nodes, and leaves a failed write
     * kept off the free chains); of the reused leaves, those a previous owner of the partition freed; and partitions
     * swept ({@link #sweep}).
     */
    public long[] mergeCounts() {
        return merges.counts();
    }

    /** {@link #warm(int)} that ends after {@code limitNanos} (then: the descents made so far). */
    int warm(int partition, long limitNanos) {
        return PartitionWarm.run(this, partition, limitNanos);
    }

    /**
     * {@link #acquire} that tells what the takeover did: with redo logging, the partition's log is opened
     * (its epoch bumped), replayed from its checkpoint through this engine's cache, and the replayed pages
     * written back, before any other operation may enter the partition.
     */
    public AcquireReport acquireReport(int partition) {
        return held.acquire(partition);
    }

    /**
     * What {@link #acquireReport} did.
     *
     * @param epoch    the owner epoch this engine took (0 without redo logging)
     * @param replayed log records applied
     * @param pages    pages written back after the replay
     * @param previousOwner the fabric identity of an owner before this one that had not given the partition
     *                 up (crashed, downed, cut off), or 0
     * @param fenced   whether that owner was fenced on every memory node before the replay (false where the
     *                 fabric cannot fence: {@code local}, {@code shm})
     */
    public record AcquireReport(int partition, long epoch, long replayed, long pages, long nanos, long previousOwner,
                                boolean fenced) {
    }

    /**
     * Splits the held {@code partition} at {@code boundary}: it keeps the keys up to the boundary, and a new partition,
     * which nobody holds yet, takes those above (PartitionSplits). A boundary not inside it is refused (IAE); a partition
     * not held, not paused or whose table kept changing is not split (ISE).
     */
    public SplitReport split(int partition, long boundary) {
        return PartitionSplits.split(this, partition, boundary);
    }

    /** The partition table served and its version; {@code refresh}: the stored one first if it moved (ServedTable). */
    public PartitionTable.Versioned servedTable(boolean refresh) {
        return held.served.current(refresh);
    }

    /** A leaf boundary near {@code key} to split {@code partition} at, or {@code Long.MIN_VALUE} (PartitionSplits). */
    public long splitBoundary(int partition, long key) { return PartitionSplits.boundary(this, partition, key); }

    /** What {@link #split} did: the partition {@code added}, the table version committed, pages written, frames dropped. */
    public record SplitReport(int partition, int added, long boundary, long version, long pages, long framesDropped, long nanos) {
    }

    /** Merges the held {@code left} with its right neighbour {@code right}, held too, into {@code left} (PartitionMerges). */
    public MergeReport mergePartitions(int left, int right) { return PartitionMerges.merge(this, left, right); }

    /** What {@link #mergePartitions} did: {@code removed} left the table of {@code version}; pages written, frames dropped. */
    public record MergeReport(int partition, int removed, long version, long pages, long framesDropped, long nanos) {
    }

    /**
     * Writes every dirty page of a held partition back and advances its log's checkpoint to the LSN the
     * next write will take, so a replay starts there and the ring may reuse what lies behind it. Done when
     * the log fills up, periodically, and at the end of a takeover. Nothing without redo logging.
     *
     * @return pages written
     */
    public long checkpoint(int partition) {
        return held.checkpoint(partition);
    }

    /** {@link #checkpoint} of every held partition with records (pages written); one's failure is thrown at the end. */
    public long checkpointAll() {
        return held.checkpointAll();
    }

    /** The redo log of a held partition, or null. */
    public RedoLog log(int partition) {
        return held.log(partition);
    }

    /**
     * Whether a node with fences {@code (low, high]} is treated as shared: it spans partitions, or it lies
     * in a partition this engine does not hold. Only nodes of held partitions are owned here: written
     * back lazily and trusted without checks, because only this engine writes them.
     */
    boolean treatAsShared(NodeView node) {
        return sharedOwner(partitions.ownerOf(node));
    }

    /** {@link #treatAsShared(NodeView)} of a range {@code (low, high]}, such as a child's slot in its parent. */
    boolean treatAsShared(long[] low, long[] high) {
        return sharedOwner(partitions.ownerOf(low, high, keys.words()));
    }

    /** {@link #treatAsShared(NodeView)} of a node whose {@code PartitionTable.ownerOf} is {@code owner}. */
    boolean sharedOwner(int owner) {
        return owner < 0 || held.notHeld(owner);
    }

    @Override
    public boolean holds(int partition) {
        return held.holds(partition);
    }

    /**
     * {@inheritDoc}
     *
     * <p>A page that cannot be written back is tried again for 2 seconds. If that does not work
     * (or the engine was fenced), every frame of the partition is dropped without writing, the partition is not held
     * any more, and an {@link IllegalStateException} says so: with redo logging the writes are in the log, which the
     * next owner replays after it fenced this engine (the owner word stays); without, they are lost.
     */
    @Override
    public ReleaseReport release(int partition) {
        return held.release(partition);
    }

    /**
     * Owned nodes whose split may be half done in remote memory (the parent written, the node not narrowed): each is
     * repaired ({@link dev.dex.core.tree.RemoteNodes#repairSplit}) before any partition is acquired again, and by
     * {@link #repair} ({@link #repairLeftovers}).
     */
    final java.util.Set<Long> splitsToRepair = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /** A split of the owned node at {@code address} failed after its parent's write: see {@link #splitsToRepair}. */
    void splitLeftHalfDone(long address) {
        splitsToRepair.add(address);
    }

    /**
     * Releases this engine's remote locks left pending, then repairs the half-done splits recorded, as far as the memory
     * servers answer. The locks go first: a parent among them would keep the repairs from reading it.
     *
     * @return whether no split is left to repair
     */
    boolean repairLeftovers() {
        // Session number 0 is no session's: the releases use each pending lock's own tag.
        dev.dex.core.tree.RemoteNodes remote = new dev.dex.core.tree.RemoteNodes(memory, instanceId << SESSION_BITS,
                this::lockHolderGone, pendingUnlocks);
        pendingUnlocks.retry(remote);
        for (Long address : splitsToRepair) {
            if (remote.repairSplit(address)) {
                splitsToRepair.remove(address);
            }
        }
        return splitsToRepair.isEmpty();
    }

    /**
     * Whether {@code partition}'s redo log lost an append: every later commit of it fails ("not durable")
     * until the partition is given up ({@link #abandon}) and acquired again, which replays the log up to the
     * hole under a new epoch.
     */
    public boolean logFailed(int partition) {
        return held.logFailed(partition);
    }

    /**
     * Whether {@code partition} is held but failed: its cache could not be kept in step with remote memory
     * ({@link #cacheFailed}); {@link #logFailed} says so too.
     */
    public boolean partitionFailed(int partition) {
        return held.partitionFailed(partition);
    }

    /** Why {@code partition} must be given up ({@link #logFailed}), or null. */
    public Throwable failure(int partition) {
        return held.failure(partition);
    }

    /**
     * Stops holding {@code partition} without writing anything to remote memory: its frames are dropped,
     * dirty ones discarded, and its log forgotten without a checkpoint. For a partition whose ownership was
     * lost another way than a handoff (the entity was stopped, the node was downed): another engine may own
     * it already, and a write-back now could overwrite that owner's pages. With redo logging nothing is lost,
     * since the discarded writes are in the log the next owner replays; without it, they are lost, so this
     * is then the same as {@link #release}.
     *
     * @return frames dropped
     */
    public long abandon(int partition) {
        return held.abandon(partition);
    }

    /**
     * Releases every partition held, which writes every dirty frame back; a partition whose release fails does not
     * keep the others from theirs (the first failure is thrown at the end, the others added to it).
     */
    @Override
    public void close() {
        held.close();
    }

    // ---- free frames ------------------------------------------------------------------------------------

    /** A frame never used or returned by a release, or NO_FRAME. */
    int takeFreeFrame() {
        int f = nextFresh.get();
        while (f < arena.frames()) {
            if (nextFresh.compareAndSet(f, f + 1)) {
                return f;
            }
            f = nextFresh.get();
        }
        synchronized (returnedFrames) {
            return returnedFrames.isEmpty() ? NO_FRAME : returnedFrames.removeAt(returnedFrames.size() - 1);
        }
    }

    void returnFrame(int frame) {
        synchronized (returnedFrames) {
            returnedFrames.addInt(frame);
        }
    }

    /** Frames on the engine's free lists (not the sessions' own); for the validator. */
    List<Integer> freeListSnapshot() {
        List<Integer> free = new ArrayList<>();
        for (int f = nextFresh.get(); f < arena.frames(); f++) {
            free.add(f);
        }
        synchronized (returnedFrames) {
            returnedFrames.forEach(free::add);
        }
        return free;
    }

    // ---- root -------------------------------------------------------------------------------------------

    /**
     * Called when the superblock's root pointer was read as {@code newRoot} by a thread that had seen
     * {@code expectedOld} before reading it; a slower thread can therefore never move the root backwards.
     */
    void rootMoved(long expectedOld, long newRoot) {
        if (newRoot == expectedOld || !rootAddress.compareAndSet(expectedOld, newRoot)) {
            return;
        }
        int old = rootFrame.get();
        // Whoever clears the root frame drops its pin: exactly once.
        if (old != NO_FRAME && rootFrame.compareAndSet(old, NO_FRAME)) {
            unpinFormerRoot(old);
        }
    }

    /**
     * Drops the pin of a frame that was (or was about to be) the cached root and no longer is. It stays cached with
     * no parent until it is cooled, so it becomes an escape ({@link OffloadExclusion}) first: pinned, it is not
     * cooled or evicted meanwhile, and its node's low fence and level do not change.
     */
    void unpinFormerRoot(int frame) {
        NodeView view = arena.wrap(new NodeView(keys), frame);
        exclusion.enterOrphan(frame, view);
        arena.unpin(frame);
    }

    // ---- statistics -------------------------------------------------------------------------------------

    @Override
    public VerbSnapshot verbs() {
        return memory.counters().snapshot();
    }

    @Override
    public double cacheHitRatio() {
        return stats().hitRatio();
    }

    /** P_A now: the setting, or where tuning took it ({@code leaf-admission = auto}). */
    public double leafAdmission() {
        return admissionTuner.probability();
    }

    /** How P_A is set: its value, or {@code auto, now P after N periods}. */
    public String leafAdmissionState() {
        return admissionTuner.toString();
    }

    /** What the sessions did since the last {@link #resetStats()}, summed on demand. */
    public CacheStats stats() {
        long[] sums = new long[CacheStats.COUNTERS];
        for (int i = 0; i < sums.length; i++) {
            sums[i] = closedCounters.get(i);
        }
        for (DexSession s : sessions) {
            for (int i = 0; i < sums.length; i++) {
                sums[i] += s.counters().get(i);
            }
        }
        return CacheStats.of(sums);
    }

    @Override
    public void resetStats() {
        memory.counters().reset();
        for (int i = 0; i < CacheStats.COUNTERS; i++) {
            closedCounters.set(i, 0);
        }
        sessions.forEach(s -> s.counters().reset());
    }

    /** Cached frames in each state, and dirty frames: {free, hot, cooling, dirty}. */
    public long[] frameCounts() {
        long[] counts = new long[4];
        for (int f = 0; f < arena.frames(); f++) {
            int state = arena.state(f);
            counts[state == FREE ? 0 : state == HOT ? 1 : state == COOLING ? 2 : 0]++;
            if (state != FREE && arena.flag(f, DIRTY)) {
                counts[3]++;
            }
        }
        return counts;
    }

    /**
     * Whether the engine's writes keep failing: System.nanoTime() of the first failed writing verb since the last one
     * that succeeded, or 0 when the last one succeeded. A compute node compares it with its write-back timeout.
     */
    public long writesFailingSinceNanos() {
        return writeFailures.failingSinceNanos();
    }

    /**
     * As {@link #writesFailingSinceNanos}, for writing verbs to memory server {@code serverId} alone: a compute node
     * tells its own broken link to a memory node that is a member from the failures every node sees while a memory
     * node is out of the cluster.
     */
    public long writesFailingSinceNanos(int serverId) {
        return writeFailures.failingSinceNanos(serverId);
    }

    /** The engine's last failed writing verb, or null. */
    public Throwable lastWriteFailure() {
        return writeFailures.last();
    }

    /** Remote locks of this engine that failed verbs left held and that are not released yet, and splits to repair. */
    public int pendingUnlocks() {
        return pendingUnlocks.size() + splitsToRepair.size();
    }

    /**
     * Repairs what failed verbs left behind, as far as the memory servers answer now: releases the remote locks still
     * pending, and writes back the dirty pages of every held partition (a checkpoint where the partition logs), which
     * also tells whether writes work again. Called periodically by the compute node while something is pending or
     * writes have been failing.
     *
     * @return remote locks still pending afterwards
     * @throws dev.dex.rdma.FabricException when a write-back still fails
     */
    public int repair() {
        repairLeftovers();
        held.writeBackAll();
        return pendingUnlocks.size();
    }

    /**
     * Frames whose local lock is held right now. At rest (no operation, cooling or flush running) it is 0: a
     * higher figure then means a path that left a frame locked, which would stall every later operation on it.
     */
    public int lockedFrames() {
        return arena.lockedCount();
    }

    static String describe(NodeView node, long address) {
        return GlobalAddress.toString(address) + " " + node;
    }
}
