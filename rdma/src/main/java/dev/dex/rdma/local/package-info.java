/**
 * The {@code local} transport: regions are off-heap buffers of this JVM, and each verb is a copy or an atomic
 * instruction on them, after an optional spun latency that stands in for the RDMA round trip (docs/fabric.md). It
 * is the fabric of the one-JVM demo, the engine benchmark and most tests: the memory and compute sides are objects
 * in one process, and nothing is serialised.
 *
 * <p>It may use {@code dev.dex.rdma} only (its {@code DirectRemoteMemory} is the load/store client it shares with
 * {@code shm}); no other package of the fabric depends on it.
 */
package dev.dex.rdma.local;
