package dev.dex.core.tree;

import static dev.dex.core.node.NodeHeaderDescriptor.LOCK_AND_VERSION_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.LOCK_WORD_OFFSET;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.VERSION_OFFSET;

import java.nio.ByteOrder;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;

/**
 * The remote side of the node protocol, for one thread: the three-read validated read, the single
 * read of a node nobody else writes, the remote lock (compare-and-swap of word 0 plus a version
 * re-check), the locked write-back, and the release. Shared by the baseline tree and the DEX engine's
 * shared nodes; see {@code docs/baseline-tree.md}. Not thread-safe: one per session.
 *
 * <p>When a verb fails ({@link FabricException}: it may or may not have taken effect), no remote lock this session
 * may hold is forgotten: a compare-and-swap that failed while taking a lock, and a release that failed, leave the
 * lock in the engine's {@link PendingUnlocks}, which releases it once the memory server answers again. Callers
 * release a lock they took with {@link #release} in a {@code finally}, which never throws.
 */
public final class RemoteNodes {
    /** {@link #lock} outcome: the lock is held and the version was as expected. */
    public static final int LOCKED = 0;
    /** {@link #lock} outcome: another holder has the lock. */
    public static final int BUSY = 1;
    /** {@link #lock} outcome: the node changed since the caller's image; the lock was released. */
    public static final int STALE = 2;

    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;
    private static final int READ_ATTEMPTS = 32;

    private final RemoteMemory memory;
    private final long tag;
    /** Tells whether a lock tag belongs to a compute node that is gone: its locks are taken over. */
    private final java.util.function.LongPredicate holderGone;
    private final PendingUnlocks pending;
    private final UnsafeBuffer header = new UnsafeBuffer(BufferUtil.allocateDirectAligned(64, 64));
    private final UnsafeBuffer zero = new UnsafeBuffer(BufferUtil.allocateDirectAligned(64, 64));

    public RemoteNodes(RemoteMemory memory, long tag) {
        this(memory, tag, holder -> false);
    }

    /** {@link #RemoteNodes(RemoteMemory, long, java.util.function.LongPredicate, PendingUnlocks)} with locks of its own. */
    public RemoteNodes(RemoteMemory memory, long tag, java.util.function.LongPredicate holderGone) {
        this(memory, tag, holderGone, new PendingUnlocks());
    }

    /**
     * @param holderGone whether a lock tag names a holder that is gone for good (a compute node no longer in
     *                   the cluster): such a lock is taken over when met, and the split it may have left
     *                   half done rolled forward (every remote write a holder makes under its lock is a
     *                   whole node of a valid tree, so at most the narrowed node is missing)
     * @param pending    the locks of this compute node that a failed verb left held (shared by its sessions)
     */
    public RemoteNodes(RemoteMemory memory, long tag, java.util.function.LongPredicate holderGone, PendingUnlocks pending) {
        if (tag <= 0) {
            throw new IllegalArgumentException("a lock tag must be positive");
        }
        this.memory = memory;
        this.tag = tag;
        this.holderGone = holderGone;
        this.pending = pending;
    }

    /** Locks of this compute node left held by failed verbs. */
    public PendingUnlocks pending() {
        return pending;
    }

    /**
     * Takes over the lock word {@code holder} of the node at {@code address} if its holder is gone: locks the
     * node for this session by compare-and-swap, rolls forward what the holder may have left half done
     * ({@link #rollForward}), and unlocks it. A session that loses the compare-and-swap leaves it to the winner.
     */
    private void takeOverIfGone(long address, long holder) {
        if (holder == 0 || holder == tag || !holderGone.test(holder)) {
            return;
        }
        long found;
        try {
            found = memory.compareAndSwap(address + LOCK_WORD_OFFSET, holder, tag);
        } catch (FabricException unknown) {
            // It may have taken the lock: repair and release it once the server answers.
            pending.add(address, tag, true);
            throw unknown;
        }
        if (found != holder) {
            return;
        }
        boolean done = false;
        try {
            done = rollForward(address);
        } finally {
            if (done) {
                release(address);
            } else {
                // Not known to be repaired (a parent that stayed busy, a failure): the dead holder's tag goes
                // back, so whoever meets the lock next tries again rather than using a node that may be wide.
                try {
                    memory.compareAndSwap(address + LOCK_WORD_OFFSET, tag, holder);
                } catch (FabricException unreachable) {
                    pending.add(address, tag, true);
                }
            }
        }
    }

