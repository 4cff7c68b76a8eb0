package dev.dex.core.offload;

import static dev.dex.core.node.NodeHeaderDescriptor.LOCK_WORD_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.VERSION_OFFSET;

import java.lang.invoke.VarHandle;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.OwnershipTable;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;

/**
 * Runs offloaded operations on one memory server's own region (paper §6): from the start node (level
 * at most M, so its whole subtree is on this server) down to the leaf, then the leaf operation. It never
 * splits: an insert into a full leaf answers {@link OffloadRequest#NEEDS_SPLIT} and the compute side
 * falls back to its caching path.
 *
 * <p>Not thread-safe: one executor per memory-side thread (it owns a node buffer). The compute side
 * guarantees that while a write runs no other write runs below its start node and nothing below it is cached
 * or written there (its {@code OffloadExclusion}), and the nodes are owned, so no other compute node writes them.
 * A read has no such guarantee. Another memory-side thread may be running a write on the same leaf: its write
 * marks the node's lock word and bumps its version, and a read that overlaps it answers {@link OffloadRequest#STALE}
 * (a seqlock). The compute node itself may be writing a node with a one-sided write; such a torn node may
 * send the walk of a read anywhere: the walk is bounded by the tree's height, an address outside the region throws
 * (the channels answer {@link OffloadRequest#STALE}), and the compute side discards what such a walk
 * reported (it counts its own writes, see {@code RemoteChanges}).
 */
public final class SubtreeExecutor {
    /** The lock word of a node a memory-side thread is writing (compute-side holders' tags are positive). */
    public static final long MEMORY_SIDE_WRITER = -1L;

    private final int serverId;
    private final Region region;
    /** Why the last run refused its request's addresses, or null (see {@link #refusal()}). */
    private String refusal;
    /** When a refusal was last logged, in nanos; shared by every executor, to log at most one a second. */
    private static final java.util.concurrent.atomic.AtomicLong LAST_WARNING = new java.util.concurrent.atomic.AtomicLong(
            System.nanoTime() - 2_000_000_000L);
    /** The node buffer, and a view of it per key width: a request's key words say which ({@link OwnershipTable} checks them). */
    private final UnsafeBuffer buffer = new UnsafeBuffer(BufferUtil.allocateDirectAligned(NODE_LENGTH, 64));
    private final NodeView[] views = new NodeView[KeyFormat.MAX_BYTES / 8 + 1];
    private NodeView node;

    public SubtreeExecutor(int serverId, Region region) {
        this(serverId, region, dev.dex.rdma.MemorySideWrites.DIRECT);
    }

    /** @param writes how this executor's writes reach the region (a replicated primary streams them to its backups) */
    public SubtreeExecutor(int serverId, Region region, dev.dex.rdma.MemorySideWrites writes) {
        this.serverId = serverId;
        this.region = region;
        this.writes = writes;
    }

    private final dev.dex.rdma.MemorySideWrites writes;

    /**
     * Runs {@code request}'s current phase and fills its outcome (it does not complete it). A request whose sender
     * is not the current owner of the partition it names, at the epoch it names, or whose key lies outside that
     * partition, is refused before anything else is read ({@link OwnershipTable#refusal}).
     */
    public void run(OffloadRequest request) {
        refusal = null;
        if (notOwner(request)) {
            return;
        }
        int words = request.key.length;
        if (views[words] == null) {
            views[words] = new NodeView(KeyFormat.of(words * 8)).wrap(buffer, 0);
        }
        node = views[words];
        long address = request.start;
        int depth = 0;
        while (true) {
            if (GlobalAddress.isSwizzled(address) || GlobalAddress.serverId(address) != serverId) {
                request.status = OffloadRequest.CROSS_SERVER;
                return;
            }
            long offset = GlobalAddress.offset(address);
            if ((offset & (Long.BYTES - 1)) != 0 || !region.contains(offset, NODE_LENGTH)) {
                // Only a broken or hostile sender names such an address: refused, and said why (refusal()).
                request.status = OffloadRequest.STALE;
                refusal = "node address " + GlobalAddress.toString(address) + (region.contains(offset, NODE_LENGTH)
                        ? " is not word-aligned" : " lies outside memory server " + serverId + "'s region of " + region.length()
                        + " bytes");
                return;
            }
            if (!readWhole(offset)) {
                request.status = OffloadRequest.STALE;
                return;
            }
            if (node.address() != address || !node.covers(request.key)) {
                request.status = OffloadRequest.FENCE_MISMATCH;
                return;
            }
            if (node.lockWord() != 0) {
                request.status = OffloadRequest.STALE;
                return;
            }
            if (depth >= request.path.length) {
                request.status = OffloadRequest.FENCE_MISMATCH;
                return;
            }
            request.path[depth] = address;
            request.versions[depth] = node.version();
            request.pathLength = depth + 1;
            if (node.isLeaf()) {
                break;
            }
            address = node.child(node.childIndex(request.key));
            depth++;
        }
        int pos = node.search(request.key);
        boolean present = pos >= 0;
        if (!present && LeafOps.mayAdd(request.op) && node.isFull()) {
            request.status = OffloadRequest.NEEDS_SPLIT;
            return;
        }
        request.status = OffloadRequest.OK;
        request.found = present;
        if (present) {
            request.value = node.value(pos);
        }
        if (request.phase == OffloadRequest.WRITE && LeafOps.changes(request.op, present)) {
            // Again just before the write: a new owner may have registered while this request walked. (An owner
            // that registers between this check and the write is not waited for: docs/durability.md.)
            if (notOwner(request)) {
                request.found = false;
                request.value = 0;
                return;
            }
            LeafOps.apply(node, pos, request.op, request.key, request.newValue);
            node.version(node.version() + 1);
            write(GlobalAddress.offset(address));
        }
    }

