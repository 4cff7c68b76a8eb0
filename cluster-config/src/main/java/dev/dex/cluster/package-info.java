/**
 * Configuration and launch of a DEX cluster: the {@code dex.*} settings no lower module reads (its
 * {@code reference.conf}; rdma's and index-core's hold the fabric's and the engine's), every one read and checked once by
 * {@link dev.dex.cluster.DexSettings} through the lower modules' settings classes, the Pekko cluster's settings ({@code dex-cluster.conf} and one file
 * per role), starting a memory node, a compute node or a client in an actor system of its own
 * ({@link dev.dex.cluster.DexNodes}), a memory node's process that outlives its actor system's downing and rejoins
 * the members it remembers ({@code MemoryNodeProcess}, {@code ClusterContacts}, docs/replication.md), mutual TLS certificates, the operator's HTTP endpoint, and the {@code dex}
 * command line with its in-JVM demo (docs/architecture.md, docs/cluster.md, docs/operations.md).
 *
 * <p>It is the top of the dependency graph: it may use {@code dev.dex.actors} (the nodes it starts),
 * {@code dev.dex.core} and {@code dev.dex.rdma} (the demo loads the tree itself), {@code dev.dex.bench} (the
 * {@code bench} and {@code reproduce} commands and the cluster bench's engine baseline), Pekko and Pekko
 * Management, Typesafe Config, Logback (to quiet the warnings of a graceful leave), picocli and the reporting
 * libraries. Only the YCSB binding and the multi-JVM tests depend on it; the engine and
 * the actors never do, so they run with any launcher.
 */
package dev.dex.cluster;
