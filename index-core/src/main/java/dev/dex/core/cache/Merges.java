package dev.dex.core.cache;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.agrona.collections.LongArrayList;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeMerge;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.VerbBatch;

/**
 * Deletes that give memory back (docs/merges.md): a partition's sparse leaves, and then its level-1 nodes, are merged
 * into their left siblings by its owner, in a pass that pauses the partition, and the leaves merged away are reused by
 * the partition's later splits.
 *
 * <p><b>When.</b> A delete that leaves its leaf less than a quarter full notes the key ({@link #noteUnderfull}). Once
 * {@link #HINTS_TO_MERGE} keys of a partition are noted, the operation that noted the last one runs a pass over the
 * level-1 nodes above them, after it left the partition ({@link #afterOp}); {@link DexEngine#merge} runs one over the
 * whole partition.
 *
 * <p><b>A pass</b> pauses the partition ({@link HeldPartitions#pauseForMerge}: no operation of it in flight or
 * entering) and drops the cached level-1 and level-2 nodes that span it ({@link Flush#dropSpanningParents}). Then, for
 * each level-1 node P over the noted keys (every one over the partition for {@link DexEngine#merge}), it writes P's
 * dirty cached leaves in the partition back, reads those leaves in one batch, and merges runs of neighbours whose
 * entries fit in {@link #MERGED_FILL} of a leaf into the run's first leaf L; then the same one level up, for the
 * level-1 nodes under their parent (at or below the offloading level). A P that spans partitions is written under its
 * remote lock, as a split writes it, and only its children inside the partition merge. The cached images of what
 * changes are dropped before the writes, which go in the order that keeps a valid tree after each one: every widened
 * L (wider than its slot in P: readers clip it to the slot, as after a split's crash), then P without the merged
 * children, then each merged child R dead (no entries, an empty range: a reader that reaches it by a stale pointer
 * restarts). A failed write ends the pass; a widened L that P may not show is clipped by its readers and by the next
 * pass.
 *
 * <p><b>Reuse.</b> A dead leaf goes to its partition's free list here, and a split of a leaf inside that partition
 * takes it ({@link #takeFree}) before it allocates. This is safe without epochs: when the pass ends nothing of this
 * engine can reach R (the partition's operations drained, and every frame that could point to R was dropped), and
 * another engine reaches R only through a stale node that spans partitions, for a key outside this partition,
 * which R's new fences (inside the partition) refuse. A reused node is written with a version above its dead image's,
 * so a reader racing that write sees a torn image. The lists are this engine's: a release or abandon forgets them
 * (those nodes leak, {@link #leaked}), since only the partition's owner may reuse them.
 *
 * <pre>
 * Concurrency: noteUnderfull is called by any session thread, under the leaf's lock; the hints of a partition
 *   are guarded by their list's monitor. One pass runs at a time per engine (running); it owns the paused
 *   partition's nodes alone. The free lists are guarded by their own monitor: taken by splits of any thread,
 *   filled by the pass, forgotten by release and abandon after the partition stopped being held.
 * </pre>
 */
final class Merges {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(Merges.class);
    /** A delete that leaves its leaf with fewer entries than this share of a leaf notes its key. */
    static final double UNDERFULL = 0.25;
    /** A run of leaves is merged when its entries fit in this share of one leaf, which leaves room for inserts. */
    static final double MERGED_FILL = 0.9;
    /** Keys noted in a partition that start a pass over it. */
    static final int HINTS_TO_MERGE = 8;
    /** Keys kept per partition: more add nothing a pass would not see. */
    static final int MAX_HINTS = 64;
    /** How long a pass waits for the partition's operations to drain before it gives up, to try again later. */
    static final long DRAIN_LIMIT_NANOS = TimeUnit.MILLISECONDS.toNanos(20);
    /** How long after a pass that could not pause its partition the next one may try. */
    static final long RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    /** The longest wait between tries to pause a busy partition. */
    static final long MAX_RETRY_NANOS = TimeUnit.SECONDS.toNanos(5);

    /** What a pass did. */
    record Report(int parents, int merged, int freed, long nanos) {
    }

