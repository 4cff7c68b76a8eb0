/**
 * The B+-tree in remote memory and its remote protocol (paper §2.2, {@code docs/baseline-tree.md}): the superblock
 * ({@link dev.dex.core.tree.Superblock}, {@link dev.dex.core.tree.SuperblockDescriptor}), node allocation
 * ({@link dev.dex.core.tree.NodeAllocator}), the one-sided node protocol every engine uses on a miss: validated
 * reads, remote locks, lock takeover and pending unlocks ({@link dev.dex.core.tree.RemoteNodes},
 * {@link dev.dex.core.tree.PendingUnlocks}, {@code SpinBackoff}, {@link dev.dex.core.tree.RestartBudget}), bulk load
 * ({@link dev.dex.core.tree.BulkLoader}), the baseline engine that caches nothing
 * ({@link dev.dex.core.tree.BaselineTree}), and the structural validator run after tests and benchmarks
 * ({@link dev.dex.core.tree.TreeValidator}).
 *
 * <p>May use {@code core.node}, {@code core.engine} and {@code dev.dex.rdma}; knows nothing of partitions, logs,
 * offloading or caching, which build on it.
 */
package dev.dex.core.tree;
