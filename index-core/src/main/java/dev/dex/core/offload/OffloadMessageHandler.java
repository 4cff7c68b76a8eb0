package dev.dex.core.offload;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.Region;

/**
 * The memory side of offloading over a fabric that carries messages ({@code tcp}): decodes an offloaded
 * operation's phase ({@link OffloadMessageDescriptor}), runs it with a {@link SubtreeExecutor} on the server's
 * region, and answers. The transport's threads that deliver messages are the memory-side threads. A request past
 * its deadline is answered {@link OffloadRequest#STALE} without running: its sender has given up on it.
 *
 * <p>Concurrency: each delivering thread has an executor of its own (a thread-local); the compute side keeps a
 * write's subtree to itself ({@code OffloadExclusion}), as for {@link LocalOffloadChannel}.
 */
public final class OffloadMessageHandler implements MessageHandler {
    private final ThreadLocal<SubtreeExecutor> executors;

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(OffloadMessageHandler.class);

    public OffloadMessageHandler(int serverId, Region region) {
        this(serverId, region, dev.dex.rdma.MemorySideWrites.DIRECT);
    }

    /** @param writes how offloaded writes reach the region ({@link dev.dex.rdma.ExportedRegion#memorySideWrites()}) */
    public OffloadMessageHandler(int serverId, Region region, dev.dex.rdma.MemorySideWrites writes) {
        this.executors = ThreadLocal.withInitial(() -> new SubtreeExecutor(serverId, region, writes));
    }

    @Override
    public int handle(DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
        OffloadRequest request = OffloadMessageDescriptor.decodeRequest(message, offset, length);
        long deadline = OffloadMessageDescriptor.deadline(message, offset);
        if (deadline != 0 && System.currentTimeMillis() > deadline) {
            request.status = OffloadRequest.STALE;
            return OffloadMessageDescriptor.encodeAnswer(request, reply);
        }
        SubtreeExecutor executor = executors.get();
        try {
            executor.run(request);
            if (executor.refusal() != null && SubtreeExecutor.warnNow()) {
                LOG.warn("an offloaded operation was refused: {} (at most one such line a second)", executor.refusal());
            }
        } catch (RuntimeException e) {
            // A delivering thread must outlive a bad request; the sender falls back to its caching path.
            request.status = OffloadRequest.STALE;
        }
        return OffloadMessageDescriptor.encodeAnswer(request, reply);
    }
}
