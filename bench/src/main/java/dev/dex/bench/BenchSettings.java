package dev.dex.bench;

import java.nio.file.Path;

import dev.dex.rdma.FaultPlan;

/**
 * A validated benchmark configuration (see {@link BenchCommand} for each setting's meaning).
 *
 * @param cacheRatio cache size per compute node as a fraction of the bulk-loaded tree's bytes, or NaN
 *                   when {@code cacheBytes} is given
 * @param cacheBytes cache size per compute node in bytes, or -1 when {@code cacheRatio} is given
 * @param memoryThreads memory-side offload threads per memory node
 * @param fabric     {@code local} (regions in this JVM) or {@code tcp} (a memory side in this JVM served over
 *                   loopback TCP to a compute side with its own event loops)
 * @param json       where to write the JSON result, or null
 * @param commitBatch operations of one partition per commit (group commit); 1: each operation commits alone
 * @param keyBytes   the width of the index's keys (8 to 64, a multiple of 8)
 * @param faults     the faults injected into the engines' verbs, or null for none (then no end-of-run checks)
 * @param replicas   memory nodes per memory server ({@code tcp} only)
 * @param copyUnderLoad with {@code replicas > 1}: the backups are copied a third of the way into the measured run, not
 *                   before the load
 * @param copyRate   bytes per second a primary copies to its backups ({@code dex.memory.copy-rate})
 */
record BenchSettings(Workload workload, Mode mode, Distribution distribution, double theta, long keys, long ops,
                   long warmup, int threads, double cacheRatio, long cacheBytes, int computeNodes,
                   int memoryNodes, int memoryThreads, int partitions, long latencyNs, String fabric, long seed, Path json,
                   boolean redoLog, int commitBatch, double leafAdmission, int keyBytes, FaultPlan faults, int replicas,
                   boolean copyUnderLoad, long copyRate) {

    /** Settings without replica groups (one copy of each memory server). */
    BenchSettings(Workload workload, Mode mode, Distribution distribution, double theta, long keys, long ops,
                  long warmup, int threads, double cacheRatio, long cacheBytes, int computeNodes,
                  int memoryNodes, int memoryThreads, int partitions, long latencyNs, String fabric, long seed, Path json,
                  boolean redoLog, int commitBatch, double leafAdmission, int keyBytes, FaultPlan faults) {
        this(workload, mode, distribution, theta, keys, ops, warmup, threads, cacheRatio, cacheBytes, computeNodes, memoryNodes,
                memoryThreads, partitions, latencyNs, fabric, seed, json, redoLog, commitBatch, leafAdmission, keyBytes, faults, 1,
                false, dev.dex.rdma.tcp.ReplicaSettings.DEFAULTS.copyRate());
    }

    /** Whether the DEX engines tune P_A themselves ({@code --leaf-admission auto}). */
    boolean tunesLeafAdmission() {
        return leafAdmission == dev.dex.core.cache.DexEngineSettings.AUTO_LEAF_ADMISSION;
    }

    /** The cache bytes per compute node for a tree of {@code treeBytes}. */
    long cacheBytesFor(long treeBytes) {
        return cacheBytes >= 0 ? cacheBytes : (long) Math.ceil(cacheRatio * treeBytes);
    }

    /** The cache ratio for a tree of {@code treeBytes}, whichever way the cache size was given. */
    double cacheRatioFor(long treeBytes) {
        return cacheBytes >= 0 ? (double) cacheBytes / treeBytes : cacheRatio;
    }
}
