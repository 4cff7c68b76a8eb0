package dev.dex.rdma;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A {@link RemoteMemory} that passes every call to another one: the base of decorators that watch or
 * record verbs (a subclass overrides only the calls it cares about and calls {@code super}).
 *
 * <p>Thread-safe as far as the delegate is; it keeps no state of its own.
 */
public abstract class ForwardingRemoteMemory implements RemoteMemory {
    private final RemoteMemory delegate;

    protected ForwardingRemoteMemory(RemoteMemory delegate) {
        if (delegate == null) {
            throw new IllegalArgumentException("nothing to forward to");
        }
        this.delegate = delegate;
    }

    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        delegate.read(address, dst, dstOffset, length);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        delegate.write(address, src, srcOffset, length);
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        return delegate.compareAndSwap(address, expected, desired);
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        return delegate.fetchAndAdd(address, delta);
    }

    /**
     * Starts {@code batch} on the delegate, keeping its verbs in flight together, for a subclass that watches a batch
     * as a whole ({@link VerbBatch#onCompletion}). The default {@link #start} runs each verb through this object's
     * own verbs instead, so that a subclass that overrides a verb sees batched verbs too.
     */
    protected final void startOnDelegate(VerbBatch batch) {
        delegate.start(batch);
    }

    @Override
    public int[] memoryServerIds() {
        return delegate.memoryServerIds();
    }

    @Override
    public VerbCounters counters() {
        return delegate.counters();
    }

    @Override
    public ChunkAllocator chunkAllocator() {
        return delegate.chunkAllocator();
    }

    @Override
    public long clientId() {
        return delegate.clientId();
    }

    @Override
    public boolean fence(long clientId) {
        return delegate.fence(clientId);
    }

    @Override
    public boolean relocate(int serverId, String endpoint) {
        return delegate.relocate(serverId, endpoint);
    }

    @Override
    public void markLost(int serverId, String why) {
        delegate.markLost(serverId, why);
    }

    @Override
    public void close() {
        delegate.close();
    }
}