    /**
     * Releases the lock of the node at {@code address} if it still holds {@code holder} (a lock of this compute
     * node that a failed verb left held, {@link PendingUnlocks}); with {@code repair}, first rolls forward a split
     * the holder may have left half done, as for a dead holder ({@link #rollForward}).
     *
     * @return true when the lock is released or no longer the holder's; false when the node could not be repaired
     *         yet (it stays locked)
     * @throws FabricException when the memory server does not answer (the lock stays pending)
     */
    boolean releaseFor(long address, long holder, boolean repair) {
        if (repair) {
            RemoteNodes as = holder == tag ? this : new RemoteNodes(memory, holder, holderGone, pending);
            memory.read(address, as.header, 0, LOCK_AND_VERSION_LENGTH);
            if (as.header.getLong(LOCK_WORD_OFFSET, ORDER) != holder) {
                return true;
            }
            if (!as.rollForward(address)) {
                return false;
            }
        }
        memory.compareAndSwap(address + LOCK_WORD_OFFSET, holder, 0);
        return true;
    }

    /**
     * Completes a split this compute node left half done on an owned node (its narrowed image not written: remote memory
     * may show a parent that already points to the right half, with the node still wide): locks the node, clips it to
     * its slot in its parent as remote memory holds it now ({@link #rollForward}), and unlocks it. An owned node has no
     * other writer; the caller keeps its partition from being served meanwhile.
     *
     * @return true when the node is repaired (or needed nothing); false when it could not be yet (locked by someone,
     *         or a parent on the way stayed busy)
     * @throws FabricException when the memory server does not answer
     */
    public boolean repairSplit(long address) {
        long holder;
        try {
            holder = memory.compareAndSwap(address + LOCK_WORD_OFFSET, 0, tag);
        } catch (FabricException unknown) {
            pending.add(address, tag, true);
            throw unknown;
        }
        if (holder != 0 && holder != tag) {
            return false;
        }
        boolean done;
        try {
            done = rollForward(address);
        } finally {
            release(address); // when it fails, the release is pending (PendingUnlocks)
        }
        return done;
    }

    /**
     * Leaves the lock of the node at {@code address} to {@link PendingUnlocks}, for a caller that cannot release it
     * now; with {@code repair}, the node may be half written (see {@link #releaseFor}).
     */
    public void leavePending(long address, boolean repair) {
        pending.add(address, tag, repair);
    }

