package dev.dex.core.tree;

import static dev.dex.core.node.NodeHeaderDescriptor.NEG_INFINITY;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;
import static dev.dex.core.node.NodeHeaderDescriptor.POS_INFINITY;

import java.util.function.LongConsumer;

import org.agrona.collections.LongArrayList;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;
import dev.dex.rdma.RemoteMemory;

/**
 * Builds a tree bottom-up from sorted entries into an empty, formatted tree, then swings the root
 * pointer to it. One writer, no concurrent users: run it before compute nodes open the tree.
 *
 * <p>Nodes are filled to the configured fill factor. Placement keeps every subtree rooted at level M on
 * one memory server: with fan-out f, the level-M ancestor of node j at level l is node {@code j / f^(M-l)},
 * and level-M subtrees are dealt to the servers round robin; nodes above M go round robin as well.
 */
public final class BulkLoader {

    /** What a bulk load built. */
    public record Result(long entries, int height, long leaves, long innerNodes, long root) {
    }

    private final RemoteMemory memory;
    private final int subtreeLevel;
    private final int[] servers;
    private final NodeAllocator allocator;
    private final int leafFill;
    private final int fanOut;
    private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[NODE_LENGTH]);
    private final KeyFormat format;
    private final int words;
    private final NodeView node;

    private BulkLoader(RemoteMemory memory, int subtreeLevel, KeyFormat format, double fill) {
        this.memory = memory;
        this.subtreeLevel = subtreeLevel;
        this.format = format;
        this.words = format.words();
        this.node = new NodeView(format).wrap(buffer, 0);
        this.allocator = new NodeAllocator(memory, subtreeLevel);
        this.servers = allocator.servers();
        this.leafFill = Math.max(1, (int) Math.floor(format.leafCapacity() * fill));
        this.fanOut = Math.max(2, (int) Math.floor((format.innerCapacity() + 1) * fill));
    }

    /**
     * Formats the tree on the connected memory pool and loads {@code entries} into it.
     *
     * @param progress called with the number of entries loaded so far, once per leaf
     */
    public static Result formatAndLoad(RemoteMemory memory, TreeSettings config, SortedEntries entries, LongConsumer progress) {
        Superblock.format(memory, config);
        return load(memory, config.bulkFillFactor(), entries, progress);
    }

    /**
     * Loads {@code entries} into the formatted, still empty tree on the connected memory pool.
     *
     * @throws IllegalStateException    if the tree is not empty
     * @throws IllegalArgumentException if keys are not strictly ascending or a key is {@code Long.MIN_VALUE};
     *                                  the tree is then left empty
     */
    public static Result load(RemoteMemory memory, double fillFactor, SortedEntries entries, LongConsumer progress) {
        Superblock.Contents superblock = Superblock.read(memory);
        UnsafeBuffer rootImage = new UnsafeBuffer(new byte[NODE_LENGTH]);
        memory.read(superblock.root(), rootImage, 0, NODE_LENGTH);
        NodeView oldRoot = new NodeView(superblock.keyFormat()).wrap(rootImage, 0);
        if (!oldRoot.isLeaf() || oldRoot.count() != 0) {
            throw new IllegalStateException("bulk load needs an empty tree; this one has a root " + oldRoot);
        }
        if (!(fillFactor > 0 && fillFactor <= 1)) {
            throw new IllegalArgumentException("fill factor must be in (0, 1]: " + fillFactor);
        }
        BulkLoader loader = new BulkLoader(memory, superblock.subtreeLevel(), superblock.keyFormat(), fillFactor);
        Result result = loader.build(entries, progress);
        if (result.entries() == 0) {
            return new Result(0, 1, 1, 0, superblock.root());
        }
        long found = memory.compareAndSwap(SuperblockDescriptor.ROOT_ADDRESS, superblock.root(), result.root());
        if (found != superblock.root()) {
            throw new IllegalStateException("the tree's root changed during bulk load; was another compute node writing?");
        }
        return result;
    }

    private Result build(SortedEntries entries, LongConsumer progress) {
        LongArrayList addresses = new LongArrayList();
        // The high fences of the nodes of the level being built, words after words.
        LongArrayList highs = new LongArrayList();
        long count = 0;
        long[] key = new long[words];
        long[] previousKey = infinity(NEG_INFINITY);
        long[] low = infinity(NEG_INFINITY);
        long[] high = new long[words];
        boolean pending = false;
        while (entries.next()) {
            entries.key(key);
            if (format.compare(key, 0, previousKey, 0) <= 0) {
                throw new IllegalArgumentException(format.isNegInfinity(key, 0)
                        ? "entry " + count + ": key Long.MIN_VALUE is reserved"
                        : "entry " + count + ": key " + text(key) + " is not above the previous key " + text(previousKey));
            }
            if (pending && node.count() == leafFill) {
                node.key(leafFill - 1, high, 0);
                flushLeaf(addresses, highs, low, high);
                System.arraycopy(high, 0, low, 0, words);
                progress.accept(count);
                pending = false;
            }
            if (!pending) {
                node.init(0, 0, 0, 0);
                pending = true;
            }
            node.appendEntry(key, entries.value());
            System.arraycopy(key, 0, previousKey, 0, words);
            count++;
        }
        if (!pending) {
            return new Result(0, 1, 0, 0, 0);
        }
        flushLeaf(addresses, highs, low, infinity(POS_INFINITY));
        progress.accept(count);
        long leaves = addresses.size();
        long inner = 0;
        int level = 0;
        long[] separator = new long[words];
        while (addresses.size() > 1) {
            level++;
            LongArrayList parentAddresses = new LongArrayList();
            LongArrayList parentHighs = new LongArrayList();
            long[] parentLow = infinity(NEG_INFINITY);
            for (int first = 0; first < addresses.size(); first += fanOut) {
                int last = Math.min(first + fanOut, addresses.size()) - 1;
                long address = allocator.allocate(serverFor(level, parentAddresses.size()));
                highAt(highs, last, high);
                node.init(address, level, parentLow, high);
                node.child(0, addresses.getLong(first));
                for (int c = first + 1; c <= last; c++) {
                    highAt(highs, c - 1, separator);
                    node.appendChild(separator, addresses.getLong(c));
                }
                memory.write(address, buffer, 0, NODE_LENGTH);
                parentAddresses.addLong(address);
                for (long word : high) {
                    parentHighs.addLong(word);
                }
                System.arraycopy(high, 0, parentLow, 0, words);
                inner++;
            }
            addresses = parentAddresses;
            highs = parentHighs;
        }
        return new Result(count, level + 1, leaves, inner, addresses.getLong(0));
    }

    /** Writes the buffered leaf with fences (low, high]. */
    private void flushLeaf(LongArrayList addresses, LongArrayList highs, long[] low, long[] high) {
        long address = allocator.allocate(serverFor(0, addresses.size()));
        node.address(address);
        node.fences(low, high);
        memory.write(address, buffer, 0, NODE_LENGTH);
        addresses.addLong(address);
        for (long word : high) {
            highs.addLong(word);
        }
    }

    private void highAt(LongArrayList highs, int index, long[] out) {
        for (int w = 0; w < words; w++) {
            out[w] = highs.getLong(index * words + w);
        }
    }

    private long[] infinity(long word) {
        long[] key = new long[words];
        java.util.Arrays.fill(key, word);
        return key;
    }

    /** A key in an error message: the long of an 8-byte key, else its bytes. */
    private String text(long[] key) {
        return words == 1 ? Long.toString(key[0]) : java.util.HexFormat.of().formatHex(format.toBytes(key, 0));
    }

    /** Server of node {@code index} at {@code level}, so that level-M subtrees stay on one server. */
    private int serverFor(int level, long index) {
        long group = index;
        if (level <= subtreeLevel) {
            for (int l = level; l < subtreeLevel && group > 0; l++) {
                group /= fanOut;
            }
        }
        return servers[(int) (group % servers.length)];
    }
}
