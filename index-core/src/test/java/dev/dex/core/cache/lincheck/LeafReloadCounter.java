package dev.dex.core.cache.lincheck;

import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

import org.agrona.MutableDirectBuffer;

import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/**
 * One engine's connection, counting how often it reads again a whole leaf it read before that lies in a
 * partition it holds. Such a leaf is single-writer and, with leaf admission 1.0, cached on its first
 * read whenever a frame can be had: it is read again after its frame was evicted (or when no frame could
 * be had, or when admission lost a race with a change of the parent). Every verb goes to the connection.
 *
 * <pre>
 * Concurrency: the engine's threads read concurrently; the set of addresses read is a concurrent set,
 * the count an adder. Node images are inspected in the caller's buffer right after the read.
 * </pre>
 */
final class LeafReloadCounter extends ForwardingRemoteMemory {
    private final PartitionTable partitions;
    private final int engine;
    private final PartitionedKeyLayout layout;
    private final Set<Long> leavesRead = ConcurrentHashMap.newKeySet();
    private final LongAdder reloads = new LongAdder();

    LeafReloadCounter(RemoteMemory memory, PartitionedKeyLayout layout, int engine) {
        super(memory);
        this.layout = layout;
        this.partitions = layout.partitions();
        this.engine = engine;
    }

    /** Reads of a leaf held by this engine that this connection had read before. */
    long reloads() {
        return reloads.sum();
    }

    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        super.read(address, dst, dstOffset, length);
        if (length == NODE_LENGTH) {
            NodeView node = new NodeView(layout.format()).wrap(dst, dstOffset);
            int owner = partitions.ownerOf(node);
            if (node.isLeaf() && owner >= 0 && layout.engineOfPartition(owner) == engine && !leavesRead.add(address)) {
                reloads.increment();
            }
        }
    }
}
