package dev.dex.actors;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;

import dev.dex.core.offload.OffloadMessageHandler;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.core.offload.SubtreeExecutor;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeConfig;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.MemoryFullException;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * A memory node (role {@code memory}): exports its region through the fabric, registers with the
 * Receptionist, hands out chunks, and runs offloaded operations on a bounded pool of memory-side threads
 * (paper §6), replying from those threads. Memory server 0 also formats the tree (an empty root and the
 * partition table) in its fresh region.
 *
 * <p>Reads, writes and compare-and-swap of compute nodes never pass through this actor: they are
 * one-sided verbs on the fabric. Over the {@code tcp} fabric, offloads do not either: they are messages on the
 * compute nodes' fabric connections, run by the region server's event loops.
 */
public final class MemoryNode extends AbstractBehavior<MemoryNode.Command> {
    /** How compute nodes find memory nodes. */
    public static final ServiceKey<Command> KEY = ServiceKey.create(Command.class, "dex-memory-node");

    /** Messages a memory node accepts. */
    public interface Command extends CborSerializable {
    }

    /** Asks which memory server this node is. */
    public record Describe(ActorRef<Description> replyTo) implements Command {
    }

    /**
     * @param endpoint where compute nodes reach the region through the fabric ({@code host:port} for tcp;
     *                 empty for fabrics that find regions by server id)
     */
    public record Description(int serverId, long regionBytes, String endpoint, ActorRef<Command> node) implements CborSerializable {
    }

    /** Asks for a chunk of this node's region (for transports without one-sided atomics). */
    public record AllocateChunk(ActorRef<ChunkGranted> replyTo) implements Command {
    }

    /** A chunk's global address, or an error (memory full). */
    public record ChunkGranted(long address, String error) implements CborSerializable {
    }

    /** One phase of an offloaded operation (see {@link OffloadRequest}). */
    public record Offload(long id, int phase, int op, long key, long value, long start, long[] path, long[] versions,
                          int pathLength, ActorRef<OffloadResult> replyTo) implements Command {
    }

    public record OffloadResult(long id, int status, boolean found, long value, long[] path, long[] versions,
                                int pathLength) implements CborSerializable {
    }

    /**
     * @param serverId       this memory server's id (0 formats the tree)
     * @param regionBytes    region size
     * @param chunkBytes     chunk size (power of two)
     * @param offloadThreads memory-side threads for offloaded operations
     * @param offloadQueue   offloaded requests queued before more are rejected
     * @param partitions     the initial partition table server 0 stores (equal width over the key range)
     * @param subtreeLevel   M
     */
    public record Settings(int serverId, long regionBytes, int chunkBytes, int offloadThreads, int offloadQueue,
                           PartitionTable partitions, int subtreeLevel) {
    }

    private final Settings settings;
    private final ExportedRegion region;
    private final RemoteMemory own;
    private final ThreadPoolExecutor offloadPool;
    private final ThreadLocal<SubtreeExecutor> executors;

    private MemoryNode(ActorContext<Command> context, Settings settings, Fabric fabric) {
        super(context);
        this.settings = settings;
        this.region = fabric.export(settings.serverId(), settings.regionBytes(), settings.chunkBytes());
        this.own = fabric.connect(settings.serverId());
        if (settings.serverId() == 0) {
            Superblock.format(own, TreeConfig.defaults().withSubtreeLevel(settings.subtreeLevel()));
            Superblock.writePartitions(own, settings.partitions());
        }
        AtomicInteger threadIds = new AtomicInteger();
        this.offloadPool = new ThreadPoolExecutor(settings.offloadThreads(), settings.offloadThreads(), 0, TimeUnit.SECONDS,
                new ArrayBlockingQueue<>(settings.offloadQueue()), task -> {
                    Thread thread = new Thread(task, "dex-memory-" + settings.serverId() + "-offload-" + threadIds.getAndIncrement());
                    thread.setDaemon(true);
                    return thread;
                });
        this.executors = ThreadLocal.withInitial(() -> new SubtreeExecutor(settings.serverId(), region.region()));
        if (fabric instanceof TcpFabric tcp) {
            // Compute nodes send offloads as messages on their fabric connections; the region server's event
            // loops run them.
            tcp.handleMessages(settings.serverId(), new OffloadMessageHandler(settings.serverId(), region.region()));
        }
        context.getSystem().receptionist().tell(Receptionist.register(KEY, context.getSelf()));
        context.getLog().info("memory node {} exported {} bytes over {}{}", settings.serverId(), settings.regionBytes(),
                fabric.transport(), region.endpoint().isEmpty() ? "" : " at " + region.endpoint());
    }

    /** A memory node exporting its region through {@code fabric}. */
    public static Behavior<Command> create(Settings settings, Fabric fabric) {
        return Behaviors.setup(context -> new MemoryNode(context, settings, fabric));
    }

    @Override
    public Receive<Command> createReceive() {
        return newReceiveBuilder()
                .onMessage(Describe.class, this::onDescribe)
                .onMessage(AllocateChunk.class, this::onAllocateChunk)
                .onMessage(Offload.class, this::onOffload)
                .onSignal(PostStop.class, signal -> onPostStop())
                .build();
    }

    private Behavior<Command> onDescribe(Describe describe) {
        describe.replyTo().tell(new Description(settings.serverId(), settings.regionBytes(), region.endpoint(), getContext().getSelf()));
        return this;
    }

    private Behavior<Command> onAllocateChunk(AllocateChunk request) {
        try {
            request.replyTo().tell(new ChunkGranted(own.chunkAllocator().allocateChunk(settings.serverId()), null));
        } catch (MemoryFullException e) {
            request.replyTo().tell(new ChunkGranted(0, e.getMessage()));
        }
        return this;
    }

    private Behavior<Command> onOffload(Offload offload) {
        OffloadRequest request;
        try {
            request = OffloadRequest.received(offload.phase(), offload.op(), offload.key(), offload.value(), offload.start(),
                    offload.path(), offload.versions(), offload.pathLength());
        } catch (IllegalArgumentException bad) {
            offload.replyTo().tell(new OffloadResult(offload.id(), OffloadRequest.STALE, false, 0, new long[0], new long[0], 0));
            return this;
        }
        try {
            offloadPool.execute(() -> run(request, offload));
        } catch (RejectedExecutionException full) {
            offload.replyTo().tell(new OffloadResult(offload.id(), OffloadRequest.REJECTED, false, 0, new long[0], new long[0], 0));
        }
        return this;
    }

    /** On a memory-side thread: runs the request on the region and replies. */
    private static void runOn(SubtreeExecutor executor, OffloadRequest request, Offload offload) {
        int status;
        try {
            executor.run(request);
            status = request.status();
        } catch (RuntimeException e) {
            status = OffloadRequest.STALE;
        }
        int length = status == OffloadRequest.OK ? request.pathLength() : 0;
        long[] path = new long[length];
        long[] versions = new long[length];
        for (int i = 0; i < length; i++) {
            path[i] = request.pathNode(i);
            versions[i] = request.pathVersion(i);
        }
        offload.replyTo().tell(new OffloadResult(offload.id(), status, request.found(), request.value(), path, versions, length));
    }

    private void run(OffloadRequest request, Offload offload) {
        runOn(executors.get(), request, offload);
    }

    private Behavior<Command> onPostStop() {
        offloadPool.shutdownNow();
        own.close();
        region.close();
        return this;
    }
}
