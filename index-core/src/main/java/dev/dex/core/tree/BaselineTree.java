package dev.dex.core.tree;

import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;
import static dev.dex.core.node.NodeHeaderDescriptor.checkKey;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.POS_INFINITY;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.engine.IndexEngine;
import dev.dex.core.engine.IndexSession;
import dev.dex.core.engine.WordKeySession;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbSnapshot;

/**
 * The baseline B+-tree on disaggregated memory (paper §2.2): every node access is a one-sided read of
 * the node from its memory server, with no compute-side cache. Several instances (one per compute node)
 * may operate on the same tree through the same memory pool at once.
 *
 * <p>Use: {@link Superblock#format} (or {@link BulkLoader#load}) once, then {@link #open} on every compute
 * node and give each thread its own {@link Session}.
 *
 * <pre>
 * Concurrency (remote optimistic locking, the paper's baseline):
 *
 *   Readers never lock. A node is read by three verbs: lock word + version (16 B), the node (1 KiB), lock
 *   word + version again. The image is accepted only if the lock word was 0 both times, the version did
 *   not change, and the image's front and back versions equal it. Each node's fence range (low, high] is
 *   checked against the search key; a miss means the node was split after its parent was read, and the
 *   operation restarts from the root. Nodes are never freed, so a stale child pointer always leads to a
 *   real node whose fences tell the truth.
 *
 *   Writers descend like readers, then take the remote lock of the node they change by compare-and-swap
 *   of its lock word from 0 to the session's tag, re-read the version and give up (restart) if it moved
 *   since their validated read, write the node back whole with the lock word still set and the version
 *   bumped (front and back), and release with an 8-byte write of 0.
 *
 *   Inserts split every full node they meet on the way down (eager split), so a parent always has room
 *   for a separator. A split locks the parent, then the node (top-down; nobody locks upward, so there is
 *   no deadlock), writes the new right sibling, the narrowed node and the parent, and releases both.
 *   A root split writes the new sibling and the new root, swings the superblock's root pointer by
 *   compare-and-swap while still holding the old root's lock, then writes the narrowed old root.
 *
 *   A lock that cannot be taken is never waited for while another is held: the operation releases
 *   what it holds, backs off (randomised, exponential) and restarts.
 *
 *   Lock order: parent before child; the superblock's root pointer is only ever compare-and-swapped,
 *   never locked.
 * </pre>
 *
 * <p>Deletes remove the entry and never merge nodes: an empty leaf stays in the tree with its fence
 * range, and lookups and scans pass over it. See {@code docs/baseline-tree.md}.
 */
public final class BaselineTree implements IndexEngine {
    private static final int RESTART = -1;
    private static final int MAX_SESSIONS = 1 << 20;

    private final RemoteMemory memory;
    private final int subtreeLevel;
    private final KeyFormat format;
    private final NodeAllocator allocator;
    private final long instanceId;
    private final AtomicInteger sessionIds = new AtomicInteger();
    /** Cached root pointer; may be stale, which fence checks detect. */
    private volatile long root;

    private BaselineTree(RemoteMemory memory, Superblock.Contents superblock, long instanceId) {
        this.memory = memory;
        this.subtreeLevel = superblock.subtreeLevel();
        this.format = superblock.keyFormat();
        this.allocator = new NodeAllocator(memory, subtreeLevel);
        this.instanceId = instanceId;
        this.root = superblock.root();
    }

    /** Opens the tree held by the connected memory pool; fails clearly when none was formatted. */
    public static BaselineTree open(RemoteMemory memory) {
        Superblock.Contents contents = Superblock.read(memory);
        long instance = memory.fetchAndAdd(SuperblockDescriptor.INSTANCE_COUNT_ADDRESS, 1) + 1;
        if (instance >= (1L << 43)) {
            throw new IllegalStateException("instance counter exhausted");
        }
        return new BaselineTree(memory, contents, instance);
    }

    /** The width of the tree's keys. */
    public KeyFormat keyFormat() {
        return format;
    }

    /** The subtree level M the tree was formatted with. */
    public int subtreeLevel() {
        return subtreeLevel;
    }

    public RemoteMemory memory() {
        return memory;
    }

    @Override
    public String mode() {
        return "baseline";
    }

    @Override
    public VerbSnapshot verbs() {
        return memory.counters().snapshot();
    }

    /** The baseline has no cache. */
    @Override
    public double cacheHitRatio() {
        return Double.NaN;
    }

    @Override
    public void resetStats() {
        memory.counters().reset();
    }

    /** Does not close the memory connection, which the caller owns. */
    @Override
    public void close() {
    }

