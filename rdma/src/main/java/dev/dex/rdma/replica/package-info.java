/**
 * Replica groups written by the compute side: the write path of the transports whose memory nodes never see a verb
 * ({@code local}, {@code shm}, {@code disni}), where the primary's CPU cannot order and forward the changes as the
 * {@code tcp} region server does. A {@link dev.dex.rdma.replica.ReplicatedRemoteMemory} reads from a server's primary
 * and makes every change on every replica of its view before the change counts; a
 * {@link dev.dex.rdma.replica.RegionCopier} brings a new replica up to date while clients write; a
 * {@link dev.dex.rdma.replica.ViewGate} makes a replica refuse the verbs of an older view. The rules and the argument
 * that they keep every acknowledged change and every lock across a failover are in docs/replication.md
 * ("The compute-side write path").
 */
package dev.dex.rdma.replica;
