package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.COOLING;
import static dev.dex.core.cache.FrameHeaderDescriptor.FREE;
import static dev.dex.core.cache.FrameHeaderDescriptor.HOT;
import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;
import static dev.dex.core.cache.FrameHeaderDescriptor.SHARED;

import java.util.SplittableRandom;
import java.util.function.IntConsumer;

import dev.dex.core.node.NodeView;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.VerbCounters;

/**
 * What one session puts into the cache and how it links it in (paper §5.1): a node read on a miss is installed
 * in a free frame and swizzled into its cached parent (path-aware: only under a HOT parent, so a cooling frame
 * never gains children); a frame found in the mapping table but not through a swizzled pointer (cooling, or
 * orphaned) is swizzled back (second chance) or becomes the cached root. What a miss turns into is decided here
 * too ({@link #resolve}): an offload when the {@link Offloader} may and wants to run it, else a read that is
 * admitted or not (lazy leaf admission, {@link #miss}).
 *
 * <pre>
 * Concurrency: owned by one {@link DexSession}, so by one thread, on its {@link SessionPath}. A new frame is
 * installed under its own write lock (a free frame of this session: only a cooler may hold it, briefly, so it
 * spins for it) and then its parent's, taken by try-lock at the version the descent read (a failure gives the
 * frame back and restarts); the mapping table's IO marker is replaced by the frame only
 * once the frame is complete, so a reader never finds a half-filled frame. A frame is taken out of the cooling
 * map under its bucket's monitor with its write lock held. The engine's root frame is installed by
 * compare-and-swap and pinned while it is the root.
 * </pre>
 */
final class Admission {
    private final DexEngine engine;
    private final FrameArena arena;
    private final MappingTable mapping;
    private final CoolingMap cooling;
    private final SessionPath path;
    private final Markers markers;
    private final FrameSupply frames;
    private final FrameWriter writer;
    private final RemoteNodes remote;
    /** Times the remote reads the cost model samples. */
    private final Offloader offloader;
    private final SplittableRandom random;
    /** P_A, as the tuner last answered. */
    private double leafAdmission;
    /** Whether every leaf read is admitted (while P_A is above 0): the session that replays a takeover's log. */
    private boolean everyLeaf;
    /** The leaves this session's scan read ahead, which a miss takes instead of reading. */
    final ScanPrefetch prefetch;
    private final AdmissionTuner tuner;
    /** What this session reports to the tuner: operations, admissions, sampled read and admission times. */
    private final AdmissionTuner.Counts report = new AdmissionTuner.Counts();
    /** Reads and admissions since the last one timed. */
    private int untimedReads;
    private int untimedAdmissions;
    /** Counts hits, admissions and repairs in the session's statistics. */
    private final IntConsumer counts;

    Admission(DexEngine engine, SessionPath path, Markers markers, FrameSupply frames, FrameWriter writer, RemoteNodes remote,
              Offloader offloader, SplittableRandom random, IntConsumer counts, StructureChanges changes) {
        this.engine = engine;
        this.arena = engine.arena;
        this.mapping = engine.mapping;
        this.cooling = engine.cooling;
        this.path = path;
        this.markers = markers;
        this.frames = frames;
        this.writer = writer;
        this.remote = remote;
        this.offloader = offloader;
        this.random = random;
        this.tuner = engine.admissionTuner;
        this.leafAdmission = tuner.probability();
        this.prefetch = new ScanPrefetch(engine, this::admitsOwnedLeaf);
        this.counts = counts;
        int words = engine.keys.words();
        this.slotLow = new long[words];
        this.slotHigh = new long[words];
        this.clipLow = new long[words];
        this.clipHigh = new long[words];
        this.changes = changes;
    }

    /** An operation begins: every {@link AdmissionTuner#REPORT_EVERY} of them, the session reports to the tuner. */
    void begin() {
        // The replay's session admits every leaf: its counts would be charged to whichever P_A the tuner is trying.
        if (!everyLeaf && ++report.operations == AdmissionTuner.REPORT_EVERY) {
            leafAdmission = tuner.report(report);
        }
    }

    /**
     * From now on every owned leaf this session reads is admitted, unless P_A is 0: the session that replays a takeover's
     * log. Its records are the partition's latest writes, several to a leaf as often as not: a leaf left out would be
     * read and written through for each of them (two round trips a record), where an admitted one is read once and
     * written back with the others at the takeover's checkpoint, in batches.
     */
    void admitEveryLeaf() {
        everyLeaf = true;
    }

