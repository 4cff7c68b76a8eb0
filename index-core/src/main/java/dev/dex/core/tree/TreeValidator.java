package dev.dex.core.tree;

import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.POS_INFINITY;
import static dev.dex.core.node.NodeHeaderDescriptor.TYPE_INNER;
import static dev.dex.core.node.NodeHeaderDescriptor.TYPE_LEAF;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;

/**
 * Checks every structural invariant of the tree in remote memory. Run it when no operation is in
 * flight (after a test, or at the end of a benchmark run); it reads with plain one-sided reads and takes no locks.
 *
 * <p>Invariants: each node's own address is where it lives; no lock word is set; front and back versions
 * agree; type matches level; counts are within capacity; keys are strictly ascending and inside the
 * node's fences {@code (low, high]}; every child's fences are exactly the range its parent gives it
 * (which makes the leaves contiguous from minus to plus infinity); all leaves are at level 0; the root
 * covers everything; every child of a node at level {@code <= M} is on that node's memory server.
 *
 * <p>{@link #lockedNodes} counts the nodes left locked on their own, also in a tree that breaks other invariants:
 * after a run that saw failures, a lock nobody will release is the first thing to look for.
 */
public final class TreeValidator {
    private static final int MAX_PROBLEMS = 20;

    /** What a valid tree holds. */
    public record Report(int height, long[] nodesPerLevel, long entries, TreeMap<Integer, Long> nodesPerServer,
                         long emptyLeaves) {
    }

    /** Receives every entry of a valid tree of 8-byte keys in key order. */
    @FunctionalInterface
    public interface EntryVisitor {
        void accept(long key, long value);
    }

    /** Receives every entry of a valid tree in key order: the key's words (a copy) and the value. */
    @FunctionalInterface
    public interface WordEntryVisitor {
        void accept(long[] key, long value);
    }

    private final RemoteMemory memory;
    private final int subtreeLevel;
    private final KeyFormat format;
    private final int words;
    private final List<String> problems = new ArrayList<>();
    private final WordEntryVisitor visitor;
    private long[] nodesPerLevel;
    private final TreeMap<Integer, Long> nodesPerServer = new TreeMap<>();
    private long entries;
    private long emptyLeaves;

    private TreeValidator(RemoteMemory memory, int subtreeLevel, KeyFormat format, WordEntryVisitor visitor) {
        this.memory = memory;
        this.subtreeLevel = subtreeLevel;
        this.format = format;
        this.words = format.words();
        this.visitor = visitor;
    }

    /** Validates the tree; throws {@link IllegalStateException} listing the first problems found. */
    public static Report validate(RemoteMemory memory) {
        return validate(memory, (k, v) -> { });
    }

    /** Validates a tree of 8-byte keys and hands each entry to {@code visitor}, in key order. */
    public static Report validate(RemoteMemory memory, EntryVisitor visitor) {
        return validateWords(memory, (key, value) -> {
            if (key.length != 1) {
                throw new IllegalStateException("a tree of " + key.length * 8 + "-byte keys: validate it with validateWords");
            }
            visitor.accept(key[0], value);
        });
    }

    /** Validates the tree (keys of any width) and hands each entry to {@code visitor}, in key order. */
    public static Report validateWords(RemoteMemory memory, WordEntryVisitor visitor) {
        Superblock.Contents superblock = Superblock.read(memory);
        TreeValidator validator = new TreeValidator(memory, superblock.subtreeLevel(), superblock.keyFormat(), visitor);
        NodeView root = validator.read(superblock.root());
        int height = root.level() + 1;
        validator.nodesPerLevel = new long[height];
        validator.check(superblock.root(), root.level(), validator.infinity(NEG_INFINITY), validator.infinity(POS_INFINITY), -1);
        if (!validator.problems.isEmpty()) {
            throw new IllegalStateException("tree invariants violated (" + validator.problems.size() + " shown):\n  "
                    + String.join("\n  ", validator.problems));
        }
        return new Report(height, validator.nodesPerLevel, validator.entries, validator.nodesPerServer, validator.emptyLeaves);
    }

