/**
 * Per-partition redo logs in remote memory ({@code docs/durability.md}): a ring of records per partition that the
 * owner appends to before it acknowledges a write, checkpoints as pages are written back, and a new owner replays
 * after it bumped the log's epoch and fenced the previous owner. {@link dev.dex.core.log.RedoLog} is one log,
 * {@link dev.dex.core.log.RedoLogDescriptor} its layout, {@link dev.dex.core.log.RedoLogSettings} its settings.
 *
 * <p>May use {@code core.node}, {@code core.tree}, {@code core.partition} and {@code dev.dex.rdma}; used by the DEX
 * engine ({@code core.cache}), which owns when to append, checkpoint and replay.
 */
package dev.dex.core.log;
