package dev.dex.core.cache;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.agrona.collections.LongArrayList;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeMerge;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.OwnershipTable;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;

/**
 * The leaves merge passes freed, per partition and memory server, as chains in remote memory, so that they outlive the
 * owner that freed them: its next owner, after a release or a crash, reuses them (docs/merges.md, "Reuse").
 *
 * <p><b>Layout.</b> A chain's head is a word of the server's ownership table ({@link OwnershipTable#freeHead}); each
 * leaf on it is dead ({@link NodeMerge#kill}) and keeps the next one's address in its first payload word
 * ({@link NodeMerge#nextFree}), 0 at the end. Only the partition's owner reads or writes its heads and chains. A
 * leaf a new owner inherits is read before it is taken: it must be a whole dead leaf of that server whose (empty)
 * range lies in the partition, or the rest of the chain is not followed.
 *
 * <p><b>Order of writes</b>, so that after any crash every leaf on a chain is dead, unreachable and not in use:
 * a pass writes its dead leaves, already linked, and only then the head ({@link #pushed}); a split moves the head past
 * a leaf before it writes the leaf as its new node ({@link #take}). A crash or a failed write between the two leaks a
 * leaf (off the chain, unreachable) and never hands one out twice. A server whose table keeps no heads (made by a
 * build before them) keeps its chains in this engine only, and they leak when the partition is given up.
 *
 * <p>What this engine knows of a chain (its head word's address, the first leaf as remote memory has it, and the leaves
 * it linked itself) is dropped when the partition is given up ({@link #forget}) and after a failed verb: the next
 * use reads the head again.
 *
 * <pre>
 * Concurrency: take runs on any session's thread, inside a split; pushed runs on the merge pass's thread while the
 *   partition is paused; forget runs on a releasing thread after the partition stopped being held. Each partition's
 *   chains are guarded by their array's monitor, held across the verbs on them: take, pushed and forget of one
 *   partition run one at a time, and take hands out nothing once the partition is not held, so that forget leaves no
 *   state a later hold could mistake for the chain's.
 * </pre>
 */
public final class FreeLeaves {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(FreeLeaves.class);
    private static final java.nio.ByteOrder ORDER = java.nio.ByteOrder.LITTLE_ENDIAN;
    private static final long UNKNOWN = -1;

    /** One chain, as this engine knows it. */
    private static final class Chain {
        /** The head word's address; 0: kept in this engine only; UNKNOWN: not looked up. */
        long headWord = UNKNOWN;
        /** The chain's first leaf as remote memory has it (0: empty); valid when known. */
        long first;
        boolean known;
        /** Leaves of the chain this engine linked, by triples (address, dead version, next), the first last. */
        final LongArrayList linked = new LongArrayList();

        void reset() {
            headWord = UNKNOWN;
            known = false;
            first = 0;
            linked.clear();
        }

        int linkedCount() {
            return linked.size() / 3;
        }
    }

    private final RemoteMemory memory;
    private final KeyFormat keys;
    private final HeldPartitions held;
    private final java.util.function.Supplier<dev.dex.core.partition.PartitionTable> partitions;
    /** Per partition, per memory server id. */
    private final Chain[][] chains;
    private final AtomicLong reused = new AtomicLong();
    private final AtomicLong inherited = new AtomicLong();
    private final AtomicLong leaked = new AtomicLong();

    FreeLeaves(RemoteMemory memory, KeyFormat keys, HeldPartitions held,
               java.util.function.Supplier<dev.dex.core.partition.PartitionTable> partitions) {
        this.memory = memory;
        this.keys = keys;
        this.held = held;
        this.partitions = partitions;
        int servers = 0;
        for (int id : memory.memoryServerIds()) {
            servers = Math.max(servers, id + 1);
        }
        this.chains = new Chain[dev.dex.core.partition.PartitionTable.MAX_PARTITIONS][servers];
        for (Chain[] row : chains) {
            for (int s = 0; s < servers; s++) {
                row[s] = new Chain();
            }
        }
    }