    private final DexEngine engine;
    private final int words;
    private final int underfull;
    private final int mergedFill;
    private final int innerMergedFill;
    private final List<List<long[]>> hints = new ArrayList<>();
    private final AtomicIntegerArray hintCount;
    private final AtomicBoolean running = new AtomicBoolean();
    /** The partition of the pass running, or -1. */
    private volatile int passing = -1;
    /** Per partition, how long the next pass that cannot pause it waits before the one after. */
    private final AtomicLongArray retryNanos;
    private final AtomicBoolean firstMerge = new AtomicBoolean();
    /** Per partition, when a pass may be tried again after one that could not pause it. */
    private final AtomicLongArray notBefore;
    /** Per partition: dead leaves and their dead images' versions, by pairs. */
    private final LongArrayList[] free;
    private final AtomicLong merged = new AtomicLong();
    private final AtomicLong reused = new AtomicLong();
    private final AtomicLong leaked = new AtomicLong();

    Merges(DexEngine engine) {
        this.engine = engine;
        this.words = engine.keys.words();
        int leafCapacity = engine.keys.leafCapacity();
        this.underfull = Math.max(1, (int) (leafCapacity * UNDERFULL));
        this.mergedFill = Math.max(2, (int) (leafCapacity * MERGED_FILL));
        this.innerMergedFill = Math.max(2, (int) (engine.keys.innerCapacity() * MERGED_FILL));
        int count = engine.partitions.count();
        this.hintCount = new AtomicIntegerArray(count);
        this.notBefore = new AtomicLongArray(count);
        this.retryNanos = new AtomicLongArray(count);
        this.free = new LongArrayList[count];
        for (int p = 0; p < count; p++) {
            notBefore.set(p, System.nanoTime());
            hints.add(new ArrayList<>());
            free[p] = new LongArrayList();
        }
    }

    /** After a delete from {@code leaf} (under its lock): a leaf that became less than a quarter full notes the key. */
    void noteUnderfull(int partition, NodeView leaf, long[] key) {
        if (leaf.count() != underfull - 1 || partition < 0) {
            return;
        }
        List<long[]> list = hints.get(partition);
        synchronized (list) {
            if (list.size() < MAX_HINTS) {
                list.add(key.clone());
                hintCount.incrementAndGet(partition);
            }
        }
    }

    /** After an operation left {@code partition}: a pass over its noted leaves when enough are noted. */
    void afterOp(int partition) {
        if (partition < 0 || hintCount.get(partition) < HINTS_TO_MERGE || System.nanoTime() - notBefore.get(partition) < 0
                || !running.compareAndSet(false, true)) {
            return;
        }
        try {
            pass(partition, true);
        } catch (RuntimeException | Error unexpected) {
            // Not the operation's failure: it took effect before. The partition serves on (see pass).
            LOG.error("a merge pass over partition {} failed", partition, unexpected);
        } finally {
            running.set(false);
        }
    }

    /** Whether a pass over {@code partition} is running (a release or an abandon waits for it). */
    boolean passing(int partition) {
        return passing == partition;
    }

    /** See {@link DexEngine#merge}. */
    Report mergeAll(int partition) {
        while (!running.compareAndSet(false, true)) {
            Thread.onSpinWait();
        }
        try {
            return pass(partition, false);
        } finally {
            running.set(false);
        }
    }

    /** Forgets {@code partition}'s hints and free nodes: it is not held any more (they leak, see the class comment). */
    void forget(int partition) {
        List<long[]> list = hints.get(partition);
        synchronized (list) {
            list.clear();
            hintCount.set(partition, 0);
        }
        synchronized (free) {
            leaked.addAndGet(free[partition].size() / 2);
            free[partition].clear();
        }
    }

    /**
     * A dead leaf of {@code partition} on {@code sibling}'s memory server for a split of {@code sibling}, or -1; its dead
     * image's version goes to {@code version[0]}.
     */
    long takeFree(int partition, long sibling, long[] version) {
        if (partition < 0) {
            return -1;
        }
        int server = GlobalAddress.serverId(sibling);
        synchronized (free) {
            LongArrayList list = free[partition];
            for (int i = list.size() - 2; i >= 0; i -= 2) {
                long address = list.getLong(i);
                if (GlobalAddress.serverId(address) == server) {
                    version[0] = list.getLong(i + 1);
                    list.removeAt(i + 1);
                    list.removeAt(i);
                    reused.incrementAndGet();
                    return address;
                }
            }
        }
        return -1;
    }

