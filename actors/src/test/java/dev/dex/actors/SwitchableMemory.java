package dev.dex.actors;

import org.agrona.DirectBuffer;

import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/** A connection to the memory pool that counts remote writes and fails them all while told to (an unreachable memory node). */
final class SwitchableMemory extends ForwardingRemoteMemory {
    volatile boolean failWrites;
    volatile int writes;

    SwitchableMemory(RemoteMemory delegate) {
        super(delegate);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        if (failWrites) {
            throw new IllegalStateException("memory node unreachable");
        }
        writes++;
        super.write(address, src, srcOffset, length);
    }
}