    /** A new session: the per-thread context for operations. */
    @Override
    public Session newSession() {
        int id = sessionIds.incrementAndGet();
        if (id >= MAX_SESSIONS) {
            throw new IllegalStateException("more than " + MAX_SESSIONS + " sessions opened on one tree instance");
        }
        return new Session((instanceId << 20) | id);
    }

    /**
     * One thread's context: node buffers for the path from root to leaf, the lock tag, and the result of
     * the last lookup. Not thread-safe; allocation-free after construction.
     */
    public final class Session extends WordKeySession {
        private final long tag;
        private final NodeView[] path = new NodeView[TreeSettings.MAX_HEIGHT];
        private final int[] childIndex = new int[TreeSettings.MAX_HEIGHT];
        private final NodeView right = new NodeView(format);
        private final NodeView newRoot = new NodeView(format);
        private final RemoteNodes remote;
        /** A scan's next key, and a split's separator. */
        private final long[] scanKey = new long[format.words()];
        private final long[] separator = new long[format.words()];
        private long value;
        private long restarts;
        private final RestartBudget budget = new RestartBudget(
                "a remote lock is held and never released (a compute node may have died while holding it)");

        Session(long tag) {
            super(format.words());
            this.tag = tag;
            this.remote = new RemoteNodes(memory, tag);
            UnsafeBuffer nodes = new UnsafeBuffer(BufferUtil.allocateDirectAligned((TreeSettings.MAX_HEIGHT + 2) * NODE_LENGTH, 64));
            for (int i = 0; i < TreeSettings.MAX_HEIGHT; i++) {
                path[i] = new NodeView(format).wrap(nodes, i * NODE_LENGTH);
            }
            right.wrap(nodes, TreeSettings.MAX_HEIGHT * NODE_LENGTH);
            newRoot.wrap(nodes, (TreeSettings.MAX_HEIGHT + 1) * NODE_LENGTH);
        }

        @Override
        public boolean lookup(long[] key) {
            checkKey(format, key);
            beginOp();
            while (true) {
                int depth = descend(key, false);
                if (depth != RESTART) {
                    NodeView leaf = path[depth];
                    int pos = leaf.search(key);
                    if (pos >= 0) {
                        value = leaf.value(pos);
                    }
                    return pos >= 0;
                }
                restart();
            }
        }

        /** The value found by the last successful {@link #lookup}. */
        @Override
        public long value() {
            return value;
        }

        @Override
        public int scan(long[] startKey, int count, long[] keys, long[] values) {
            long[] key = scanKey;
            startScan(startKey, count, keys, values, key);
            beginOp();
            int n = 0;
            while (n < count) {
                int depth = descend(key, false);
                if (depth == RESTART) {
                    restart();
                    continue;
                }
                NodeView leaf = path[depth];
                leaf.highFence(separator);
                n = LeafOps.copyRange(leaf, key, separator, keys, values, n, count);
                if (leaf.highFenceIsInfinite()) {
                    break;
                }
                System.arraycopy(separator, 0, key, 0, words);
                IndexSession.successor(key, words);
            }
            return n;
        }

        /** Operations restarted by this session so far (validation failures, lost lock races, splits). */
        public long restarts() {
            return restarts;
        }

        /** The lock tag this session writes into remote lock words. */
        public long tag() {
            return tag;
        }

        @Override
        public void close() {
            // Buffers are released with the session object; nothing is held remotely between operations.
        }

        /** Runs the write {@code op} ({@link LeafOps}) of {@code key}; returns its {@link LeafOps#result}. */
        @Override
        protected boolean write(long[] key, long newValue, int op) {
            checkKey(format, key);
            beginOp();
            while (true) {
                int depth = descend(key, LeafOps.mayAdd(op));
                if (depth != RESTART) {
                    NodeView leaf = path[depth];
                    int pos = leaf.search(key);
                    boolean present = pos >= 0;
                    if (!LeafOps.changes(op, present)) {
                        return LeafOps.result(op, present);
                    }
                    long address = leaf.address();
                    long version = leaf.version();
                    if (lock(address, version)) {
                        try {
                            LeafOps.apply(leaf, pos, op, key, newValue);
                            writeLocked(address, leaf, version + 1);
                        } finally {
                            remote.release(address);
                        }
                        return LeafOps.result(op, present);
                    }
                }
                restart();
            }
        }