    /** A dead leaf a split took and then failed to write: left behind. */
    void leaked() {
        leaked.incrementAndGet();
    }

    /** Leaves merged away, dead leaves reused by splits, and dead leaves forgotten at a release. */
    long[] counts() {
        return new long[] {merged.get(), reused.get(), leaked.get()};
    }

    /** Free leaves held for {@code partition}. */
    int freeCount(int partition) {
        synchronized (free) {
            return free[partition].size() / 2;
        }
    }

    private Report pass(int partition, boolean hinted) {
        long start = System.nanoTime();
        passing = partition;
        try {
            if (!engine.held.pauseForMerge(partition, DRAIN_LIMIT_NANOS)) {
                // Not held (being recovered, say), or busy: the hints stay, and the next try waits, longer each time.
                long wait = Math.min(MAX_RETRY_NANOS, Math.max(RETRY_NANOS, 2 * retryNanos.get(partition)));
                retryNanos.set(partition, wait);
                notBefore.set(partition, System.nanoTime() + wait);
                return new Report(0, 0, 0, System.nanoTime() - start);
            }
            retryNanos.set(partition, 0);
            return paused(partition, hinted, start);
        } finally {
            passing = -1;
        }
    }

    /** The pass itself, over the paused {@code partition}; resumes it on every path. */
    private Report paused(int partition, boolean hinted, long start) {
        List<long[]> keys = new ArrayList<>();
        if (hinted) {
            List<long[]> list = hints.get(partition);
            synchronized (list) {
                keys.addAll(list);
                list.clear();
                hintCount.set(partition, 0);
            }
        }
        Flush flush = new Flush(engine);
        Pass pass = new Pass(partition, flush);
        try {
            flush.dropSpanningParents(partition);
            // Leaves under the level-1 nodes first, then those level-1 nodes under their parents (at or below the
            // offloading level only, so that a subtree at level M stays on one memory server).
            // A hinted pass looks one level up only over the level-1 nodes that lost children.
            int levels = engine.subtreeLevel >= 2 ? 2 : 1;
            if (hinted) {
                List<long[]> shrunk = new ArrayList<>();
                for (long[] key : keys) {
                    int before = pass.merged;
                    pass.parentOf(key, 1);
                    if (pass.merged > before) {
                        shrunk.add(key);
                    }
                }
                for (int i = 0; levels == 2 && i < shrunk.size(); i++) {
                    pass.parentOf(shrunk.get(i), 2);
                }
            } else {
                for (int level = 1; level <= levels; level++) {
                    pass.everyParent(level);
                }
            }
        } catch (FabricException failed) {
            // What was written is a valid tree (see the class comment); the partition serves on.
            LOG.debug("merge pass over partition {} ended by a failed verb: {}", partition, failed.toString());
        } finally {
            try {
                if (pass.sharedWritten) {
                    // This engine's other partitions' operations may have cached a spanning parent again meanwhile.
                    flush.dropSpanningParents(partition);
                }
            } finally {
                engine.held.resumeAfterMerge(partition);
            }
        }
        Report report = new Report(pass.parents, pass.merged, pass.freed, System.nanoTime() - start);
        if (report.merged() > 0 && firstMerge.compareAndSet(false, true)) {
            LOG.info("leaf merges begin: a pass over partition {} merged {} sparse leaves under {} nodes in {} µs"
                    + " (docs/merges.md); later passes are logged at debug", partition, report.merged(), report.parents(),
                    report.nanos() / 1_000);
        } else if (LOG.isDebugEnabled()) {
            LOG.debug("merge pass over partition {}: {} leaves merged under {} nodes, {} freed, in {} µs", partition,
                    report.merged(), report.parents(), report.freed(), report.nanos() / 1_000);
        }
        return report;
    }

    /** One pass's state: its scratch images and what it did. */
    private final class Pass {
        private final int partition;
        private final Flush flush;
        private final RemoteNodes remote;
        private final NodeView parent = view();
        private final NodeView node = view();
        private final int maxChildren = engine.keys.innerCapacity() + 1;
        private final UnsafeBuffer childBuffer = new UnsafeBuffer(new byte[maxChildren * NodeHeaderDescriptor.NODE_LENGTH]);
        private final NodeView[] children = new NodeView[maxChildren];
        private final VerbBatch batch = new VerbBatch(maxChildren + 1);
        private final LongArrayList visited = new LongArrayList();
        private final long[] slotLow = new long[words];
        private final long[] slotHigh = new long[words];
        int parents;
        int merged;
        int freed;
        /** Whether a node spanning partitions was written (or may have been). */
        boolean sharedWritten;

