/**
 * The user's side of the cluster: what a process runs to read and write the index.
 * {@link dev.dex.actors.client.DexClient} is an actor that learns the partition table from a compute node and sends
 * each operation to the logical partition that holds its key, batched per partition, in the order it received them,
 * and retried when a partition moves, is busy or does not answer. Every batch goes to one partition (through a
 * sharding proxy, or bundled for the router of the compute node that last answered for it) and names the owner epoch
 * it was sent for, so that a late attempt is refused rather than applied under another owner.
 * {@link dev.dex.actors.client.DexClientApi} is the actor's Java face in the same JVM, and
 * {@link dev.dex.actors.client.DexException} what it throws when the cluster answers an error.
 *
 * <p>Package-private, because only the actor and its API use them: the per-partition batching, ordering and retry
 * state ({@code PartitionLanes}), the assembly of a scan across partitions ({@code ScanProgress}, {@code Pending}) and
 * the queue an API fills for its actor ({@code Submissions}).
 *
 * <p>Uses {@code dev.dex.actors.partition} (the partitions' messages and sharding key), {@code dev.dex.actors.node}
 * (the compute node's protocol, for the partition table) and {@code dev.dex.actors}; nothing in the module uses it.
 */
package dev.dex.actors.client;
