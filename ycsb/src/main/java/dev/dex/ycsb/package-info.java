/**
 * The YCSB binding (docs/ycsb.md): YCSB's {@code site.ycsb.DB} over the cluster's client API, so YCSB's own client,
 * key choosers and workloads A-F run against a running DEX cluster ({@code bin/dex ycsb load|run}). It owns the
 * mapping of YCSB's records onto 8-byte keys and values and refuses, never truncates, what does not fit.
 *
 * <p>It may use {@code dev.dex.actors} (the client API it calls), {@code dev.dex.cluster} (to start a client node
 * with the cluster's settings) and YCSB core. Nothing depends on it.
 */
package dev.dex.ycsb;
