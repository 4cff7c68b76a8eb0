package dev.dex.core.offload;

import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.TreeMap;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.LeafOps;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.OwnershipTable;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/** The memory-side executor on a bulk-loaded tree of 2 servers with M = 1 (level-1 subtrees dealt round robin). */
class SubtreeExecutorTest {
    private final LocalFabric fabric = new LocalFabric();
    private ExportedRegion[] regions;
    private RemoteMemory memory;

    private void load(int entries, double fill) {
        regions = new ExportedRegion[] {fabric.export(0, 32L << 20, 64 << 10), fabric.export(1, 32L << 20, 64 << 10)};
        memory = fabric.connect(0, 1);
        long[] keys = new long[entries];
        for (int i = 0; i < entries; i++) {
            keys[i] = 2L * i + 2;
        }
        BulkLoader.formatAndLoad(memory, new TreeSettings(1, fill), SortedEntries.of(keys, keys), n -> { });
        // One partition over every key, owned at epoch 0: what a request of a new OffloadRequest names.
        OwnershipTable.register(memory, 4, 0, 0, Long.MIN_VALUE, Long.MAX_VALUE, 8);
    }

    @AfterEach
    void close() {
        fabric.close();
    }

    private NodeView node(long address) {
        NodeView view = new NodeView().wrap(new UnsafeBuffer(new byte[NODE_LENGTH]), 0);
        memory.read(address, view.buffer(), 0, NODE_LENGTH);
        return view;
    }

    private SubtreeExecutor executorFor(long address) {
        int server = GlobalAddress.serverId(address);
        return new SubtreeExecutor(server, regions[server].region());
    }

    private static int run(SubtreeExecutor executor, OffloadRequest request, int op, long key, long value, long start) {
        if (op == LeafOps.LOOKUP) {
            request.read(key, start);
        } else {
            request.write(op, key, value, start);
        }
        executor.run(request);
        return request.status();
    }