    /**
     * Nodes reachable from the root whose lock word is set: locks nobody holds once every compute node stopped. It
     * goes down the child pointers of inner nodes only where they lead one level down to a node that names itself,
     * so it ends on a damaged tree too, and counts each node once.
     */
    public static long lockedNodes(RemoteMemory memory) {
        Superblock.Contents superblock = Superblock.read(memory);
        TreeValidator walker = new TreeValidator(memory, superblock.subtreeLevel(), superblock.keyFormat(), (k, v) -> { });
        java.util.Set<Long> seen = new java.util.HashSet<>();
        java.util.ArrayDeque<long[]> pending = new java.util.ArrayDeque<>();
        pending.add(new long[] {superblock.root(), -1});
        long locked = 0;
        while (!pending.isEmpty()) {
            long[] next = pending.poll();
            long address = next[0];
            if (address == GlobalAddress.NULL || GlobalAddress.isSwizzled(address) || !seen.add(address)) {
                continue;
            }
            NodeView node;
            try {
                node = walker.read(address);
            } catch (IllegalArgumentException notInAnyRegion) {
                continue;
            }
            if (node.address() != address || next[1] >= 0 && node.level() != next[1]) {
                continue;
            }
            if (node.lockWord() != 0) {
                locked++;
            }
            if (node.level() > 0 && node.type() == TYPE_INNER && node.count() <= node.capacity()) {
                for (int i = 0; i <= node.count(); i++) {
                    pending.add(new long[] {node.child(i), node.level() - 1});
                }
            }
        }
        return locked;
    }

    private NodeView read(long address) {
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[NODE_LENGTH]);
        memory.read(address, buffer, 0, NODE_LENGTH);
        return new NodeView(format).wrap(buffer, 0);
    }

    private long[] infinity(long word) {
        long[] key = new long[words];
        java.util.Arrays.fill(key, word);
        return key;
    }

    /** A key in a message: the long of an 8-byte key, else its bytes in hex. */
    private String text(long[] key) {
        return words == 1 ? Long.toString(key[0]) : "0x" + java.util.HexFormat.of().formatHex(format.toBytes(key, 0));
    }

    private void check(long address, int level, long[] lowKey, long[] highKey, int requiredServer) {
        String low = text(lowKey);
        String high = text(highKey);
        if (problems.size() >= MAX_PROBLEMS) {
            return;
        }
        String where = GlobalAddress.toString(address);
        if (address == GlobalAddress.NULL || GlobalAddress.isSwizzled(address)) {
            problem("null or swizzled child pointer " + where + " for range (" + low + ", " + high + "]");
            return;
        }
        int server = GlobalAddress.serverId(address);
        if (requiredServer >= 0 && server != requiredServer) {
            problem(where + " at level " + level + " is on server " + server + " but its level-M subtree is on server " + requiredServer);
        }
        NodeView node = read(address);
        nodesPerServer.merge(server, 1L, Long::sum);
        if (node.address() != address) {
            problem(where + " says its address is " + GlobalAddress.toString(node.address()));
            return;
        }
        if (node.lockWord() != 0) {
            problem(where + " is left locked by tag " + node.lockWord());
        }
        if (node.version() != node.backVersion()) {
            problem(where + " front version " + node.version() + " != back version " + node.backVersion());
        }
        if (node.level() != level) {
            problem(where + " has level " + node.level() + ", expected " + level);
            return;
        }
        byte expectedType = level == 0 ? TYPE_LEAF : TYPE_INNER;
        if (node.type() != expectedType) {
            problem(where + " has type " + node.type() + " at level " + level);
            return;
        }
        long[] fenceLow = new long[words];
        long[] fenceHigh = new long[words];
        node.lowFence(fenceLow);
        node.highFence(fenceHigh);
        if (!java.util.Arrays.equals(fenceLow, lowKey) || !java.util.Arrays.equals(fenceHigh, highKey)) {
            problem(where + " has fences (" + text(fenceLow) + ", " + text(fenceHigh) + "], its parent gives (" + low + ", " + high + "]");
        }
        int count = node.count();
        if (count > node.capacity()) {
            problem(where + " holds " + count + " keys, capacity " + node.capacity());
            return;
        }
        long[] previous = lowKey.clone();
        long[][] keys = new long[count][];
        for (int i = 0; i < count; i++) {
            long[] key = new long[words];
            node.key(i, key, 0);
            keys[i] = key;
            if (format.compare(key, 0, previous, 0) <= 0 || format.compare(key, 0, highKey, 0) > 0) {
                problem(where + " key[" + i + "] = " + text(key) + " out of order or outside (" + low + ", " + high + "]");
            }
            previous = key;
        }
        nodesPerLevel[level]++;
        if (level == 0) {
            entries += count;
            if (count == 0) {
                emptyLeaves++;
            }
            for (int i = 0; i < count; i++) {
                visitor.accept(keys[i], node.value(i));
            }
            return;
        }
        int childServer = level <= subtreeLevel ? server : -1;
        long[] childLow = lowKey;
        for (int i = 0; i <= count; i++) {
            long[] childHigh = i < count ? keys[i] : highKey;
            check(node.child(i), level - 1, childLow, childHigh, childServer);
            childLow = childHigh;
        }
    }

    private void problem(String text) {
        if (problems.size() < MAX_PROBLEMS) {
            problems.add(text);
        }
    }
}