        /**
         * Reads the path from the root to the leaf that covers {@code key} into {@code path[0..depth]}.
         * With {@code splitFull}, the first full node met is split (a leaf only if {@code key} is not in it)
         * and the walk restarts.
         *
         * @return the leaf's depth, or {@link #RESTART}
         */
        private int descend(long[] key, boolean splitFull) {
            long address = root;
            int expectedLevel = -1;
            for (int depth = 0; depth < TreeSettings.MAX_HEIGHT; depth++) {
                NodeView node = path[depth];
                if (!readValidated(address, node)) {
                    return RESTART;
                }
                if (node.address() != address || expectedLevel >= 0 && node.level() != expectedLevel) {
                    throw new IllegalStateException("corrupt node at " + GlobalAddress.toString(address) + ": " + node);
                }
                if (!node.covers(key)) {
                    if (depth == 0) {
                        refreshRoot();
                    }
                    return RESTART;
                }
                if (splitFull && node.isFull() && (!node.isLeaf() || node.search(key) < 0)) {
                    split(depth);
                    return RESTART;
                }
                if (node.isLeaf()) {
                    return depth;
                }
                int index = node.childIndex(key);
                childIndex[depth] = index;
                address = node.child(index);
                expectedLevel = node.level() - 1;
            }
            throw new IllegalStateException("tree deeper than " + TreeSettings.MAX_HEIGHT + " levels");
        }

        private boolean readValidated(long address, NodeView node) {
            return remote.readValidated(address, node);
        }

        /** Takes the remote lock and checks the version is still {@code expectedVersion}; false if not. */
        private boolean lock(long address, long expectedVersion) {
            return remote.lock(address, expectedVersion) == RemoteNodes.LOCKED;
        }

        private void writeLocked(long address, NodeView node, long newVersion) {
            remote.writeLocked(address, node, newVersion);
        }

        private void unlock(long address) {
            remote.unlock(address);
        }

        private void split(int depth) {
            NodeView node = path[depth];
            long address = node.address();
            long version = node.version();
            if (depth == 0) {
                splitRoot(node, address, version);
                return;
            }
            NodeView parent = path[depth - 1];
            long parentAddress = parent.address();
            long parentVersion = parent.version();
            int index = childIndex[depth - 1];
            if (parent.isFull() || parent.child(index) != address) {
                throw new IllegalStateException("split of " + node + " under an unexpected parent " + parent);
            }
            if (!lock(parentAddress, parentVersion)) {
                return;
            }
            if (!lock(address, version)) {
                unlock(parentAddress);
                return;
            }
            long rightAddress;
            try {
                rightAddress = allocator.allocateFor(node.level(), address);
            } catch (RuntimeException e) {
                // Memory full: nothing was written yet, so releasing the locks leaves the tree as it was.
                unlock(address);
                unlock(parentAddress);
                throw e;
            }
            node.splitInto(right, rightAddress, separator);
            parent.insertSeparator(index, separator, rightAddress);
            memory.write(rightAddress, right.buffer(), right.offset(), NODE_LENGTH);
            writeLocked(address, node, version + 1);
            writeLocked(parentAddress, parent, parentVersion + 1);
            unlock(address);
            unlock(parentAddress);
        }

        private void splitRoot(NodeView node, long address, long version) {
            long currentRoot = remote.readRoot();
            if (currentRoot != address) {
                root = currentRoot;
                return;
            }
            if (!lock(address, version)) {
                return;
            }
            int level = node.level();
            long rightAddress;
            long rootAddress;
            try {
                rightAddress = allocator.allocateFor(level, address);
                rootAddress = allocator.allocateFor(level + 1, address);
            } catch (RuntimeException e) {
                unlock(address);
                throw e;
            }
            node.splitInto(right, rightAddress, separator);
            newRoot.init(rootAddress, level + 1, NEG_INFINITY, POS_INFINITY);
            newRoot.child(0, address);
            newRoot.appendChild(separator, rightAddress);
            memory.write(rightAddress, right.buffer(), right.offset(), NODE_LENGTH);
            memory.write(rootAddress, newRoot.buffer(), newRoot.offset(), NODE_LENGTH);
            long found = remote.swingRoot(address, rootAddress);
            if (found != address) {
                // Another instance grew the tree between our check and our swap; our two new nodes stay
                // unreachable (nodes are never freed) and the old root is left as it was.
                unlock(address);
                root = found;
                return;
            }
            writeLocked(address, node, version + 1);
            unlock(address);
            root = rootAddress;
        }

        private void refreshRoot() {
            root = remote.readRoot();
        }

        private void beginOp() {
            budget.reset();
        }

        private void restart() {
            restarts++;
            int n = budget.next();
            SpinBackoff.pause(Math.min(n, 16) + ThreadLocalRandom.current().nextInt(4));
        }
    }
}
