package dev.dex.core.offload;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.MessageSender;

/**
 * Sends each phase of an offloaded operation as a two-sided message over the fabric ({@code tcp}) to the memory
 * server of its start node, whose {@link OffloadMessageHandler} runs it; the answer comes back on the same
 * connection. A message that cannot be delivered (the server has no handler, the connection broke) answers the
 * request {@link OffloadRequest#REJECTED}, so the engine falls back to its caching path. Each message carries a
 * deadline of half the sender's timeout, after which the memory server does not start it.
 *
 * <p>Concurrency: {@link #submit} runs on the compute thread and completes the request before it returns; each
 * thread encodes into buffers of its own.
 */
public final class MessageOffloadChannel implements OffloadChannel {
    private final MessageSender sender;
    private final ThreadLocal<UnsafeBuffer[]> buffers = ThreadLocal.withInitial(() -> new UnsafeBuffer[] {
        new UnsafeBuffer(BufferUtil.allocateDirectAligned(OffloadMessageDescriptor.MAX_LENGTH, 64)),
        new UnsafeBuffer(BufferUtil.allocateDirectAligned(OffloadMessageDescriptor.MAX_LENGTH, 64))});

    /** @param sender a connection to the memory servers that carries messages (its verbs are not counted here) */
    public MessageOffloadChannel(MessageSender sender) {
        this.sender = sender;
    }

    @Override
    public void submit(OffloadRequest request) {
        UnsafeBuffer[] pair = buffers.get();
        // Not started after half the sender's timeout, so never after this side gave up (OffloadMessageDescriptor).
        long timeout = sender.timeout().toNanos();
        long deadline = System.currentTimeMillis() + Math.max(1, timeout / 2_000_000);
        request.mayRunUntil(System.nanoTime() + timeout);
        int length = OffloadMessageDescriptor.encodeRequest(request, deadline, pair[0]);
        int answer;
        try {
            answer = sender.send(GlobalAddress.serverId(request.start()), pair[0], 0, length, pair[1], 0);
        } catch (IllegalArgumentException refused) {
            // Refused before it reached a handler (no such server, no handler, too long): it does not run.
            request.mayRunUntil(0);
            request.refuse();
            return;
        } catch (FabricException lost) {
            // No answer in time, or the connection broke: it may have run, or may still (mayRunUntil).
            request.refuse();
            return;
        }
        try {
            OffloadMessageDescriptor.decodeAnswer(pair[1], answer, request);
            request.mayRunUntil(0);
        } catch (IllegalArgumentException malformed) {
            request.refuse();
        }
    }

    @Override
    public void close() {
    }
}
