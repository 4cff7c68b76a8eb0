package dev.dex.core.cache;

import org.agrona.DirectBuffer;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/**
 * Watches the engine's writing verbs (write, compare-and-swap, fetch-and-add) for failures ({@link FabricException}),
 * for two decisions ({@code docs/durability.md}, "When a verb fails"):
 * <ul>
 *   <li>whether the engine may give a partition up without being fenced: a write whose answer was lost may still
 *       land later, after a new owner started, so once one failed the next owner must fence this engine instead
 *       ({@link #since});</li>
 *   <li>whether the engine is healthy: writes that keep failing for longer than the node's
 *       {@code write-back-timeout} make the compute node report itself not ready and leave
 *       ({@link #failingSinceNanos}).</li>
 * </ul>
 * In an engine that offloads, it also records each of those verbs in {@link RemoteChanges} after the verb returned or
 * failed, for one-message lookups: here rather than in a layer of its own, so that reads pass through no more layers
 * than in an engine that never offloads.
 *
 * <pre>
 * Concurrency: called by every thread that issues verbs. The failure count is an atomic counter, and each thread
 * counts its own failures again in a thread-local cell that no other thread touches; the start of the
 * current run of failures is a volatile word that a failure sets when it is 0 and any successful write clears
 * (a success costs one volatile read when nothing is failing); the same per memory server in an atomic array (one
 * more plain-volatile read per success). Races between a success and a failure at the same
 * moment leave either value, both true of some instant.
 * </pre>
 */
final class WriteFailures extends ForwardingRemoteMemory {
    private final java.util.concurrent.atomic.AtomicLong failures = new java.util.concurrent.atomic.AtomicLong();
    /** The failures of each thread, in a cell only that thread reads and writes. */
    private final ThreadLocal<long[]> failuresOnThread = ThreadLocal.withInitial(() -> new long[1]);
    /** System.nanoTime() of the first failure since the last success, or 0. */
    private volatile long failingSince;
    private volatile Throwable last;
    /** Per memory server id: System.nanoTime() of the first failed writing verb to it since the last success, or 0. */
    private final java.util.concurrent.atomic.AtomicLongArray failingSinceByServer;

    /** Where writing verbs are recorded, or null (an engine that never offloads records nothing). */
    private final RemoteChanges changes;

    WriteFailures(RemoteMemory delegate, RemoteChanges changes) {
        super(delegate);
        this.changes = changes;
        int max = 0;
        for (int id : delegate.memoryServerIds()) {
            max = Math.max(max, id);
        }
        this.failingSinceByServer = new java.util.concurrent.atomic.AtomicLongArray(max + 1);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        try {
            super.write(address, src, srcOffset, length);
        } catch (FabricException e) {
            throw failed(e, address);
        } finally {
            changed(address);
        }
        succeeded(address);
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        long found;
        try {
            found = super.compareAndSwap(address, expected, desired);
        } catch (FabricException e) {
            throw failed(e, address);
        } finally {
            changed(address);
        }
        succeeded(address);
        return found;
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        long found;
        try {
            found = super.fetchAndAdd(address, delta);
        } catch (FabricException e) {
            throw failed(e, address);
        } finally {
            changed(address);
        }
        succeeded(address);
        return found;
    }

    /**
     * Keeps the batch's verbs in flight together on the transport, and accounts for its writing verbs once they have all
     * completed, as for single ones: each one recorded in {@link RemoteChanges}, each failure counted (on this thread,
     * which awaits), each success clearing the run of failures.
     */
    @Override
    public void start(dev.dex.rdma.VerbBatch batch) {
        batch.onCompletion(this::account);
        startOnDelegate(batch);
    }

    private void account(dev.dex.rdma.VerbBatch batch) {
        for (int slot = 0; slot < batch.size(); slot++) {
            if (!batch.writes(slot)) {
                continue;
            }
            long address = batch.address(slot);
            RuntimeException failure = batch.failure(slot);
            changed(address);
            if (failure instanceof FabricException fabric) {
                failed(fabric, address);
            } else if (failure == null) {
                succeeded(address);
            }
        }
    }

    /** Records a writing verb that returned or failed (it may have been applied) in {@link RemoteChanges}. */
    private void changed(long address) {
        if (changes != null) {
            changes.changed(address);
        }
    }

    private FabricException failed(FabricException e, long address) {
        failures.incrementAndGet();
        failuresOnThread.get()[0]++;
        last = e;
        long now = Math.max(1, System.nanoTime());
        if (failingSince == 0) {
            failingSince = now;
        }
        int server = dev.dex.rdma.GlobalAddress.serverId(address);
        if (server < failingSinceByServer.length()) {
            failingSinceByServer.compareAndSet(server, 0, now);
        }
        return e;
    }

    private void succeeded(long address) {
        if (failingSince != 0) {
            failingSince = 0;
        }
        int server = dev.dex.rdma.GlobalAddress.serverId(address);
        if (server < failingSinceByServer.length() && failingSinceByServer.get(server) != 0) {
            failingSinceByServer.set(server, 0);
        }
    }

    /** As {@link #failingSinceNanos}, for the writing verbs to memory server {@code serverId} alone (0 for an unknown one). */
    long failingSinceNanos(int serverId) {
        return serverId >= 0 && serverId < failingSinceByServer.length() ? failingSinceByServer.get(serverId) : 0;
    }

    /** Writing verbs that failed so far; compare two readings to learn whether one failed in between. */
    long count() {
        return failures.get();
    }

    /** As {@link #count()}, of the calling thread's writing verbs only. */
    long countOnThisThread() {
        return failuresOnThread.get()[0];
    }

    /** Whether a writing verb failed after the reading {@code count} of {@link #count}. */
    boolean since(long count) {
        return failures.get() != count;
    }

    /** System.nanoTime() when writes started failing with no success since, or 0 when the last one succeeded. */
    long failingSinceNanos() {
        return failingSince;
    }

    /** The last failure, or null. */
    Throwable last() {
        return last;
    }
}
