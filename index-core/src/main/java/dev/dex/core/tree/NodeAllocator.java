package dev.dex.core.tree;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.rdma.ChunkAllocator;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;

/**
 * Allocates 1 KiB nodes for one tree instance: bump allocation inside chunks taken from each memory
 * server, and the placement rule that keeps every subtree rooted at level M on one memory server.
 *
 * <p>Placement: a node at level {@code <= M} goes on the server of the node it is split from (its
 * sibling), because its children are moved from that sibling; a node above level M goes round robin.
 * Nodes are never freed here: the DEX engine reuses the leaves it merged away itself ({@code Merges}).
 *
 * <p>Concurrency: {@link #allocate} is synchronized per instance. It runs once per split, which is
 * rare next to lookups and updates; the chunk refill inside it is one fetch-and-add.
 */
public final class NodeAllocator {
    private final ChunkAllocator chunks;
    private final int[] servers;
    private final int subtreeLevel;
    private final long[] next;
    private final long[] end;
    private int roundRobin;

    public NodeAllocator(RemoteMemory memory, int subtreeLevel) {
        this.chunks = memory.chunkAllocator();
        this.servers = memory.memoryServerIds();
        this.subtreeLevel = subtreeLevel;
        int maxId = servers[servers.length - 1];
        this.next = new long[maxId + 1];
        this.end = new long[maxId + 1];
    }

    public int[] servers() {
        return servers;
    }

    /** A node for a split of {@code sibling}, a node at {@code level}. */
    public long allocateFor(int level, long sibling) {
        if (level <= subtreeLevel) {
            return allocate(GlobalAddress.serverId(sibling));
        }
        return allocateRoundRobin();
    }

    public synchronized long allocateRoundRobin() {
        int server = servers[Math.floorMod(roundRobin++, servers.length)];
        return allocate(server);
    }

    /** A node on {@code serverId}. */
    public synchronized long allocate(int serverId) {
        if (next[serverId] == end[serverId]) {
            long chunk = chunks.allocateChunk(serverId);
            next[serverId] = chunk;
            end[serverId] = chunk + chunks.chunkLength(serverId);
        }
        long address = next[serverId];
        next[serverId] += NodeHeaderDescriptor.NODE_LENGTH;
        return address;
    }
}
