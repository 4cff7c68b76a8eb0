/**
 * The DEX engine: one compute node's cache of tree nodes and the operations that run through it (paper §4-§6,
 * {@code docs/dex-cache.md}). Everything a newcomer looks for under "the DEX cache" is here, in four groups:
 *
 * <ul>
 *   <li><b>Its face</b>: {@link dev.dex.core.cache.DexEngine} (one per compute node; what the sessions share),
 *       {@link dev.dex.core.cache.DexSession} (one per thread; lookup, insert, update, put, delete, scan),
 *       {@link dev.dex.core.cache.DexEngineSettings} and {@link dev.dex.core.cache.EngineMode} (what it caches and
 *       offloads), {@link dev.dex.core.cache.CacheStats} and {@code SessionCounters} (what it did).</li>
 *   <li><b>Frames and eviction</b> (§4.1-§4.3): {@code FrameArena} and {@code FrameHeaderDescriptor} (the local
 *       frames and their version locks), {@code FrameSupply} and {@code FrameWriter} (taking a frame, writing a
 *       dirty one back), {@code CoolingMap} (path-aware cooling), {@code MappingTable} (remote address to frame),
 *       {@code Admission} (lazy leaf admission, P_A), {@code Flush} (write-back and drop of a partition's frames).</li>
 *   <li><b>Descent and writes</b>: {@code SessionPath} (the path a descent keeps), {@code Markers} (the nodes an
 *       operation holds), {@code PublishedKey} (the key a session works on, for the offload exclusion),
 *       {@code LeafWrites} (a write in a cached leaf), {@code StructureChanges} (splits and root growth, owned and
 *       shared, and their failure paths).</li>
 *   <li><b>Its clients of the memory side</b>: {@code Offloader} and {@code OffloadExclusion} (§6: sending a miss to
 *       the memory node, and keeping a cached node out of an offloaded write's way), {@code RemoteChanges} (what
 *       this engine changed remotely), {@code GroupCommit} (the redo-log appends of a session's writes).</li>
 *   <li><b>Partitions and failures</b>: {@code HeldPartitions} (the gate every operation passes; acquire, release,
 *       abandon, checkpoints: logical repartitioning on the compute side), {@code WriteFailures} (failed writing
 *       verbs), {@code InstanceRegistry} (which cluster member runs which engine instance, for lock takeover).</li>
 * </ul>
 *
 * <p>The face is public, and so is {@code FrameHeaderDescriptor}, whose frame states the linearizability tests (a
 * sub-package) read; the rest is package-private and stays so. May use {@code core.engine},
 * {@code core.node}, {@code core.tree}, {@code core.partition}, {@code core.log}, {@code core.offload} and
 * {@code dev.dex.rdma}; nothing in {@code index-core} uses this package.
 */
package dev.dex.core.cache;