    /**
     * The draw of lazy leaf admission for an owned leaf not read yet: whether its read admits it. A scan reading leaves
     * ahead draws here for each ({@link ScanPrefetch}), so that the leaves it reads ahead, which are never cached, are
     * those the draw would not have admitted.
     */
    boolean admitsOwnedLeaf() {
        return engine.config.cachesInner() && leafAdmission > 0 && (everyLeaf || random.nextDouble() < leafAdmission);
    }

    /**
     * {@link #admitsOwnedLeaf()} for a leaf of {@code partition}: also while the partition's warm-up boost lasts (its
     * first leaves after a handoff are admitted on their first read; never where P_A is 0).
     */
    private boolean admitsOwnedLeaf(int partition) {
        if (engine.config.cachesInner() && leafAdmission > 0 && engine.held.takeLeafBoost(partition)) {
            return true;
        }
        return admitsOwnedLeaf();
    }

    /** A missed node's slot in its parent (resolve, then miss), and a clip's slot. */
    private final long[] slotLow;
    private final long[] slotHigh;
    private final long[] clipLow;
    private final long[] clipHigh;
    /** The session's structure changes: a cached spanning parent found older than its child is refreshed there. */
    private final StructureChanges changes;

    /** {@link #resolve} outcomes: restart the operation, depth d is set, or the operation was offloaded. */
    static final int RESOLVE_RESTART = 0;
    static final int RESOLVE_SET = 1;
    static final int OFFLOADED = -2;
    /** The operation code of a scan for {@link #resolve}: never offloaded. */
    static final int NO_OFFLOAD = -1;

    /**
     * Resolves an unswizzled pointer at depth {@code d}: a frame found in the mapping table (reheated or swizzled
     * when it can be, {@link #useMapped}); else a miss, which the offloader runs on the memory side when it may
     * and wants to (an owned inner node at level 1..M below a cached parent, for a point operation), or which is
     * read under the node's IO marker and admitted or used uncached ({@link #miss}).
     *
     * @param op        the operation's LeafOps code, or NO_OFFLOAD for a scan
     * @param searchKey the key the descent searches for
     * @return RESOLVE_SET, RESOLVE_RESTART or OFFLOADED
     */
    int resolve(long address, int d, int op, long[] key, long value, int partition, long[] searchKey) {
        long mapped = mapping.get(address);
        if (mapped == MappingTable.IO) {
            return RESOLVE_RESTART;
        }
        if (mapped >= 0) {
            return useMapped((int) mapped, address, d) ? RESOLVE_SET : RESOLVE_RESTART;
        }
        boolean sharedGuess = d == 0 ? engine.partitions.count() > 1 : path.childRangeShared(d - 1);
        int level = d == 0 ? -1 : path.viewAt[d - 1].level() - 1;
        long[] low = slotLow;
        long[] high = slotHigh;
        if (d > 0) {
            path.slotLow(d - 1, low);
            path.slotHigh(d - 1, high);
        }
        if (d > 0 && path.frameAt[d - 1] != NO_FRAME && !arena.validate(path.frameAt[d - 1], path.versionAt[d - 1])) {
            return RESOLVE_RESTART;
        }
        counts.accept(CacheStats.MISSES);
        if (!sharedGuess && op != NO_OFFLOAD && d > 0 && path.frameAt[d - 1] != NO_FRAME && offloader.eligible(level)
                && offloader.wants(level)) {
            return offloader.run(address, path.frameAt[d - 1], path.versionAt[d - 1], level, low, high, op, key, value, partition)
                    ? OFFLOADED : RESOLVE_RESTART;
        }
        return miss(address, d, sharedGuess, searchKey, low, high, level) ? RESOLVE_SET : RESOLVE_RESTART;
    }

    /** {@link #enterCachedRoot} outcomes. */
    static final int ROOT_RESTART = 0;
    static final int ROOT_SET = 1;
    static final int ROOT_NOT_CACHED = 2;

    /**
     * Sets depth 0 of the path to the engine's cached root frame, if there is one: ROOT_SET; ROOT_NOT_CACHED when
     * there is none (the caller resolves the root's address); ROOT_RESTART when the frame is being changed or
     * no longer holds the current root (then it stops being the cached root, and is unpinned).
     */
    int enterCachedRoot() {
        int rf = engine.rootFrame.get();
        if (rf == NO_FRAME) {
            return ROOT_NOT_CACHED;
        }
        long root = engine.rootAddress.get();
        long v = arena.readLock(rf);
        if (v < 0) {
            return ROOT_RESTART;
        }
        boolean current = arena.address(rf) == root && arena.state(rf) == HOT;
        if (!arena.validate(rf, v)) {
            return ROOT_RESTART;
        }
        if (!current) {
            if (engine.rootFrame.compareAndSet(rf, NO_FRAME)) {
                engine.unpinFormerRoot(rf);
            }
            return ROOT_RESTART;
        }
        path.setFrame(0, rf, v);
        return ROOT_SET;
    }