    /**
     * The chain's first leaf on {@code server} for {@code partition}, which the next leaf a pass frees links to; reads the
     * head when this engine does not know it. Called by the pass, before its writes.
     *
     * @throws FabricException when the head cannot be read
     */
    long first(int partition, int server) {
        Chain[] row = chains[partition];
        synchronized (row) {
            return known(partition, server, row[server]).first;
        }
    }

    /**
     * Records that the pass wrote {@code addresses} (on {@code server}, in that order, each linked to the one before and
     * the first to {@link #first}) dead, with {@code versions}; then points the head to the last.
     *
     * @throws FabricException when the head's write fails: those leaves leak, the chain stays as it was before
     */
    void pushed(int partition, int server, LongArrayList addresses, LongArrayList versions) {
        if (addresses.isEmpty()) {
            return;
        }
        Chain[] row = chains[partition];
        synchronized (row) {
            Chain chain = row[server];
            long next = chain.first;
            long last = addresses.getLong(addresses.size() - 1);
            if (chain.headWord > 0) {
                try {
                    writeHead(chain.headWord, last);
                } catch (FabricException failed) {
                    leaked.addAndGet(addresses.size());
                    chain.reset();
                    throw failed;
                }
            }
            for (int i = 0; i < addresses.size(); i++) {
                chain.linked.addLong(addresses.getLong(i));
                chain.linked.addLong(versions.getLong(i));
                chain.linked.addLong(next);
                next = addresses.getLong(i);
            }
            chain.first = last;
        }
    }