    /**
     * Whether {@code request}'s sender is not the current owner of the partition it names, at the epoch it names,
     * or its key lies outside that partition ({@link OwnershipTable#refusal}); then the request is answered
     * {@link OffloadRequest#STALE} and {@link #refusal()} says why.
     */
    private boolean notOwner(OffloadRequest request) {
        refusal = OwnershipTable.refusal(region, serverId, request.partition, request.epoch, request.key);
        if (refusal == null) {
            return false;
        }
        request.status = OffloadRequest.STALE;
        return true;
    }

    /**
     * Why the last {@link #run} refused its request without touching the tree (its sender does not own the
     * partition it names at the epoch it names, its key lies outside that partition, or a node address lies
     * outside this server's region or is not word-aligned), or null. The request's status is then
     * {@link OffloadRequest#STALE}.
     */
    public String refusal() {
        return refusal;
    }

    /** Whether a refusal should be logged now: at most one a second across all executors, so a flood cannot. */
    public static boolean warnNow() {
        long now = System.nanoTime();
        long last = LAST_WARNING.get();
        return now - last >= 1_000_000_000L && LAST_WARNING.compareAndSet(last, now);
    }

    /**
     * Copies the node at {@code offset} into the buffer and tells whether the copy is whole: no other
     * memory-side thread was writing it (a seqlock on the lock word and the version, see {@link #write}).
     * A write by a compute node is not seen here; the compute side accounts for those itself.
     */
    private boolean readWhole(long offset) {
        // Version before lock word: a writer stores the mark, then the version, then the rest, then clears
        // the mark; so a reader that sees the new version here sees the mark, or the write finished.
        long versionBefore = region.getLongVolatile(offset + VERSION_OFFSET);
        long lockBefore = region.getLongVolatile(offset + LOCK_WORD_OFFSET);
        region.getBytes(offset, node.buffer(), 0, NODE_LENGTH);
        VarHandle.acquireFence();
        return lockBefore != MEMORY_SIDE_WRITER
                && region.getLongVolatile(offset + LOCK_WORD_OFFSET) != MEMORY_SIDE_WRITER
                && region.getLongVolatile(offset + VERSION_OFFSET) == versionBefore;
    }

    /**
     * Writes the buffer (whose version this write bumped) to the node at {@code offset}, its lock word set to
     * {@link #MEMORY_SIDE_WRITER} meanwhile, so that a read on another memory-side thread can tell it met
     * the node half-written.
     */
    private void write(long offset) {
        writes.change(offset, NODE_LENGTH, () -> {
            region.putLongVolatile(offset + LOCK_WORD_OFFSET, MEMORY_SIDE_WRITER);
            VarHandle.storeStoreFence(); // the mark is visible before any byte of the node changes, on every CPU
            region.putBytes(offset + VERSION_OFFSET, node.buffer(), VERSION_OFFSET, NODE_LENGTH - VERSION_OFFSET);
            region.putLongVolatile(offset + LOCK_WORD_OFFSET, 0);
        });
    }
}
