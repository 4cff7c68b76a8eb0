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
 * whole partition. Those passes leave leaves between a quarter full and the merged fill that could merge; a
 * <b>sweep</b> ({@link MergeSweeps}, every second on a compute node) goes over the whole of each partition whose
 * deletes stopped for a while after enough of them, in short passes ({@link #sweepStep}).
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
 * <p><b>Reuse.</b> A dead leaf goes on its partition's free chain for its memory server ({@link FreeLeaves}, kept in
 * remote memory, so that the partition's next owner has it too), and a split of a leaf inside that partition takes it
 * ({@link #takeFree}) before it allocates. This is safe without epochs: when the pass ends nothing of this engine can
 * reach R (the partition's operations drained, and every frame that could point to R was dropped), a later owner of
 * the partition drops every spanning node it cached before it serves, and another engine reaches R only through a
 * stale node that spans partitions, for a key outside this partition, which R's new fences (inside the partition)
 * refuse. A reused node is written with a version above its dead image's, so a reader racing that write sees a torn
 * image.
 *
 * <pre>
 * Concurrency: noteUnderfull is called by any session thread, under the leaf's lock (MergeSweeps counts the
 *   delete there). A sweep's steps take running as any pass does. The hints of a partition
 *   are guarded by their list's monitor. One pass runs at a time per engine (running); it owns the paused
 *   partition's nodes alone. The free chains are FreeLeaves' (see its Concurrency block): taken by splits of any
 *   thread, filled by the pass, forgotten by release and abandon after the partition stopped being held.
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

    /** What a pass did: nodes it merged under, leaves merged away and freed, leaves it read, whether it paused its partition. */
    record Report(int parents, int merged, int freed, int leaves, boolean ran, long nanos) {
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
    /** The dead leaves, per partition and memory server, for reuse. */
    private final FreeLeaves free;
    /** The memory server ids' bound, for the pass's per-server arrays. */
    private final int servers;
    private final AtomicLong merged = new AtomicLong();
    private final AtomicLong leaked = new AtomicLong();
    /** The sweeps of quiet partitions, and the deletes they count. */
    final MergeSweeps sweeps;

    Merges(DexEngine engine) {
        this.engine = engine;
        this.words = engine.keys.words();
        int leafCapacity = engine.keys.leafCapacity();
        this.underfull = Math.max(1, (int) (leafCapacity * UNDERFULL));
        this.mergedFill = Math.max(2, (int) (leafCapacity * MERGED_FILL));
        this.innerMergedFill = Math.max(2, (int) (engine.keys.innerCapacity() * MERGED_FILL));
        int count = dev.dex.core.partition.PartitionTable.MAX_PARTITIONS; // by id: a split adds ids
        this.hintCount = new AtomicIntegerArray(count);
        this.notBefore = new AtomicLongArray(count);
        this.retryNanos = new AtomicLongArray(count);
        this.free = new FreeLeaves(engine.memory, engine.keys, engine.held, () -> engine.partitions);
        int bound = 0;
        for (int id : engine.memory.memoryServerIds()) {
            bound = Math.max(bound, id + 1);
        }
        this.servers = bound;
        this.sweeps = new MergeSweeps(this, engine.held, count);
        for (int p = 0; p < count; p++) {
            notBefore.set(p, System.nanoTime());
            hints.add(new ArrayList<>());
        }
    }

    /** After a delete from {@code leaf} (under its lock): a leaf that became less than a quarter full notes the key. */
    void noteUnderfull(int partition, NodeView leaf, long[] key) {
        if (partition < 0) {
            return;
        }
        sweeps.noteDelete(partition);
        if (leaf.count() != underfull - 1) {
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
            pass(partition, true, null);
        } catch (RuntimeException | Error unexpected) {
            // Not the operation's failure: it took effect before. The partition serves on (see pass).
            LOG.error("a merge pass over partition {} failed", partition, unexpected);
        } finally {
            running.set(false);
        }
    }

    /**
     * One step of a sweep ({@link MergeSweeps}): a pass over the level-1 nodes at {@code cursor} (up to
     * {@link MergeSweeps#PARENTS_PER_STEP} of them), which it moves on. Null when another pass runs, or, with
     * {@code backOff}, a pass over the partition may not be tried yet (one could not pause it lately); a report that did
     * not run when it could not pause it.
     */
    Report sweepStep(int partition, MergeSweeps.Cursor cursor, boolean backOff) {
        if (backOff && System.nanoTime() - notBefore.get(partition) < 0 || !running.compareAndSet(false, true)) {
            return null;
        }
        try {
            return pass(partition, false, cursor);
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
            return pass(partition, false, null);
        } finally {
            running.set(false);
        }
    }

    /** Forgets {@code partition}'s hints and free nodes: it is not held any more (they leak, see the class comment). */
    void forget(int partition) {
        clearHints(partition);
        free.forget(partition);
    }

    private void clearHints(int partition) {
        List<long[]> list = hints.get(partition);
        synchronized (list) {
            list.clear();
            hintCount.set(partition, 0);
        }
    }

    /**
     * {@code partition} splits (PartitionSplits, while it is paused): its notes are dropped and its sweep starts over;
     * its free chains stay, their leaves still taken by the range they were freed in.
     */
    void splitting(int partition) {
        clearHints(partition);
        sweeps.restart(partition);
    }

    /** {@code partition} was merged into its left neighbour (PartitionMerges): its notes, sweep and free chains go. */
    void mergedAway(int partition) {
        clearHints(partition);
        sweeps.restart(partition);
        free.cut(partition);
    }

    /**
     * A dead leaf of {@code partition} on {@code sibling}'s memory server for a split of {@code sibling}, or -1; its dead
     * image's version goes to {@code version[0]}.
     */
    long takeFree(int partition, long sibling, long[] version) {
        return partition < 0 ? -1 : free.take(partition, GlobalAddress.serverId(sibling), version);
    }

    /** A dead leaf a split took and then failed to write: left behind. */
    void leaked() {
        leaked.incrementAndGet();
    }

    /**
     * Leaves merged away; dead leaves reused by splits; nodes left behind (merged inner nodes, and leaves a failed or
     * interrupted write kept off the free chains); of the reused, those another owner freed; and partitions swept.
     */
    long[] counts() {
        long[] chains = free.counts();
        return new long[] {merged.get(), chains[0], leaked.get() + chains[2], chains[1], sweeps.swept()};
    }

    /** Free leaves this engine freed in {@code partition} and has not reused. */
    int freeCount(int partition) {
        return free.linkedCount(partition);
    }

    private Report pass(int partition, boolean hinted, MergeSweeps.Cursor cursor) {
        long start = System.nanoTime();
        passing = partition;
        try {
            if (!engine.held.pauseForMerge(partition, DRAIN_LIMIT_NANOS)) {
                // Not held (being recovered, say), or busy: the hints stay, and the next try waits, longer each time.
                backOff(partition);
                return new Report(0, 0, 0, 0, false, System.nanoTime() - start);
            }
            retryNanos.set(partition, 0);
            return paused(partition, hinted, cursor, start);
        } finally {
            passing = -1;
        }
    }

    /** The next pass over {@code partition} waits (a pass from notes, or a sweep's step), longer each time in a row. */
    void backOff(int partition) {
        long wait = Math.min(MAX_RETRY_NANOS, Math.max(RETRY_NANOS, 2 * retryNanos.get(partition)));
        retryNanos.set(partition, wait);
        notBefore.set(partition, System.nanoTime() + wait);
    }

    /** The pass itself, over the paused {@code partition}; resumes it on every path. */
    private Report paused(int partition, boolean hinted, MergeSweeps.Cursor cursor, long start) {
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
            } else if (cursor != null) {
                cursor.step(pass, levels);
            } else {
                for (int level = 1; level <= levels; level++) {
                    pass.everyParent(level, null, Integer.MAX_VALUE);
                }
            }
        } catch (FabricException failed) {
            // What was written is a valid tree (see the class comment); the partition serves on.
            LOG.debug("merge pass over partition {} ended by a failed verb: {}", partition, failed.toString());
            if (cursor != null) {
                cursor.failed = true; // the sweep stops here, and goes on from its cursor later
            }
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
        Report report = new Report(pass.parents, pass.merged, pass.freed, pass.leaves, true, System.nanoTime() - start);
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
    final class Pass {
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
        /** Per memory server: the free chain's first leaf the next dead leaf links to, and whether it was read. */
        private final long[] link = new long[servers];
        private final boolean[] linking = new boolean[servers];
        /** Per memory server: a failed dead write (what follows links through it); the dead leaves to push. */
        private final boolean[] broken = new boolean[servers];
        private final LongArrayList[][] pushing = new LongArrayList[servers][];
        int parents;
        int merged;
        int freed;
        /** Leaves read (under level-1 nodes). */
        int leaves;
        /** A read of the nodes over a key kept failing validation (a node locked for long, say): not the tree's end. */
        boolean gaveUp;
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

        /**
         * The nodes at {@code level} over the partition, left to right from the one over {@code from} (null: the
         * partition's start), merging their children, {@code limit} of them at most. Returns the key to go on from, or
         * null when the partition's end was reached (or the tree is not that high); the key it could not read past when
         * it {@link #gaveUp}.
         */
        long[] everyParent(int level, long[] from, int limit) {
            long[] key = new long[words];
            long[] end = new long[words];
            if (from == null) {
                engine.partitions.lowerExclusive(partition, key, words);
                dev.dex.core.engine.IndexSession.successor(key, words);
            } else {
                System.arraycopy(from, 0, key, 0, words);
            }
            engine.partitions.upperInclusive(partition, end, words);
            for (int n = 0; n < limit; n++) {
                if (!parentOf(key, level)) {
                    return gaveUp ? key : null;
                }
                if (parent.compareHighFence(end) <= 0 || parent.highFenceIsInfinite()) {
                    return null; // its high fence reaches the partition's end
                }
                parent.highFence(key);
                dev.dex.core.engine.IndexSession.successor(key, words);
            }
            return key;
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
            gaveUp = true;
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
            if (parent.level() == 1) {
                leaves += batch.size();
            }
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
            // Each dead leaf links to the free chain of its server as it is now (read before any write).
            java.util.Arrays.fill(linking, false);
            for (int j = 1; j < n; j++) {
                if (dead[j] && children[j].isLeaf()) {
                    int server = GlobalAddress.serverId(children[j].address());
                    if (!linking[server]) {
                        linking[server] = true;
                        link[server] = free.first(partition, server);
                    }
                }
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
            // 3. The merged leaves dead: a stale pointer to one finds it covers no key. Each dead leaf is linked to the one
            // before it on its server's free chain; the chain's head moves to the last once they are written (FreeLeaves).
            batch.clear();
            for (int j = 1; j < n; j++) {
                if (dead[j]) {
                    NodeMerge.kill(children[j]);
                    if (children[j].isLeaf()) {
                        int server = GlobalAddress.serverId(children[j].address());
                        NodeMerge.nextFree(children[j], link[server]);
                        link[server] = children[j].address();
                    }
                    children[j].version(children[j].version() + 1);
                    batch.write(children[j].address(), childBuffer, j * NodeHeaderDescriptor.NODE_LENGTH, NodeHeaderDescriptor.NODE_LENGTH);
                }
            }
            engine.memory.submit(batch);
            // Per server, the leaves written dead up to the first that may not be: those go on the chain; the others
            // (linked through one not known dead, or inner nodes, which splits do not reuse) are left behind.
            java.util.Arrays.fill(broken, false);
            for (LongArrayList[] lists : pushing) {
                if (lists != null) {
                    lists[0].clear();
                    lists[1].clear();
                }
            }
            int slot = 0;
            for (int j = 1; j < n; j++) {
                if (!dead[j]) {
                    continue;
                }
                boolean written = batch.failure(slot++) == null;
                int server = GlobalAddress.serverId(children[j].address());
                if (children[j].isLeaf() && written && !broken[server]) {
                    if (pushing[server] == null) {
                        pushing[server] = new LongArrayList[] {new LongArrayList(), new LongArrayList()};
                    }
                    pushing[server][0].addLong(children[j].address());
                    pushing[server][1].addLong(children[j].version());
                    freed++;
                } else {
                    broken[server] |= children[j].isLeaf();
                    leaked.incrementAndGet();
                }
            }
            FabricException headFailed = null;
            for (int server = 0; server < servers; server++) {
                if (pushing[server] != null && !pushing[server][0].isEmpty()) {
                    try {
                        free.pushed(partition, server, pushing[server][0], pushing[server][1]);
                    } catch (FabricException failed) {
                        headFailed = failed; // those leaves leak (FreeLeaves counts them); the other servers' go on
                    }
                }
            }
            if (headFailed != null) {
                throw headFailed;
            }
            batch.throwIfFailed();
        }
    }
}
