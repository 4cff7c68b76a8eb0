/**
 * The logical partition, DEX's unit of ownership (paper §4): a compute node that holds a partition is the only writer
 * of the tree nodes inside it, so it caches them without remote locks or coherence traffic, and moving a partition to
 * another compute node is repartitioning. Here a partition is a Pekko sharded entity, one shard per partition
 * ({@link dev.dex.actors.partition.Partition}): sharding's handoff is the move, the old owner writing its dirty pages
 * back before it releases the partition, the new one acquiring it (and replaying its redo log when the old owner did
 * not give it up).
 *
 * <p>Owns the entity; the worker threads its batches run on ({@link dev.dex.actors.partition.EngineWorkers}); the
 * compute node's {@link dev.dex.actors.partition.PartitionRouter}, which takes the batches of many partitions in one
 * message; where shards may move ({@link dev.dex.actors.partition.ProbedRebalance}); and the partition's protocol: the
 * operations and their results ({@link dev.dex.actors.partition.Ops}), the binary layout of the batches and answers
 * ({@link dev.dex.actors.partition.BatchSerializer}, bound in {@code reference.conf}) and the bounds every sender of
 * them keeps to ({@link dev.dex.actors.partition.WireLimits}).
 *
 * <p>Uses {@code dev.dex.actors} ({@code CborSerializable}, {@code DexMetrics}), {@code index-core} and {@code rdma};
 * never the node or client packages, which are built on it: a compute node hosts these entities and a client sends
 * them batches, so the protocol both speak lives here. What they need of it is public; the rest, such as how a batch
 * runs on a worker, stays package-private.
 */
package dev.dex.actors.partition;