    /**
     * Completes a split a dead holder left half done under this node's lock: the new right node and the
     * parent (with the new separator) are in remote memory, but the narrowed node is not, so the node is
     * still wider than its slot in the parent. Readers coming through the new parent clip it, but a compute
     * node whose cached parent predates the split would still route keys of the right half here and write
     * them where nobody finds them. So the node is looked up in its parent as remote memory holds it now
     * (a descent from the root towards its low fence), and clipped to that slot and written back before its
     * lock is released. Nothing to do when the parent does not show the split (the holder died before
     * writing it: the node is still exactly what the parent says) or the node is the root.
     */
    private boolean rollForward(long address) {
        // The tree's key width (a rare path: one more read is nothing here).
        KeyFormat keys = Superblock.read(memory).keyFormat();
        NodeView node = new NodeView(keys).wrap(new UnsafeBuffer(new byte[NODE_LENGTH]), 0);
        memory.read(address, node.buffer(), node.offset(), NODE_LENGTH);
        if (node.version() != node.backVersion()) {
            return true; // torn by a writer that died mid-write: readers refuse it, nothing here can rebuild it
        }
        // The smallest key the node holds: the one after its low fence.
        long[] key = new long[keys.words()];
        node.lowFence(key);
        dev.dex.core.engine.IndexSession.successor(key, keys.words());
        long[] slotHigh = new long[keys.words()];
        NodeView parent = new NodeView(keys).wrap(new UnsafeBuffer(new byte[NODE_LENGTH]), 0);
        long current = readRoot();
        for (int depth = 0; depth < TreeSettings.MAX_HEIGHT && current != address; depth++) {
            if (!readForRollForward(current, parent)) {
                return false;
            }
            if (parent.isLeaf() || parent.level() <= node.level()) {
                return true;
            }
            int slot = parent.childIndex(key);
            long child = parent.child(slot);
            if (parent.level() == node.level() + 1) {
                if (child != address) {
                    return true;
                }
                parent.slotHigh(slot, slotHigh);
                if (node.compareHighFence(slotHigh) < 0) {
                    // Read again just before the write: a node the clip leaves inside one partition may meanwhile
                    // have been clipped, cached and written back by that partition's owner (a plain write, lock
                    // word 0); that image is newer and stays.
                    memory.read(address, header, 0, LOCK_AND_VERSION_LENGTH);
                    if (header.getLong(LOCK_WORD_OFFSET, ORDER) != tag || header.getLong(VERSION_OFFSET, ORDER) != node.version()) {
                        return true;
                    }
                    node.clipAbove(slotHigh);
                    writeLocked(address, node, node.version() + 1);
                    rollForwards++;
                }
                return true;
            }
            current = child;
        }
        return true;
    }

    /**
     * A validated read on the way down of a roll-forward, which waits out a live writer for longer than
     * {@link #readValidated} alone, and reads a node this session holds locked itself (a split that meets the
     * dead holder's lock on a child while it holds the parent) as it is: nobody else writes it meanwhile.
     */
    private boolean readForRollForward(long address, NodeView node) {
        for (int round = 0; round < 8; round++) {
            memory.read(address, node.buffer(), node.offset(), NODE_LENGTH);
            if (node.lockWord() == tag && node.version() == node.backVersion()) {
                return true;
            }
            if (readValidated(address, node)) {
                return true;
            }
        }
        return false;
    }

    /** Half-done splits of dead holders this session completed (see {@link #rollForward}). */
    private long rollForwards;

    /** How many half-done splits of dead lock holders this session completed. */
    public long rollForwards() {
        return rollForwards;
    }

    public RemoteMemory memory() {
        return memory;
    }

    public long tag() {
        return tag;
    }

