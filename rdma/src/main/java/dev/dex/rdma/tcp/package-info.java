/**
 * The {@code tcp} transport, on Netty: a memory node serves its region to other hosts, and each verb is a request
 * and an answer on a few pipelined connections per memory server (docs/fabric.md). It is how the cluster runs across
 * hosts without RDMA hardware: not one-sided (the memory node's event loops answer each verb), but with the same
 * contract as the others.
 *
 * <p>It owns the wire format ({@code TcpFrameDescriptor}), the region server with its back-pressure and refusals,
 * the client's connections, doorbell and verb timeout, the greeting that checks a region's incarnation, two-sided
 * messages (offloaded operations, the {@code disni} fabric's key grants), fencing a client at the memory node, and
 * mutual TLS on every connection (docs/security.md).
 *
 * <p>It may use {@code dev.dex.rdma}, {@code dev.dex.rdma.shm} (a region kept in a file of
 * {@code dex.fabric.tcp.region-directory}), Netty, Agrona, SLF4J and Typesafe Config (its defaults, in this module's
 * reference.conf). The {@code disni} transport uses it as its
 * control fabric.
 */
package dev.dex.rdma.tcp;
