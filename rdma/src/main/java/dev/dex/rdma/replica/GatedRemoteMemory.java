package dev.dex.rdma.replica;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;

/**
 * One client's connection to one replica, in one view: every verb passes the replica's {@link ViewGate} with that view,
 * so it is refused once the replica is in a newer view or gone. A batch passes the gate once, as a whole.
 *
 * <p>Thread-safe as far as the delegate is.
 */
public final class GatedRemoteMemory extends ForwardingRemoteMemory {
    private final ViewGate gate;
    private final long view;

    public GatedRemoteMemory(RemoteMemory delegate, ViewGate gate, long view) {
        super(delegate);
        this.gate = gate;
        this.view = view;
    }

    /** The view this connection sends its verbs in. */
    public long view() {
        return view;
    }

    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        gate.read(view, () -> super.read(address, dst, dstOffset, length));
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        gate.run(view, () -> {
            super.write(address, src, srcOffset, length);
            return null;
        });
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        return gate.run(view, () -> super.compareAndSwap(address, expected, desired));
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        return gate.run(view, () -> super.fetchAndAdd(address, delta));
    }

    /**
     * Passes the gate once for the whole batch, which runs on the delegate with its verbs in flight together and is
     * awaited before the gate lets a view change through. Refused, every verb fails as the single verb would.
     */
    @Override
    public void start(VerbBatch batch) {
        try {
            gate.run(view, () -> {
                startOnDelegate(batch);
                batch.await();
                return null;
            });
        } catch (FabricException refused) {
            batch.started();
            for (int slot = 0; slot < batch.size(); slot++) {
                batch.fail(slot, refused);
            }
        }
    }
}