    /** A node found in the mapping table but not through a swizzled pointer. */
    boolean useMapped(int f, long address, int d) {
        long v = arena.readLock(f);
        if (v < 0) {
            return false;
        }
        int state = arena.state(f);
        int parent = arena.parent(f);
        boolean same = arena.address(f) == address && state != FREE;
        if (!arena.validate(f, v) || !same) {
            return false;
        }
        counts.accept(CacheStats.HITS);
        if (d == 0) {
            adoptRoot(f, v, address);
            return false;
        }
        if (path.frameAt[d - 1] != NO_FRAME && (state == COOLING || parent == NO_FRAME)) {
            swizzleExisting(d, f, v);
            return false;
        }
        if (state == COOLING) {
            // No cached parent to swizzle it into: take it out of the cooling map as an orphan, so that a
            // cooling frame never gains swizzled children. An orphan is an escape; a write in flight above it
            // may have made its image stale, so then it is not used.
            if (arena.tryUpgrade(f, v)) {
                NodeView view = arena.wrap(path.frameViewAt[d], f);
                if (engine.exclusion.enterFrame(f, view)) {
                    reheat(f);
                    arena.parent(f, NO_FRAME);
                }
                arena.unlock(f);
            }
            return false;
        }
        path.setFrame(d, f, v);
        return true;
    }

    /**
     * Installs a node read from remote memory into free frame {@code f} and swizzles it into its parent; {@code owner} is
     * the partition the node lies in, or -1 when it spans several.
     */
    void admit(int f, long address, NodeView image, int owner, boolean shared, int d, boolean repaired) {
        frames.lockFree(f);
        arena.wrap(path.frameViewAt[d], f).copyFrom(image);
        arena.address(f, address);
        arena.ownerHint(f, owner);
        arena.clearFlags(f);
        arena.flag(f, SHARED, shared);
        arena.state(f, HOT);
        if (d == 0) {
            arena.parent(f, NO_FRAME);
            arena.pin(f);
            mapping.replace(address, MappingTable.IO, f);
            markers.forget(address);
            arena.unlock(f);
            counts.accept(CacheStats.ADMISSIONS);
            installRoot(f, address);
            return;
        }
        int pf = path.frameAt[d - 1];
        if (pf != NO_FRAME && !lockHotParent(pf, path.versionAt[d - 1])) {
            arena.reset(f);
            arena.unlock(f);
            frames.giveBack(f);
            markers.release(address);
            return;
        }
        if ((pf == NO_FRAME || arena.flag(pf, SHARED))
                && !engine.exclusion.enterFrame(f, image)) {
            // An escape (no cached parent, or a shared one that may be stale) below an offloaded write in flight.
            if (pf != NO_FRAME) {
                arena.unlock(pf);
            }
            arena.reset(f);
            arena.unlock(f);
            frames.giveBack(f);
            markers.release(address);
            return;
        }
        arena.parent(f, pf);
        if (pf != NO_FRAME) {
            path.viewAt[d - 1].child(path.childIndexAt[d - 1], GlobalAddress.swizzle(f));
        }
        mapping.replace(address, MappingTable.IO, f);
        markers.forget(address);
        if (repaired) {
            // An owned node clipped to its slot: the narrowed image goes back to remote memory like any change.
            writer.markDirty(f);
        }
        arena.unlock(f);
        if (pf != NO_FRAME) {
            arena.unlock(pf);
        }
        counts.accept(CacheStats.ADMISSIONS);
    }

    /** Makes a frame found in the mapping table the cached root. */
    private void adoptRoot(int f, long v, long address) {
        if (!arena.tryUpgrade(f, v)) {
            return;
        }
        reheat(f);
        arena.pin(f);
        arena.unlock(f);
        installRoot(f, address);
    }

    /**
     * Makes pinned frame {@code f} (caching {@code address}) the engine's root frame, unless another
     * frame got there first or the root moved meanwhile; in both cases the pin is dropped again.
     */
    private void installRoot(int f, long address) {
        if (engine.rootFrame.compareAndSet(NO_FRAME, f)) {
            if (engine.rootAddress.get() != address && engine.rootFrame.compareAndSet(f, NO_FRAME)) {
                engine.unpinFormerRoot(f);
            }
        } else {
            engine.unpinFormerRoot(f);
        }
    }

