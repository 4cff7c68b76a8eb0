/**
 * The engine benchmark ({@code dex bench}, docs/benchmarks.md): bulk-loads a tree, runs one of the paper's YCSB-style
 * workloads against an engine mode (baseline, partitioned, sherman, the DEX modes with and without offloading, and a
 * skip list as the no-fabric reference) on engines in this JVM, one per compute node, and reports throughput,
 * latency percentiles and verbs per operation, the paper's Table 2 measure. It also owns the fabric's own benchmark
 * ({@code --verbs}), the takeover benchmark ({@code --takeover}), the checks after a run with injected faults, and
 * {@code dex reproduce}, the paper's experiments scaled down as CSVs and plots.
 *
 * <p>It may use {@code dev.dex.core} and {@code dev.dex.rdma} (it runs the engines directly, over the {@code local}
 * or {@code tcp} fabric), picocli and the reporting libraries; never the actors or the cluster, so an engine's
 * figures carry no actor overhead. What needs a cluster is handed in: {@code dex reproduce}'s repartitioning
 * timeline is a callback the cluster's command line passes, and {@code dex bench --cluster} lives in the cluster
 * module and calls back here for its engine baseline.
 */
package dev.dex.bench;