        Pass(int partition, Flush flush) {
            this.partition = partition;
            this.flush = flush;
            // A session number of its own (DexEngine.MERGE_SESSION): no pending release of another's can free its locks.
            this.remote = new RemoteNodes(engine.memory, engine.instanceId << DexEngine.SESSION_BITS | DexEngine.MERGE_SESSION,
                    engine::lockHolderGone, engine.pendingUnlocks);
            for (int i = 0; i < maxChildren; i++) {
                children[i] = new NodeView(engine.keys).wrap(childBuffer, i * NodeHeaderDescriptor.NODE_LENGTH);
            }
        }

        private NodeView view() {
            return new NodeView(engine.keys).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        }

        /** Every node at {@code level} over the partition, left to right, merging its children. */
        void everyParent(int level) {
            long[] key = new long[words];
            long[] end = new long[words];
            engine.partitions.lowerExclusive(partition, key, words);
            dev.dex.core.engine.IndexSession.successor(key, words);
            engine.partitions.upperInclusive(partition, end, words);
            while (parentOf(key, level)) {
                if (parent.compareHighFence(end) <= 0 || parent.highFenceIsInfinite()) {
                    return; // its high fence reaches the partition's end
                }
                parent.highFence(key);
                dev.dex.core.engine.IndexSession.successor(key, words);
            }
        }

        /**
         * Reads the node at {@code level} over {@code key} into {@link #parent} and merges its children where they lie
         * inside the partition.
         *
         * @return whether that node was read (false: a tree not that high, or nodes that kept changing under the read)
         */
        boolean parentOf(long[] key, int level) {
            if (!readLevel(key, level)) {
                return false;
            }
            long address = parent.address();
            if (!visited.containsLong(address)) {
                visited.addLong(address);
                mergeChildren(address);
            }
            return true;
        }

        private boolean readLevel(long[] key, int level) {
            for (int attempt = 0; attempt < 16; attempt++) {
                long address = attempt == 0 ? engine.rootAddress.get() : remote.readRoot();
                boolean ok = true;
                while (ok) {
                    if (!remote.readValidated(address, parent) || !parent.covers(key)) {
                        ok = false;
                    } else if (parent.level() <= level) {
                        return parent.level() == level;
                    } else {
                        address = parent.child(parent.childIndex(key));
                    }
                }
            }
            return false;
        }

        private void mergeChildren(long parentAddress) {
            int owner = engine.partitions.ownerOf(parent);
            boolean shared = owner < 0;
            if (!shared && owner != partition) {
                return; // another partition's (a locked node: readValidated refused it)
            }
            // A node spanning partitions is written by the owners of each under its remote lock, as a split does.
            if (shared && remote.lock(parentAddress, parent.version()) != RemoteNodes.LOCKED) {
                return;
            }
            try {
                mergeChildren(parentAddress, shared);
            } finally {
                if (shared) {
                    remote.release(parentAddress); // pending (DexEngine.repair) when the write fails
                }
            }
        }

