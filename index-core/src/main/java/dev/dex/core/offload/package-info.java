/**
 * Offloading (paper §6, {@code docs/offloading.md}): running the rest of a missed operation on the memory node that
 * holds its subtree. The compute side decides with {@link dev.dex.core.offload.CostModel} and
 * {@link dev.dex.core.offload.OffloadSettings} and sends an {@link dev.dex.core.offload.OffloadRequest} through an
 * {@link dev.dex.core.offload.OffloadChannel} (in process: {@link dev.dex.core.offload.LocalOffloadChannel}; over a
 * fabric's messages: {@link dev.dex.core.offload.MessageOffloadChannel}); the memory side runs it with
 * {@link dev.dex.core.offload.SubtreeExecutor} ({@link dev.dex.core.offload.OffloadMessageHandler} decodes it,
 * {@link dev.dex.core.offload.OffloadMessageDescriptor} is the message layout).
 *
 * <p>May use {@code core.node}, {@code core.tree}, {@code core.partition} (the ownership table the executor checks)
 * and {@code dev.dex.rdma}. The DEX engine ({@code core.cache}) is its compute-side client; memory nodes host the
 * executor.
 */
package dev.dex.core.offload;
