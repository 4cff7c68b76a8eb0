/**
 * Logical partitions (paper §5): the key ranges that make the nodes inside one partition single-writer, and what
 * fences an owner that lost one. {@link dev.dex.core.partition.PartitionTable} is the table of ranges and its copy in
 * the superblock; {@link dev.dex.core.partition.Partitioning} chooses bounds from a loaded tree;
 * {@link dev.dex.core.partition.PartitionedEngine} is an engine that serves only the partitions it holds (acquire,
 * release); {@link dev.dex.core.partition.OwnershipTable} is the owner epoch of each partition on every memory server,
 * which fences a stale owner's offloads.
 *
 * <p>May use {@code core.node}, {@code core.tree}, {@code core.engine} and {@code dev.dex.rdma}. The DEX engine
 * ({@code core.cache}) implements {@code PartitionedEngine}; the actors assign partitions to compute nodes.
 */
package dev.dex.core.partition;
