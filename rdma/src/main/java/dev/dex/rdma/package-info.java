/**
 * The fabric: how compute nodes reach the memory pool of disaggregated memory with one-sided verbs, and what every
 * transport shares (docs/fabric.md).
 *
 * <p>It owns the concepts the rest of DEX is written against: {@link dev.dex.rdma.GlobalAddress global addresses}
 * (a memory server id and an offset in its region, the swizzle bit reserved for the cache); the
 * {@link dev.dex.rdma.RemoteMemory one-sided verbs} (read, write, compare-and-swap, fetch-and-add) with their
 * completion and atomicity contract, and the two-sided messages offloading uses
 * ({@link dev.dex.rdma.MessageSender}, {@link dev.dex.rdma.MessageHandler}); {@link dev.dex.rdma.Region regions}
 * and their header; {@link dev.dex.rdma.ChunkAllocator chunk allocation} by one fetch-and-add on that header;
 * fencing a client ({@link dev.dex.rdma.RemoteMemory#fence}, {@link dev.dex.rdma.FencedException});
 * {@link dev.dex.rdma.VerbCounters verb counters}; and failed verbs, both as the contract states them
 * ({@link dev.dex.rdma.FabricException}) and as {@link dev.dex.rdma.FaultInjectingRemoteMemory injected faults}.
 * {@link dev.dex.rdma.Fabric} is the SPI a transport implements.
 *
 * <p>It may use the JDK and Agrona only. It knows nothing of trees (index-core builds on it, never the other way)
 * and nothing of its transports: {@code local}, {@code shm}, {@code tcp} and {@code disni} depend on this package,
 * so a new transport changes nothing here.
 */
package dev.dex.rdma;