    @Test
    void runsEveryPointOperationInsideALevelOneSubtree() {
        load(20_000, 0.8);
        NodeView root = node(Superblock.read(memory).root());
        assertEquals(2, root.level());
        long levelOne = root.child(3);
        NodeView subtree = node(levelOne);
        long inside = subtree.key(5);
        SubtreeExecutor executor = executorFor(levelOne);
        OffloadRequest r = new OffloadRequest();

        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.LOOKUP, inside, 0, levelOne));
        assertTrue(r.found());
        assertEquals(inside, r.value());
        assertEquals(2, r.pathLength(), "the level-1 node and a leaf");
        assertEquals(levelOne, r.pathNode(0));

        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.UPDATE, inside, 77, levelOne));
        assertTrue(r.found());
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.INSERT, inside + 1, 5, levelOne));
        assertFalse(r.found(), "insert of an absent key inserts it");
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.INSERT, inside + 1, 6, levelOne));
        assertTrue(r.found(), "a second insert finds it and changes nothing");
        assertEquals(5, r.value());
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.PUT, inside + 1, 9, levelOne));
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.DELETE, inside, 0, levelOne));
        assertTrue(r.found());
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.UPDATE, inside, 1, levelOne));
        assertFalse(r.found(), "update of a deleted key changes nothing");

        TreeMap<Long, Long> tree = new TreeMap<>();
        TreeValidator.validate(memory, tree::put);
        assertFalse(tree.containsKey(inside));
        assertEquals(9L, tree.get(inside + 1));
        assertEquals(20_000, tree.size());
    }

    @Test
    void reportsKeysOutsideTheSubtreeAndPathsLeavingTheServer() {
        load(20_000, 0.8);
        NodeView root = node(Superblock.read(memory).root());
        long levelOne = root.child(3);
        NodeView subtree = node(levelOne);
        OffloadRequest r = new OffloadRequest();
        assertEquals(OffloadRequest.FENCE_MISMATCH,
                run(executorFor(levelOne), r, LeafOps.LOOKUP, subtree.highFence() + 1, 0, levelOne));

        long rootAddress = Superblock.read(memory).root();
        int rootServer = GlobalAddress.serverId(rootAddress);
        int foreign = -1;
        for (int i = 0; i <= root.count(); i++) {
            if (GlobalAddress.serverId(root.child(i)) != rootServer) {
                foreign = i;
                break;
            }
        }
        assertTrue(foreign >= 0, "level-1 subtrees are dealt over both servers");
        long key = node(root.child(foreign)).key(0);
        assertEquals(OffloadRequest.CROSS_SERVER, run(executorFor(rootAddress), r, LeafOps.LOOKUP, key, 0, rootAddress));
    }

    @Test
    void aFullLeafNeedsASplitAndChangesNothing() {
        load(5_000, 1.0);
        NodeView root = node(Superblock.read(memory).root());
        long levelOne = root.child(0);
        long key = node(levelOne).key(0);
        SubtreeExecutor executor = executorFor(levelOne);
        OffloadRequest r = new OffloadRequest();
        assertEquals(OffloadRequest.NEEDS_SPLIT, run(executor, r, LeafOps.INSERT, key - 1, 1, levelOne),
                "a full leaf cannot take the key without a split");
        TreeMap<Long, Long> tree = new TreeMap<>();
        TreeValidator.validate(memory, tree::put);
        assertFalse(tree.containsKey(key - 1), "a write that needs a split changes nothing");
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.UPDATE, key, 1, levelOne), "an update needs no room");
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.LOOKUP, key, 0, levelOne));
        assertEquals(1, r.value());
    }

    /** What a message-based channel does: the memory side rebuilds the request, the sender applies the answer. */
    @Test
    void aRequestSurvivesATripThroughMessages() {
        load(20_000, 0.8);
        long levelOne = node(Superblock.read(memory).root()).child(2);
        long key = node(levelOne).key(3);
        SubtreeExecutor executor = executorFor(levelOne);
        OffloadRequest sender = new OffloadRequest();
        sender.write(LeafOps.UPDATE, key, 42, levelOne);
        OffloadRequest received = OffloadRequest.received(sender.phase(), sender.op(), 0, 0, sender.key(), sender.newValue(),
                sender.start());
        executor.run(received);
        long[] path = new long[received.pathLength()];
        long[] versions = new long[received.pathLength()];
        for (int i = 0; i < path.length; i++) {
            path[i] = received.pathNode(i);
            versions[i] = received.pathVersion(i);
        }
        sender.answer(received.status(), received.found(), received.value(), path, versions, path.length);
        sender.await();
        assertEquals(OffloadRequest.OK, sender.status());
        assertEquals(2, sender.pathLength(), "the answer carries the path: the compute side drops a cooling copy of its leaf");
        assertEquals(levelOne, sender.pathNode(0));
        assertTrue(sender.found());
        assertEquals(key, sender.value(), "the value before the update");
        TreeMap<Long, Long> tree = new TreeMap<>();
        TreeValidator.validate(memory, tree::put);
        assertEquals(42L, tree.get(key));
    }

    /**
     * What the tcp fabric does with {@code sender}'s current phase: encodes it, has the memory server of its start
     * node handle it, and decodes the answer into it. Returns the request's length.
     */
    private int throughMessages(OffloadRequest sender) {
        int server = GlobalAddress.serverId(sender.start());
        OffloadMessageHandler handler = new OffloadMessageHandler(server, regions[server].region());
        UnsafeBuffer message = new UnsafeBuffer(new byte[OffloadMessageDescriptor.MAX_LENGTH]);
        UnsafeBuffer answer = new UnsafeBuffer(new byte[OffloadMessageDescriptor.MAX_LENGTH]);
        int length = OffloadMessageDescriptor.encodeRequest(sender, 0, message);
        OffloadMessageDescriptor.decodeAnswer(answer, handler.handle(message, 0, length, answer), sender);
        return length;
    }

    /**
     * A message carries a deadline (half its sender's timeout): past it, the memory server answers STALE without
     * running it, since the sender has given up and may be applying the write through its cache.
     */
    @Test
    void aMessagePastItsDeadlineDoesNotRun() {
        load(20_000, 0.8);
        long levelOne = node(Superblock.read(memory).root()).child(2);
        long key = node(levelOne).key(3);
        int server = GlobalAddress.serverId(levelOne);
        OffloadMessageHandler handler = new OffloadMessageHandler(server, regions[server].region());
        UnsafeBuffer message = new UnsafeBuffer(new byte[OffloadMessageDescriptor.MAX_LENGTH]);
        UnsafeBuffer answer = new UnsafeBuffer(new byte[OffloadMessageDescriptor.MAX_LENGTH]);
        OffloadRequest sender = new OffloadRequest();

        sender.write(LeafOps.PUT, key, 4_321, levelOne);
        int length = OffloadMessageDescriptor.encodeRequest(sender, System.currentTimeMillis() - 1, message);
        OffloadMessageDescriptor.decodeAnswer(answer, handler.handle(message, 0, length, answer), sender);
        assertEquals(OffloadRequest.STALE, sender.status(), "a write past its deadline is refused");
        TreeMap<Long, Long> tree = new TreeMap<>();
        TreeValidator.validate(memory, tree::put);
        assertEquals(Long.valueOf(key), tree.get(key), "and did not run");

        sender.write(LeafOps.PUT, key, 4_321, levelOne);
        length = OffloadMessageDescriptor.encodeRequest(sender, System.currentTimeMillis() + 60_000, message);
        OffloadMessageDescriptor.decodeAnswer(answer, handler.handle(message, 0, length, answer), sender);
        assertEquals(OffloadRequest.OK, sender.status(), "within its deadline it runs");
        tree.clear();
        TreeValidator.validate(memory, tree::put);
        assertEquals(4_321L, tree.get(key));
    }

    /** A lookup in one message: the read's request and answer through the fabric message layout, and the executor. */
    @Test
    void aReadLooksUpInOneMessageAndChangesNothing() {
        load(20_000, 0.8);
        long levelOne = node(Superblock.read(memory).root()).child(2);
        NodeView subtree = node(levelOne);
        long key = subtree.key(3);
        long leaf = subtree.child(subtree.childIndex(key));
        long leafVersion = node(leaf).version();

        OffloadRequest sender = new OffloadRequest();
        sender.read(key, levelOne);
        assertEquals(OffloadRequest.READ, sender.phase());
        assertEquals(LeafOps.LOOKUP, sender.op());
        assertEquals(OffloadMessageDescriptor.REQUEST_LENGTH, throughMessages(sender), "a request carries no path");
        sender.await();
        assertEquals(OffloadRequest.OK, sender.status());
        assertTrue(sender.found());
        assertEquals(key, sender.value());
        assertEquals(2, sender.pathLength(), "the answer carries the path, for the compute side's check");
        assertEquals(levelOne, sender.pathNode(0));
        assertEquals(leaf, sender.pathNode(1));
        assertEquals(leafVersion, sender.pathVersion(1));

        sender.read(key + 1, levelOne);
        throughMessages(sender);
        assertEquals(OffloadRequest.OK, sender.status());
        assertFalse(sender.found(), "an absent key");
        assertEquals(leafVersion, node(leaf).version(), "a read changes no version");
        TreeMap<Long, Long> tree = new TreeMap<>();
        TreeValidator.validate(memory, tree::put);
        assertEquals(20_000, tree.size());

        assertThrows(IllegalArgumentException.class, () -> OffloadRequest.received(OffloadRequest.READ, LeafOps.PUT,
                0, 0, key, 1, levelOne), "a read of anything but a lookup is refused");
        assertThrows(IllegalArgumentException.class, () -> OffloadRequest.received(OffloadRequest.WRITE, LeafOps.LOOKUP,
                0, 0, key, 1, levelOne), "a write of a lookup is refused");
        IllegalArgumentException old = assertThrows(IllegalArgumentException.class, () -> OffloadRequest.received(0, LeafOps.PUT,
                0, 0, key, 1, levelOne), "a probe, the first of the two messages of an older build's write, is refused");
        assertTrue(old.getMessage().contains("older build"), old.getMessage());
    }

    /**
     * A read may meet a node the compute node is writing at that moment: here a child pointer past the end of
     * the region. The memory side survives it and answers STALE; the compute side then falls back.
     */
    @Test
    void aReadThatMeetsATornNodeAnswersStale() {
        load(20_000, 0.8);
        long levelOne = node(Superblock.read(memory).root()).child(2);
        NodeView subtree = node(levelOne);
        long key = subtree.key(3);
        int server = GlobalAddress.serverId(levelOne);
        subtree.child(subtree.childIndex(key), GlobalAddress.of(server, regions[server].region().length() - 8));
        memory.write(levelOne, subtree.buffer(), 0, NODE_LENGTH);
        OffloadRequest sender = new OffloadRequest();
        sender.read(key, levelOne);
        throughMessages(sender);
        assertEquals(OffloadRequest.STALE, sender.status());
        assertEquals(0, sender.pathLength(), "no path to check");
    }

    /**
     * Two memory-side threads: one inserts and deletes a key at the front of a leaf (each write shifts every
     * entry), the other reads the leaf's last key, which never changes. A read that overlapped a write must
     * answer STALE, never a missing key or another key's value; a node marked as being written is STALE too.
     */
    @Test
    void aReadOnOneMemoryThreadNeverSeesAWriteOnAnotherHalfDone() throws Exception {
        load(20_000, 0.6);
        long levelOne = node(Superblock.read(memory).root()).child(2);
        NodeView subtree = node(levelOne);
        NodeView leaf = node(subtree.child(1));
        long first = leaf.key(0);
        long last = leaf.key(leaf.count() - 1);
        assertTrue(first - 1 > subtree.key(0), "the inserted key lies in the same leaf");
        int server = GlobalAddress.serverId(levelOne);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread writer = new Thread(() -> {
            SubtreeExecutor executor = new SubtreeExecutor(server, regions[server].region());
            OffloadRequest r = new OffloadRequest();
            while (!stop.get()) {
                run(executor, r, LeafOps.INSERT, first - 1, 1, levelOne);
                run(executor, r, LeafOps.DELETE, first - 1, 0, levelOne);
            }
        }, "memory-side-writer");
        writer.start();
        try {
            SubtreeExecutor executor = new SubtreeExecutor(server, regions[server].region());
            OffloadRequest r = new OffloadRequest();
            for (int i = 0; i < 300_000; i++) {
                r.read(last, levelOne);
                executor.run(r);
                if (r.status() == OffloadRequest.STALE) {
                    continue; // it overlapped a write
                }
                assertEquals(OffloadRequest.OK, r.status());
                assertTrue(r.found(), "read " + i + " missed a key that never moved out");
                assertEquals(last, r.value(), "read " + i);
            }
        } finally {
            stop.set(true);
            writer.join();
        }

        long leafOffset = GlobalAddress.offset(subtree.child(1));
        regions[server].region().putLongVolatile(leafOffset, SubtreeExecutor.MEMORY_SIDE_WRITER);
        OffloadRequest r = new OffloadRequest();
        r.read(last, levelOne);
        executorFor(levelOne).run(r);
        assertEquals(OffloadRequest.STALE, r.status(), "a node marked as being written");
    }

    @Test
    void theChannelRunsRequestsOnMemorySideThreadsAndCountsThem() throws Exception {
        load(20_000, 0.8);
        long levelOne = node(Superblock.read(memory).root()).child(1);
        long key = node(levelOne).key(0);
        try (LocalOffloadChannel channel = new LocalOffloadChannel(List.of(regions), 2, 8, 0)) {
            OffloadRequest r = new OffloadRequest();
            for (int i = 0; i < 100; i++) {
                r.write(LeafOps.PUT, key, i, levelOne);
                channel.submit(r);
                r.await();
                assertEquals(OffloadRequest.OK, r.status());
                r.read(key, levelOne);
                channel.submit(r);
                r.await();
                assertTrue(r.found());
                assertEquals(i, r.value());
            }
            assertEquals(200, channel.executed());
            assertEquals(0, channel.failures());
        }
    }

    /**
     * A memory server runs an offload only for the current owner of the partition it names, and only for a key
     * inside it: a superseded owner (an older epoch), a made-up later epoch, a key of another partition and a
     * partition nobody acquired are refused before the tree is touched, each saying why, directly and through the
     * fabric's message layout; and an owner that was superseded cannot register its epoch again.
     */
    @Test
    void onlyThePartitionsCurrentOwnerMayOffloadIntoIt() {
        load(20_000, 0.8);
        // Two partitions: keys up to 20,000, owned at epoch 0, and above it, owned at 3 and then taken over at 4.
        OwnershipTable.register(memory, 4, 0, 0, Long.MIN_VALUE, 20_000, 8);
        OwnershipTable.register(memory, 4, 1, 3, 20_000, Long.MAX_VALUE, 8);
        OwnershipTable.register(memory, 4, 1, 4, 20_000, Long.MAX_VALUE, 8);
        NodeView root = node(Superblock.read(memory).root());
        long key = 30_000;
        long levelOne = root.child(root.childIndex(key));
        SubtreeExecutor executor = executorFor(levelOne);
        OffloadRequest r = new OffloadRequest();

        r.owner(1, 3);
        assertEquals(OffloadRequest.STALE, run(executor, r, LeafOps.UPDATE, key, -1, levelOne), "a superseded owner");
        assertEquals("partition 1 is owned at epoch 4, not 3", executor.refusal());
        r.owner(1, 5);
        assertEquals(OffloadRequest.STALE, run(executor, r, LeafOps.UPDATE, key, -1, levelOne), "an epoch nobody took");
        r.owner(0, 0);
        assertEquals(OffloadRequest.STALE, run(executor, r, LeafOps.UPDATE, key, -1, levelOne), "another partition's key");
        assertEquals("key 30000 lies outside partition 0 (" + Long.MIN_VALUE + ", 20000]", executor.refusal());
        r.owner(2, 0);
        assertEquals(OffloadRequest.STALE, run(executor, r, LeafOps.UPDATE, key, -1, levelOne), "a partition nobody acquired");
        assertEquals("partition 2 has no owner", executor.refusal());
        r.owner(-1, 0);
        assertEquals(OffloadRequest.STALE, run(executor, r, LeafOps.UPDATE, key, -1, levelOne), "no such partition");
        r.owner(1, 3);
        r.read(key, levelOne);
        throughMessages(r);
        assertEquals(OffloadRequest.STALE, r.status(), "a superseded owner's read, as a fabric message");
        TreeMap<Long, Long> tree = new TreeMap<>();
        TreeValidator.validate(memory, tree::put);
        assertEquals(key, tree.get(key), "no refused request changed the key");

        r.owner(1, 4);
        r.read(key, levelOne);
        throughMessages(r);
        assertEquals(OffloadRequest.OK, r.status(), "the owner's read, as a fabric message: partition and epoch travel");
        assertEquals(OffloadRequest.OK, run(executor, r, LeafOps.UPDATE, key, -1, levelOne), "the owner's update");
        assertEquals(null, executor.refusal());
        tree.clear();
        TreeValidator.validate(memory, tree::put);
        assertEquals(-1L, tree.get(key));

        IllegalStateException superseded = assertThrows(IllegalStateException.class,
                () -> OwnershipTable.register(memory, 4, 1, 3, 20_000, Long.MAX_VALUE, 8));
        assertTrue(superseded.getMessage().contains("acquired at epoch 4"), superseded.getMessage());
    }

    /** A memory server on which no partition was ever acquired refuses every offload (it has no table yet). */
    @Test
    void aServerWithoutOwnersRefusesEveryOffload() {
        regions = new ExportedRegion[] {fabric.export(0, 32L << 20, 64 << 10)};
        memory = fabric.connect(0);
        BulkLoader.formatAndLoad(memory, new TreeSettings(1, 0.8), SortedEntries.of(new long[] {2, 4}, new long[] {2, 4}), n -> { });
        OffloadRequest r = new OffloadRequest();
        SubtreeExecutor executor = executorFor(Superblock.read(memory).root());
        r.read(2, Superblock.read(memory).root());
        executor.run(r);
        assertEquals(OffloadRequest.STALE, r.status());
        assertEquals("no partition was acquired on memory server 0 yet", executor.refusal());
    }
}
