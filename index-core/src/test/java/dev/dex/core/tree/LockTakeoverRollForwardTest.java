package dev.dex.core.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * A compute node that died in the middle of a split of a shared node: it locked the node C and its parent P,
 * wrote the new right node R and P with the new separator, and died before writing the narrowed C. Whoever
 * takes C's lock over rolls the split forward (clips C to its slot in P and writes it) before anyone can use
 * C: before, the lock was only cleared, and a compute node whose cached P predated the split would route a
 * key of R's range to the wide C and write it where no reader finds it.
 */
class LockTakeoverRollForwardTest {
    private static final long DEAD = 7L << 20;
    private static final long ALIVE = 9L << 20;
    private static final long SEPARATOR = 20;

    private final LocalFabric fabric = new LocalFabric();
    private final RemoteMemory memory;
    private final NodeAllocator allocator;
    private long parent;
    private long left;

    LockTakeoverRollForwardTest() {
        fabric.export(0, 16L << 20, 4096);
        memory = fabric.connect(0);
        Superblock.format(memory, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
        allocator = new NodeAllocator(memory, 1);
    }

    @AfterEach
    void close() {
        fabric.close();
    }

    private static NodeView view() {
        return new NodeView().wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
    }

    /** Root P over one leaf C with keys 10..40, then a dead holder's split of C at 20, half done or not. */
    private void treeWithHalfDoneSplit(boolean parentWritten) {
        RemoteNodes writer = new RemoteNodes(memory, DEAD);
        left = allocator.allocate(0);
        parent = allocator.allocate(0);
        NodeView c = view();
        c.init(left, 0, NodeHeaderDescriptor.NEG_INFINITY, NodeHeaderDescriptor.POS_INFINITY);
        for (long key = 10; key <= 40; key += 10) {
            c.appendEntry(key, key * 100);
        }
        writer.writeUnlocked(left, c);
        NodeView p = view();
        p.init(parent, 1, NodeHeaderDescriptor.NEG_INFINITY, NodeHeaderDescriptor.POS_INFINITY);
        p.child(0, left);
        writer.writeUnlocked(parent, p);
        long oldRoot = writer.readRoot();
        assertEquals(oldRoot, writer.swingRoot(oldRoot, parent));

        // The dead holder's split: C locked, R written, P written with the separator; narrowed C never written.
        assertEquals(RemoteNodes.LOCKED, writer.lock(left, 1));
        long right = allocator.allocate(0);
        NodeView wide = view();
        wide.copyFrom(c);
        NodeView r = view();
        c.splitInto(r, right);
        writer.writeUnlocked(right, r);
        if (parentWritten) {
            p.insertSeparator(0, SEPARATOR, right);
            p.version(2);
            writer.writeUnlocked(parent, p);
        }
    }

    @Test
    void aValidatedReadThatMeetsTheDeadHoldersLockFindsTheSplitCompleted() {
        treeWithHalfDoneSplit(true);
        RemoteNodes survivor = new RemoteNodes(memory, ALIVE, holder -> holder == DEAD);

        NodeView c = view();
        assertTrue(survivor.readValidated(left, c), "the lock is taken over");

        assertEquals(SEPARATOR, c.highFence(), "C is narrowed to its slot in the new parent");
        assertEquals(2, c.count(), "and holds only the keys of its slot");
        assertEquals(0, c.lockWord());
        assertEquals(1, survivor.rollForwards());
        TreeValidator.Report report = TreeValidator.validate(memory);
        assertEquals(4, report.entries(), "the tree is valid again and every key is reachable once");
    }

    @Test
    void aLockAttemptThatMeetsTheDeadHoldersLockRollsTheSplitForwardToo() {
        treeWithHalfDoneSplit(true);
        RemoteNodes survivor = new RemoteNodes(memory, ALIVE, holder -> holder == DEAD);

        // A survivor whose cached P predates the split saw C at version 1 and wants to write key 35 into it.
        assertEquals(RemoteNodes.BUSY, survivor.lock(left, 1), "busy the first time: the lock was the dead holder's");
        assertEquals(RemoteNodes.STALE, survivor.lock(left, 1), "then stale: C changed, so the survivor reads it again");
        NodeView c = view();
        assertTrue(survivor.readValidated(left, c));
        assertTrue(!c.covers(35), "and finds that C no longer covers key 35, which belongs to R");
        TreeValidator.validate(memory);
    }

    @Test
    void aSplitThatHoldsTheParentLockedItselfStillRollsTheChildForward() {
        treeWithHalfDoneSplit(true);
        RemoteNodes survivor = new RemoteNodes(memory, ALIVE, holder -> holder == DEAD);
        NodeView p = view();
        assertTrue(survivor.readValidated(parent, p));
        assertEquals(RemoteNodes.LOCKED, survivor.lock(parent, p.version()), "the survivor's own split holds the parent");

        assertEquals(RemoteNodes.BUSY, survivor.lock(left, 1), "the child was the dead holder's");

        NodeView c = view();
        memory.read(left, c.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
        assertEquals(SEPARATOR, c.highFence(), "rolled forward although the parent is locked by the survivor itself");
        assertEquals(0, c.lockWord());
        survivor.unlock(parent);
    }

    @Test
    void aRollForwardThatCannotReadTheParentLeavesTheDeadHoldersLockForTheNextTry() {
        treeWithHalfDoneSplit(true);
        RemoteNodes busy = new RemoteNodes(memory, 11L << 20);
        NodeView p = view();
        assertTrue(busy.readValidated(parent, p));
        assertEquals(RemoteNodes.LOCKED, busy.lock(parent, p.version()), "a live node holds the parent and does not let go");
        RemoteNodes survivor = new RemoteNodes(memory, ALIVE, holder -> holder == DEAD);

        NodeView c = view();
        survivor.readValidated(left, c);

        memory.read(left, c.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
        assertEquals(DEAD, c.lockWord(), "not repaired, so the lock stays the dead holder's: the next session tries again");
        assertEquals(NodeHeaderDescriptor.POS_INFINITY, c.highFence());
        busy.unlock(parent);
        assertTrue(survivor.readValidated(left, c), "once the parent can be read, the split is rolled forward");
        assertEquals(SEPARATOR, c.highFence());
    }

    @Test
    void aDeadHoldersLockWithoutAHalfDoneSplitIsOnlyCleared() {
        treeWithHalfDoneSplit(false);
        RemoteNodes survivor = new RemoteNodes(memory, ALIVE, holder -> holder == DEAD);

        NodeView c = view();
        assertTrue(survivor.readValidated(left, c));

        assertEquals(NodeHeaderDescriptor.POS_INFINITY, c.highFence(), "the parent never saw the split: C stays whole");
        assertEquals(4, c.count());
        assertEquals(1, c.version(), "and unwritten");
        assertEquals(0, survivor.rollForwards());
        assertEquals(4, TreeValidator.validate(memory).entries(), "R is an orphan nobody points to; the tree is valid");
    }
}