    /**
     * A free leaf of {@code partition} on {@code server}, now off its chain, for a split; its dead image's version goes to
     * {@code version[0]}. -1 when there is none, the partition is not held, or a verb failed (the split allocates).
     */
    long take(int partition, int server, long[] version) {
        Chain[] row = chains[partition];
        synchronized (row) {
            if (!held.holds(partition)) {
                return -1;
            }
            Chain chain = row[server];
            try {
                known(partition, server, chain);
                if (chain.first == 0) {
                    return -1;
                }
                long address = chain.first;
                long next;
                int n = chain.linked.size();
                if (n > 0 && chain.linked.getLong(n - 3) == address) {
                    version[0] = chain.linked.getLong(n - 2);
                    next = chain.linked.getLong(n - 1);
                } else {
                    NodeView leaf = new NodeView(keys).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
                    memory.read(address, leaf.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
                    long[] low = new long[keys.words()];
                    leaf.lowFence(low);
                    if (!NodeMerge.isDeadLeaf(leaf, address) || GlobalAddress.serverId(address) != server
                            || partitions.get().partitionOf(low) != partition) {
                        LOG.warn("the free leaves of partition {} on memory server {} end early: {} is not a dead leaf of that"
                                + " partition; the rest of that chain is not reused", partition, server, GlobalAddress.toString(address));
                        chain.first = 0;
                        return -1;
                    }
                    version[0] = leaf.version();
                    next = NodeMerge.nextFree(leaf);
                    inherited.incrementAndGet();
                }
                if (chain.headWord > 0) {
                    // Off the chain before it is written as a live node: a crash from here on leaks it, never reuses it twice.
                    writeHead(chain.headWord, next);
                }
                if (n > 0 && chain.linked.getLong(n - 3) == address) {
                    chain.linked.removeAt(n - 1);
                    chain.linked.removeAt(n - 2);
                    chain.linked.removeAt(n - 3);
                }
                chain.first = next;
                reused.incrementAndGet();
                return address;
            } catch (FabricException failed) {
                // Whether the head moved is not known: read it again next time. At worst the leaf leaks.
                chain.reset();
                return -1;
            }
        }
    }

    /** Forgets what this engine knows of {@code partition}'s chains: it is not held any more. */
    void forget(int partition) {
        Chain[] row = chains[partition];
        synchronized (row) {
            for (Chain chain : row) {
                if (chain.headWord == 0) {
                    leaked.addAndGet(chain.linkedCount()); // kept in this engine only: nobody else can reuse them
                }
                chain.reset();
            }
        }
    }

    /**
     * {@code partition} left the table (merged into its left neighbour, PartitionMerges): its chains are cut and their
     * leaves leaked, so that a later partition under its id does not meet them. A failed verb leaves a chain as it was:
     * the id's next owner stops at its first leaf, with a warning.
     */
    void cut(int partition) {
        Chain[] row = chains[partition];
        synchronized (row) {
            for (int server : memory.memoryServerIds()) {
                Chain chain = row[server];
                try {
                    known(partition, server, chain);
                    if (chain.first != 0) {
                        if (chain.headWord > 0) {
                            writeHead(chain.headWord, 0);
                        }
                        leaked.addAndGet(Math.max(1, chain.linkedCount()));
                    }
                } catch (FabricException failed) {
                    LOG.debug("the free leaves of partition {} on memory server {} were not cut: {}", partition, server,
                            failed.toString());
                }
                chain.reset();
            }
        }
    }

    /** Free leaves this engine linked and has not reused, for {@code partition} (not those it inherited unread). */
    int linkedCount(int partition) {
        Chain[] row = chains[partition];
        synchronized (row) {
            int n = 0;
            for (Chain chain : row) {
                n += chain.linkedCount();
            }
            return n;
        }
    }

    /** Leaves reused; of those, the ones another owner freed; and leaves leaked. */
    long[] counts() {
        return new long[] {reused.get(), inherited.get(), leaked.get()};
    }

    private Chain known(int partition, int server, Chain chain) {
        if (chain.known) {
            return chain;
        }
        if (chain.headWord == UNKNOWN) {
            chain.headWord = OwnershipTable.freeHead(memory, server, partition);
        }
        chain.first = chain.headWord == 0 ? 0 : memory.readLong(chain.headWord);
        chain.linked.clear();
        chain.known = true;
        return chain;
    }

    private void writeHead(long headWord, long first) {
        UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
        word.putLong(0, first, ORDER);
        memory.write(headWord, word, 0, Long.BYTES);
    }

    /**
     * Checks every free chain of the tree in {@code memory} (an administrator's connection, with no owner at work): each
     * leaf on a chain is a whole dead leaf on the chain's server, on no other chain and reachable from no node of the
     * tree. Returns the chains' leaves per partition.
     *
     * @throws IllegalStateException naming the first leaf that breaks it
     */
    public static long[] validate(RemoteMemory memory) {
        Superblock.Contents superblock = Superblock.read(memory);
        KeyFormat keys = superblock.keyFormat();
        NodeView node = new NodeView(keys).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        Set<Long> reachable = new HashSet<>();
        List<Long> pending = new ArrayList<>(List.of(superblock.root()));
        while (!pending.isEmpty()) {
            long address = pending.remove(pending.size() - 1);
            reachable.add(address);
            memory.read(address, node.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
            for (int i = 0; !node.isLeaf() && i <= node.count(); i++) {
                pending.add(node.child(i));
            }
        }
        int partitions = dev.dex.core.partition.PartitionTable.load(memory).idLimit();
        long[] lengths = new long[partitions];
        Set<Long> seen = new HashSet<>();
        for (int server : memory.memoryServerIds()) {
            for (int p = 0; p < partitions; p++) {
                long headWord = OwnershipTable.freeHead(memory, server, p);
                for (long address = headWord == 0 ? 0 : memory.readLong(headWord); address != 0; address = NodeMerge.nextFree(node)) {
                    memory.read(address, node.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
                    String where = "free leaf " + GlobalAddress.toString(address) + " of partition " + p + " on server " + server;
                    if (!NodeMerge.isDeadLeaf(node, address) || GlobalAddress.serverId(address) != server) {
                        throw new IllegalStateException(where + " is not a dead leaf of that server: " + node);
                    }
                    if (reachable.contains(address)) {
                        throw new IllegalStateException(where + " is reachable from the tree");
                    }
                    if (!seen.add(address)) {
                        throw new IllegalStateException(where + " is on a chain twice");
                    }
                    lengths[p]++;
                }
            }
        }
        return lengths;
    }
}
