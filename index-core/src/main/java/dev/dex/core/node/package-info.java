/**
 * Keys and the 1 KiB tree node: how a key of 8 to 64 bytes becomes the engine's words and back
 * ({@link dev.dex.core.node.Keys}, {@link dev.dex.core.node.KeyFormat}), the node's binary layout
 * ({@link dev.dex.core.node.NodeHeaderDescriptor}, and {@code KeyFormat} for the payload of each key width), the
 * flyweight that reads and edits a node image in place ({@link dev.dex.core.node.NodeView}), and the point operations'
 * codes and effect on a leaf ({@link dev.dex.core.node.LeafOps}). See {@code docs/keys.md} and
 * {@code docs/baseline-tree.md}.
 *
 * <p>The bottom of {@code index-core}: every other package of it uses this one; it uses only Agrona's buffers.
 */
package dev.dex.core.node;
