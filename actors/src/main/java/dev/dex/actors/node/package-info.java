/**
 * The two roles a process plays in the cluster, as the paper splits disaggregated memory.
 * {@link dev.dex.actors.node.MemoryNode} exports a region of the memory pool through the fabric and runs the operations
 * compute nodes offload to it (paper §6); memory server 0 formats the tree. {@link dev.dex.actors.node.ComputeNode}
 * finds the memory nodes, connects the fabric, opens the DEX engine and hosts the sharded partitions on its worker
 * threads. A memory node fences the compute nodes the cluster downs; a compute node that finds itself fenced, or whose
 * writes keep failing, leaves the cluster so that its partitions move; it does not while a memory node is out of the
 * cluster, and follows a memory node that comes back at another endpoint. A memory node's region
 * ({@link dev.dex.actors.node.MemoryRegion}) may outlive the actor: its process keeps serving it when the cluster downs
 * the actor system around it (docs/replication.md).
 *
 * <p>Owns, besides the two actors, what only they need: which fabric a node uses and the identity it greets memory
 * nodes with ({@link dev.dex.actors.node.Fabrics}), the pauses of their start-up handshakes
 * ({@link dev.dex.actors.node.Backoff}), whether a node is ready ({@link dev.dex.actors.node.NodeHealth}, Pekko
 * Management's readiness check, named in {@code dex-cluster.conf}), the offload channel over actor messages and the
 * answering of batches sharding drops while a partition moves (both package-private, used by the compute node only),
 * and {@link dev.dex.actors.node.MemoryNodes}, which finds the memory nodes for bulk loaders outside the actors.
 *
 * <p>Uses {@code dev.dex.actors.partition} (a compute node hosts the partitions) and {@code dev.dex.actors}, besides
 * {@code index-core} and {@code rdma}; never {@code dev.dex.actors.client}: a client asks a compute node for the
 * partition table, not the other way round.
 */
package dev.dex.actors.node;
