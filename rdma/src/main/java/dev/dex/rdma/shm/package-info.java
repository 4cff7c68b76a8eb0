/**
 * The {@code shm} transport: each region is a file under a directory (a tmpfs, {@code /dev/shm/dex} by default) that
 * every process of a host maps shared, so verbs are loads, stores and atomic instructions on the mapping and the
 * memory node's process takes no part in them: one-sided in the paper's sense, across processes (docs/fabric.md).
 *
 * <p>It owns the region file's lifecycle: export by an atomic rename of a formatted file, the per-server lock that
 * refuses a second memory node of the same id, reattaching to a region a stopped memory node left, and the owner-only
 * directory. It cannot fence: a mapping cannot be revoked from another process (docs/durability.md).
 *
 * <p>It may use {@code dev.dex.rdma}, Agrona and Typesafe Config (its default directory). The {@code tcp} transport uses it to keep a region in a file that a
 * restarted memory node reattaches to.
 */
package dev.dex.rdma.shm;
