/**
 * What every engine offers its callers, whatever it caches: {@link dev.dex.core.engine.IndexEngine} (sessions, verb
 * counters, cache hit ratio), {@link dev.dex.core.engine.IndexSession} (one thread's point operations and scans on
 * keys of the index's width), {@link dev.dex.core.engine.WordKeySession} (the key handling sessions share) and
 * {@link dev.dex.core.engine.PartitionNotHeldException} (a key whose partition this engine does not serve now).
 *
 * <p>Implemented by the baseline tree ({@code core.tree}) and the DEX engine ({@code core.cache}); called by the
 * actors, the benchmark and the tests. May use {@code core.node} and {@code dev.dex.rdma} only.
 */
package dev.dex.core.engine;