    /** Swizzles a cooling or orphaned frame into the parent at depth {@code d - 1} (second chance). */
    private void swizzleExisting(int d, int f, long v) {
        int pd = d - 1;
        int pf = path.frameAt[pd];
        if (!lockHotParent(pf, path.versionAt[pd])) {
            return;
        }
        if (!arena.tryUpgrade(f, v)) {
            arena.unlock(pf);
            return;
        }
        if (arena.flag(pf, SHARED)) {
            NodeView view = arena.wrap(path.frameViewAt[d], f);
            if (!engine.exclusion.enterFrame(f, view)) {
                arena.unlock(f);
                arena.unlock(pf);
                return;
            }
        }
        reheat(f);
        arena.parent(f, pf);
        path.viewAt[pd].child(path.childIndexAt[pd], GlobalAddress.swizzle(f));
        arena.unlock(f);
        arena.unlock(pf);
    }

    /** Locks a parent frame at {@code version} if it is HOT: nothing is swizzled into a cooling frame. */
    private boolean lockHotParent(int parent, long version) {
        if (!arena.tryUpgrade(parent, version)) {
            return false;
        }
        if (arena.state(parent) != HOT) {
            arena.unlock(parent);
            return false;
        }
        return true;
    }

    /** Takes a locked frame out of the cooling map, if it is there. */
    private void reheat(int f) {
        if (arena.state(f) == COOLING) {
            int bucket = cooling.bucketOf(arena.address(f));
            synchronized (cooling.monitor(bucket)) {
                cooling.remove(bucket, f);
            }
            arena.state(f, HOT);
        }
    }

    /**
     * A miss at depth {@code d} that is not offloaded: reads the node under its IO marker (the three-read
     * validated read if it may be shared), clips an image wider than its parent's slot, and either admits it
     * (inner nodes always, owned leaves with probability P_A, only a node on the search key's own path) or leaves
     * the uncached image on the path.
     *
     * @param low       the node's slot in its parent's image, {@code (low, high]}, and its level, as resolve read
     *                  and validated them (unused at depth 0)
     * @return true when depth {@code d} is set; false to restart (a marker in use, a failed validated read, a
     *         parent that changed, or a node just admitted)
     */
    boolean miss(long address, int d, boolean sharedGuess, long[] searchKey, long[] low, long[] high, int level) {
        if (mapping.putIfAbsent(address, MappingTable.IO) != MappingTable.ABSENT) {
            return false;
        }
        markers.hold(address);
        if (d > 0 && path.sharedAt[d - 1]) {
            // A node reached through a shared image, which may be stale (the node may even be owned now where the
            // slot spans partitions): an escape for the rest of this operation, entered before the read
            // (OffloadExclusion). A child's low fence is its slot's low bound in every image of a parent that points
            // to it; the bounds were read from the parent before resolve validated it.
            OffloadExclusion.Range escape = engine.exclusion.enterDescent(markers.descents, low, high, level);
            if (escape == null) {
                markers.release(address);
                return false;
            }
            markers.hold(escape);
        }
        NodeView image = path.scratchAt[d];
        boolean readAhead = false;
        // Drawn when the scan looked at it, before the read below may start a batch of its own (ScanPrefetch).
        boolean drawn = prefetch.drawnToAdmit(address);
        if (sharedGuess) {
            if (!remote.readValidated(address, image)) {
                markers.release(address);
                return false;
            }
        } else if (prefetch.take(address, image)) {
            readAhead = true;
        } else if (prefetch.readWithNext(path, d, address, image)) {
            // Read under its marker like any miss, in one batch with the leaves after it that the scan needs.
        } else if (offloader.samplesRead()) {
            timedRead(address, image, true);
        } else if (tuner.tunes() && ++untimedReads >= AdmissionTuner.SAMPLE_EVERY) {
            untimedReads = 0;
            timedRead(address, image, false);
        } else {
            remote.readOnce(address, image);
        }
        if (image.address() != address) {
            markers.release(address);
            throw new IllegalStateException("corrupt node: " + DexEngine.describe(image, address));
        }
        int clip = d > 0 ? clipToSlot(image, d - 1) : NOT_CLIPPED;
        if (clip == STALE_PARENT) {
            // The parent image is older than the node (a merge widened it since): refreshed where cached, read again.
            markers.release(address);
            changes.fenceMismatch(d);
            return false;
        }
        boolean clipped = clip == CLIPPED;
        if (clipped && path.frameAt[d - 1] != NO_FRAME && !arena.validate(path.frameAt[d - 1], path.versionAt[d - 1])) {
            // The slot was read from a parent frame that changed meanwhile: the clip may be wrong.
            markers.release(address);
            return false;
        }
        int owner = engine.partitions.ownerOf(image); // -1 (FrameArena.SPANS) for a node that spans partitions
        boolean shared = engine.sharedOwner(owner);
        // Only a node on the search key's real path is admitted: one reached through a stale parent may lie
        // in a partition this engine does not hold, and must not be cached as if it were current.
        // An image a scan read ahead may be older than the node (ScanPrefetch): never cached.
        boolean admit = !readAhead && engine.config.cachesInner() && image.covers(searchKey)
                && (!image.isLeaf() || !shared && (drawn || admitsOwnedLeaf(owner)));
        if (admit) {
            boolean timed = tuner.tunes() && ++untimedAdmissions >= AdmissionTuner.SAMPLE_EVERY;
            if (timed) {
                untimedAdmissions = 0;
            }
            // A timed admission's write-backs (of evicted dirty frames) are verbs the tuner prices already.
            VerbCounters.Cell cell = timed ? engine.memory.counters().cell() : null;
            long writesBefore = timed ? cell.writes() : 0;
            long start = timed ? System.nanoTime() : 0;
            int f = frames.allocate();
            if (f != NO_FRAME) {
                admit(f, address, image, owner, shared, d, clipped && !shared);
                report.admissions++;
                if (timed) {
                    report.admissionNanos += System.nanoTime() - start;
                    report.writesInAdmissions += cell.writes() - writesBefore;
                    report.admissionsTimed++;
                }
                return false;
            }
        }
        path.frameAt[d] = NO_FRAME;
        path.viewAt[d] = image;
        path.sharedAt[d] = shared;
        if (!image.isLeaf()) {
            markers.release(address);
        }
        return true;
    }


