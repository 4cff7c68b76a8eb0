/**
 * The {@code disni} transport: reads and writes are real one-sided RDMA READs and WRITEs through DiSNI, one reliable
 * connection per memory server, so the memory node's CPU takes no part in them (docs/rdma-disni.md). The regions,
 * compare-and-swap and fetch-and-add belong to a control fabric ({@code tcp} in production), because DiSNI never
 * passes an atomic work request's arguments to the device.
 *
 * <p>It owns the region descriptor a memory node advertises, the per-client grants of memory keys asked for over the
 * control fabric, fencing by revoking a client's own keys, the verbs' completion slots and staging buffers, and the
 * device checks that say why the transport cannot start.
 *
 * <p>It may use {@code dev.dex.rdma}, {@code dev.dex.rdma.tcp} (the control fabric and its fence listener), DiSNI,
 * Agrona, SLF4J and Typesafe Config (its defaults, in this module's reference.conf). Nothing in the fabric depends on it.
 */
package dev.dex.rdma.disni;