        private void mergeChildren(long parentAddress, boolean shared) {
            int n = parent.count() + 1;
            // Under a node that spans partitions, only leaves inside this partition merge, with each other.
            boolean[] inside = new boolean[n];
            for (int i = 0; i < n; i++) {
                parent.slotLow(i, slotLow);
                parent.slotHigh(i, slotHigh);
                inside[i] = !shared || engine.partitions.ownerOf(slotLow, slotHigh, words) == partition;
            }
            // A dirty leaf here is written back first, so that remote memory holds every child as it is (an inner node is
            // dirty only as a clip of its remote image, which the pass clips the same way). What the pass changes is dropped from the cache below, before it is written.
            if (parent.level() == 1) {
                for (int i = 0; i < n; i++) {
                    if (inside[i]) {
                        flush.writeBackNode(parent.child(i));
                    }
                }
            }
            batch.clear();
            for (int i = 0; i < n; i++) {
                if (inside[i]) {
                    batch.read(parent.child(i), childBuffer, i * NodeHeaderDescriptor.NODE_LENGTH, NodeHeaderDescriptor.NODE_LENGTH);
                }
            }
            engine.memory.submit(batch);
            batch.throwIfFailed();
            boolean[] widened = new boolean[n];
            int clipped = 0;
            for (int i = 0; i < n; i++) {
                NodeView child = children[i];
                if (!inside[i]) {
                    continue; // another partition's, or spanning: not read further, never written here
                }
                if (child.address() != parent.child(i) || child.version() != child.backVersion() || child.lockWord() != 0
                        || child.level() != parent.level() - 1) {
                    return;
                }
                parent.slotLow(i, slotLow);
                parent.slotHigh(i, slotHigh);
                if (child.compareLowFence(slotLow) != 0 || child.compareHighFence(slotHigh) > 0) {
                    return; // not the slot's node as a valid tree has it: left alone
                }
                if (child.compareHighFence(slotHigh) < 0) {
                    // Wider than its slot: the left half of a split or a merge that did not finish. Written back clipped.
                    child.clipAbove(slotHigh);
                    widened[i] = true;
                    clipped++;
                }
            }
            parents++;
            boolean[] dead = new boolean[n];
            int run = 0;
            int deaths = 0;
            int fill = parent.level() == 1 ? mergedFill : innerMergedFill;
            for (int j = 1; j < n; j++) {
                if (inside[run] && inside[j] && NodeMerge.countAbsorbing(children[run], children[j]) <= fill) {
                    NodeMerge.absorb(children[run], children[j]);
                    widened[run] = true;
                    dead[j] = true;
                    deaths++;
                } else {
                    run = j;
                }
            }
            if (deaths == 0 && clipped == 0) {
                return;
            }
            // The cached images of what changes go: P and the widened and merged children (a child's cached children
            // lose their parent and stay cached).
            for (int i = 0; i < n; i++) {
                if (widened[i] || dead[i]) {
                    flush.dropNode(children[i].address());
                }
            }
            flush.dropNode(parentAddress);
            node.copyFrom(parent);
            for (int j = n - 1; j >= 1; j--) {
                if (dead[j]) {
                    NodeMerge.removeChild(node, j);
                }
            }
            node.version(parent.version() + 1);
            // 1. The widened leaves: until P's write, readers coming through P clip each to its old slot.
            batch.clear();
            for (int i = 0; i < n; i++) {
                if (widened[i]) {
                    children[i].version(children[i].version() + 1);
                    batch.write(children[i].address(), childBuffer, i * NodeHeaderDescriptor.NODE_LENGTH, NodeHeaderDescriptor.NODE_LENGTH);
                }
            }
            // A failed write from here on ends the pass. A widened node may then be in remote memory while P is not:
            // readers clip it to its slot in P as remote memory holds P (Admission.clipToSlot), and the next pass writes
            // it back clipped. It is not left to the split repair, which would race the owner's own writes of it.
            engine.memory.submit(batch);
            batch.throwIfFailed();
            if (deaths == 0) {
                return; // only clipped
            }
            // 2. P without the merged leaves: their ranges go to the widened leaves.
            if (shared) {
                sharedWritten = true;
                remote.writeLocked(parentAddress, node, parent.version() + 1);
            } else {
                remote.writeUnlocked(parentAddress, node);
            }
            merged += deaths;
            Merges.this.merged.addAndGet(deaths);
            // 3. The merged leaves dead: a stale pointer to one finds it covers no key.
            batch.clear();
            for (int j = 1; j < n; j++) {
                if (dead[j]) {
                    NodeMerge.kill(children[j]);
                    children[j].version(children[j].version() + 1);
                    batch.write(children[j].address(), childBuffer, j * NodeHeaderDescriptor.NODE_LENGTH, NodeHeaderDescriptor.NODE_LENGTH);
                }
            }
            engine.memory.submit(batch);
            int slot = 0;
            for (int j = 1; j < n; j++) {
                if (dead[j]) {
                    if (batch.failure(slot++) == null && children[j].isLeaf()) {
                        synchronized (free) {
                            free[partition].addLong(children[j].address());
                            free[partition].addLong(children[j].version());
                        }
                        freed++;
                    } else {
                        // Unreachable, and not reused: an inner node (splits reuse leaves only), or one not known dead.
                        leaked.incrementAndGet();
                    }
                }
            }
            batch.throwIfFailed();
        }
    }
}
