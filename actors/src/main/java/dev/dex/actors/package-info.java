/**
 * What the role packages of the actors module share, and nothing else: {@link dev.dex.actors.CborSerializable}, the
 * marker that binds a message to Jackson CBOR ({@code reference.conf} binds it by this name), and
 * {@link dev.dex.actors.DexMetrics}, the one Prometheus registry of an actor system, which clients, partitions and both
 * node roles record into.
 *
 * <p>The module runs the DEX engine ({@code index-core}) as a Pekko cluster, in the paper's roles: memory nodes that
 * hold the tree in disaggregated memory, compute nodes that own logical partitions of it and cache them, and clients.
 * Its packages depend on each other in one direction only, so that each can be read, and changed, knowing only what
 * lies below it:
 * <pre>
 * dev.dex.actors.client      the user's side: DexClient and its Java API
 *      uses node, partition, and this package
 * dev.dex.actors.node        MemoryNode and ComputeNode, and what only they need
 *      uses partition, and this package
 * dev.dex.actors.partition   the logical partition as a sharded entity, and its protocol
 *      uses this package
 * dev.dex.actors             this package: uses nothing else of the module
 * </pre>
 * {@code PackageDependenciesTest} holds the module to this. A class belongs here only if more than one of those
 * packages needs it and it needs none of them; otherwise it lives with its users.
 */
package dev.dex.actors;