    /**
     * Reads a node other compute nodes may write: lock word + version, the node, lock word + version
     * again; accepted when unlocked both times, unchanged, and front = back version. Retries a few times.
     */
    public boolean readValidated(long address, NodeView node) {
        for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
            memory.read(address, header, 0, LOCK_AND_VERSION_LENGTH);
            long version = header.getLong(VERSION_OFFSET, ORDER);
            long holder = header.getLong(LOCK_WORD_OFFSET, ORDER);
            if (holder != 0) {
                if (!pending.isEmpty()) {
                    pending.retryIfDue(this); // the holder may be this compute node, whose release failed
                }
                takeOverIfGone(address, holder);
            }
            if (holder == 0) {
                memory.read(address, node.buffer(), node.offset(), NODE_LENGTH);
                memory.read(address, header, 0, LOCK_AND_VERSION_LENGTH);
                if (header.getLong(LOCK_WORD_OFFSET, ORDER) == 0 && header.getLong(VERSION_OFFSET, ORDER) == version
                        && node.version() == version && node.backVersion() == version) {
                    return true;
                }
            }
            SpinBackoff.pause(attempt);
        }
        return false;
    }

    /**
     * One read, for a node only this thread can be writing (an owned node under its IO marker). The image
     * is accepted when its front and back versions agree; a torn one (a writer still at work, or one that
     * died mid-write) is read again a few times and then refused with an exception, never served.
     */
    public void readOnce(long address, NodeView node) {
        for (int attempt = 0; ; attempt++) {
            memory.read(address, node.buffer(), node.offset(), NODE_LENGTH);
            if (node.version() == node.backVersion()) {
                return;
            }
            if (attempt == READ_ATTEMPTS) {
                throw new IllegalStateException("node " + dev.dex.rdma.GlobalAddress.toString(address)
                        + " stays torn (front version " + node.version() + ", back version " + node.backVersion()
                        + "): a writer died while writing it");
            }
            SpinBackoff.pause(attempt);
        }
    }

    /** Takes the remote lock and checks the version is still {@code expectedVersion}. */
    public int lock(long address, long expectedVersion) {
        if (!pending.isEmpty()) {
            pending.retryIfDue(this);
        }
        long holder;
        try {
            holder = memory.compareAndSwap(address + LOCK_WORD_OFFSET, 0, tag);
        } catch (FabricException unknown) {
            // The swap may have taken effect: the lock may be this session's now.
            pending.add(address, tag, false);
            throw unknown;
        }
        if (holder != 0) {
            takeOverIfGone(address, holder);
            return BUSY;
        }
        try {
            memory.read(address, header, 0, LOCK_AND_VERSION_LENGTH);
        } catch (FabricException e) {
            release(address);
            throw e;
        }
        if (header.getLong(VERSION_OFFSET, ORDER) != expectedVersion) {
            release(address);
            return STALE;
        }
        return LOCKED;
    }

    /** Writes a node whose remote lock this thread holds: lock word still set, version {@code newVersion}. */
    public void writeLocked(long address, NodeView node, long newVersion) {
        node.lockWord(tag);
        node.version(newVersion);
        memory.write(address, node.buffer(), node.offset(), NODE_LENGTH);
    }

    /** Writes a node whole, with a clear lock word (a new node, or one only this thread writes). */
    public void writeUnlocked(long address, NodeView node) {
        node.lockWord(0);
        memory.write(address, node.buffer(), node.offset(), NODE_LENGTH);
    }

    /**
     * Adds {@link #writeUnlocked}'s write of {@code node} to {@code batch}, to go to the fabric beside other verbs
     * ({@link #submit}); returns its slot.
     */
    public int writeUnlocked(VerbBatch batch, long address, NodeView node) {
        node.lockWord(0);
        return batch.write(address, node.buffer(), node.offset(), NODE_LENGTH);
    }

    /** Issues every verb of {@code batch} together and waits for them all ({@link RemoteMemory#submit}): never throws for a failed verb. */
    public void submit(VerbBatch batch) {
        memory.submit(batch);
    }

    /** Releases the remote lock with an 8-byte write of 0; throws when the write fails (see {@link #release}). */
    public void unlock(long address) {
        memory.write(address + LOCK_WORD_OFFSET, zero, 0, Long.BYTES);
    }

    /**
     * Releases the remote lock this session holds, as {@link #unlock}, but never throws: when the write fails, the
     * lock is left to {@link PendingUnlocks}, which releases it once the server answers.
     *
     * @return whether it was released now
     */
    public boolean release(long address) {
        try {
            unlock(address);
            return true;
        } catch (FabricException failed) {
            pending.add(address, tag, false);
            return false;
        }
    }

    /** The superblock's root pointer, read remotely. */
    public long readRoot() {
        memory.read(SuperblockDescriptor.ROOT_ADDRESS, header, 0, Long.BYTES);
        return header.getLong(0, ORDER);
    }

    /** Swings the root pointer; returns the value found (= {@code expected} when swung). */
    public long swingRoot(long expected, long newRoot) {
        return memory.compareAndSwap(SuperblockDescriptor.ROOT_ADDRESS, expected, newRoot);
    }
}