    /** Reads a node, timed for the tuner's price of a verb, and for the cost model when it sampled this read. */
    private void timedRead(long address, NodeView image, boolean forCostModel) {
        long start = System.nanoTime();
        remote.readOnce(address, image);
        long took = System.nanoTime() - start;
        if (forCostModel) {
            offloader.recordRead(took);
        }
        if (tuner.tunes()) {
            report.readNanos += took;
            report.reads++;
        }
    }

    /** {@link #clipToSlot} outcomes. */
    private static final int NOT_CLIPPED = 0;
    private static final int CLIPPED = 1;
    private static final int STALE_PARENT = 2;

    /**
     * Clips a node read from remote memory to the slot of its parent's image at depth {@code pd} when it
     * starts where the slot starts but reaches beyond it: the parent already points to the right half of a
     * split whose narrowed left half was not written yet (see {@code StructureChanges#split}). Entries above the slot are
     * the right node's, possibly stale here, and are dropped.
     *
     * <p>The other way round is a merge's (docs/merges.md): the node took in its right neighbour and the parent image is
     * older than that, which only a cached parent spanning partitions can be. So under such a parent the slot is read
     * again from remote memory first; a clip there would drop entries the node alone holds now.
     *
     * @return {@link #CLIPPED}, {@link #NOT_CLIPPED}, or {@link #STALE_PARENT} (the parent as remote memory holds it
     *         gives the node a wider slot, or no longer names it)
     */
    private int clipToSlot(NodeView image, int pd) {
        long[] low = clipLow;
        long[] high = clipHigh;
        path.slotLow(pd, low);
        path.slotHigh(pd, high);
        if (image.compareLowFence(low) != 0 || image.compareHighFence(high) >= 0 || engine.keys.compare(high, 0, low, 0) <= 0) {
            return NOT_CLIPPED;
        }
        if (path.sharedAt[pd]) {
            NodeView parent = path.fresh;
            if (!remote.readValidated(path.viewAt[pd].address(), parent)) {
                return STALE_PARENT;
            }
            int slot = StructureChanges.slotOf(parent, image.address());
            if (slot < 0) {
                return STALE_PARENT;
            }
            parent.slotHigh(slot, high);
            if (image.compareHighFence(high) >= 0) {
                return STALE_PARENT;
            }
        }
        image.clipAbove(high);
        counts.accept(CacheStats.REPAIRS);
        return CLIPPED;
    }
}
