package dev.dex.rdma.tcp;

import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_FENCED;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.LongConsumer;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.group.ChannelGroup;
import io.netty.util.AttributeKey;

/**
 * The clients a region server fenced ({@link RegionServer}'s class comment says what a fence guarantees): the fenced
 * set, kept in a {@link FenceFile} where the region outlives the process, and the closing of a fenced client's
 * connections.
 *
 * <p>Concurrency: the fenced set is concurrent; the connections are the server's thread-safe group; the revocation
 * that completes a fence runs on the server's blocking pool, never on an event loop.
 */
final class ClientFences {
    private static final Logger LOG = LoggerFactory.getLogger(ClientFences.class);
    /** The identity a connection greeted with; absent for 0 (anonymous). */
    static final AttributeKey<Long> CLIENT = AttributeKey.valueOf(RegionServer.class, "client");
    /** Set on a connection this server closes (a fence, a refusal, a malformed request): not a hang-up of the client. */
    static final AttributeKey<Boolean> CLOSED_HERE = AttributeKey.valueOf(RegionServer.class, "closedHere");
    /** How long a hang-up is remembered ({@link #hungUpClients}). */
    static final long HANG_UP_MEMORY_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
    /** The clients whose side ended a connection (an end of stream, a reset), with when it last happened. */
    private final ConcurrentHashMap<Long, Long> hungUp = new ConcurrentHashMap<>();

    private final int serverId;
    private final ChannelGroup connections;
    private final ExecutorService blockingWork;
    final Set<Long> fenced = ConcurrentHashMap.newKeySet();
    private volatile LongConsumer onFence = client -> { };
    /** Runs first in every fence (a replicated primary streams the fence to its backups); may throw to fail it. */
    volatile LongConsumer beforeFence = client -> { };

    ClientFences(int serverId, ChannelGroup connections, ExecutorService blockingWork, java.nio.file.Path fenceFile) {
        this.serverId = serverId;
        this.connections = connections;
        this.blockingWork = blockingWork;
        if (fenceFile != null) {
            this.fenceFile = FenceFile.open(serverId, fenceFile, fenced);
        }
    }

    /** Records a fence the primary streamed to this backup: no connections to close (a backup has no clients). */
    void recordStreamed(long client) {
        if (fenced.add(client)) {
            FenceFile file = fenceFile;
            if (file != null) {
                file.record(client);
            }
        }
    }

    /**
     * Runs {@code revoke} for each client fenced from now on, once its connections are closed and before the
     * fence completes: what else the client may reach (the {@code disni} fabric's RDMA keys) is revoked within
     * the same fence. It runs on a thread of its own, never on an event loop.
     */
    void whenFenced(LongConsumer revoke) {
        onFence = revoke;
    }

    /** Where the fenced identities are kept across restarts of this memory server; null: in memory only. */
    volatile FenceFile fenceFile;

    /**
     * Fences client {@code client}: from now on its greeting is refused, and every connection it has open is
     * closed; {@code fenceDone} runs once they are all closed and {@link #whenFenced} revoked the rest (on an
     * event loop, or at once when there are none), with the revocation's failure or null.
     */
    void fence(long client, Consumer<RuntimeException> fenceDone) {
        LongConsumer revoke = onFence;
        Runnable revokeThenDone = () -> {
            RuntimeException failure = null;
            try {
                beforeFence.accept(client);
                FenceFile file = fenceFile;
                if (file != null) {
                    file.record(client);
                }
                revoke.accept(client);
            } catch (RuntimeException failed) {
                LOG.error("memory server {}: revoking what else client {} may reach failed, so it is not fenced for sure: {}",
                        serverId, Long.toHexString(client), failed.toString());
                failure = failed;
            }
            fenceDone.accept(failure);
        };
        // The revocation may take system calls (deregistering memory): not on an event loop.
        Runnable done = () -> {
            try {
                blockingWork.execute(revokeThenDone);
            } catch (java.util.concurrent.RejectedExecutionException closing) {
                revokeThenDone.run();
            }
        };
        if (fenced.add(client)) {
            LOG.info("memory server {}: client {} is fenced; its connections are closed and its greetings refused", serverId,
                    Long.toHexString(client));
        }
        List<Channel> open = new ArrayList<>();
        for (Channel channel : connections) {
            Long identity = channel.attr(CLIENT).get();
            if (identity != null && identity == client) {
                open.add(channel);
            }
        }
        if (open.isEmpty()) {
            done.run();
            return;
        }
        AtomicInteger left = new AtomicInteger(open.size());
        for (Channel channel : open) {
            // Tells the client why before closing (it fails what it has in flight as fenced, not as a lost
            // connection); both run on the channel's event loop after the request it is executing.
            ByteBuf notice = fencedAnswer(channel.alloc(), TcpFrameDescriptor.FENCE_NOTICE_ID, client);
            channel.closeFuture().addListener(closed -> {
                if (left.decrementAndGet() == 0) {
                    done.run();
                }
            });
            try {
                channel.eventLoop().execute(() -> {
                    channel.writeAndFlush(notice, channel.voidPromise());
                    closeHere(channel);
                });
            } catch (java.util.concurrent.RejectedExecutionException shutDown) {
                notice.release();
                closeHere(channel);
            }
        }
    }

    /** {@link #fence(long, Consumer)}, waiting until it is complete (not on an event loop). */
    void fence(long client) {
        CountDownLatch complete = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicReference<RuntimeException> failure = new java.util.concurrent.atomic.AtomicReference<>();
        fence(client, failed -> {
            failure.set(failed);
            complete.countDown();
        });
        try {
            if (!complete.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("memory server " + serverId + " could not close the connections of client "
                        + Long.toHexString(client) + " within 30 s");
            }
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while fencing client " + Long.toHexString(client), interrupted);
        }
        if (failure.get() != null) {
            throw new IllegalStateException("memory server " + serverId + ": client " + Long.toHexString(client)
                    + " is not fenced for sure: " + failure.get().getMessage(), failure.get());
        }
    }

    /** The identities (not 0) of the clients that greeted on a connection still open. */
    java.util.Set<Long> connectedClients() {
        java.util.Set<Long> clients = new java.util.HashSet<>();
        for (Channel channel : connections) {
            Long identity = channel.attr(CLIENT).get();
            if (identity != null && identity != 0) {
                clients.add(identity);
            }
        }
        return clients;
    }

    /** Closes {@code channel} from this side, so that its end is not taken for the client's hang-up. */
    static io.netty.channel.ChannelFuture closeHere(Channel channel) {
        channel.attr(CLOSED_HERE).set(Boolean.TRUE);
        return channel.close();
    }

    /** Closes every connection (the server's own close): none of their ends is a hang-up. */
    io.netty.channel.group.ChannelGroupFuture closeAllHere() {
        for (Channel channel : connections) {
            channel.attr(CLOSED_HERE).set(Boolean.TRUE);
        }
        return connections.close();
    }

    /** When a connection greeted ({@link System#nanoTime}). */
    static final AttributeKey<Long> GREETED_AT = AttributeKey.valueOf(RegionServer.class, "greetedAt");

    /** A connection greets as {@code client} (not 0): its identity is recorded, and an earlier hang-up of it forgotten. */
    void greeting(Channel channel, long client) {
        channel.attr(CLIENT).set(client);
        channel.attr(GREETED_AT).set(System.nanoTime());
        hungUp.remove(client);
    }

    /**
     * A greeted client connection ended: unless this server closed it, the client's side hung up (or died). A connection
     * the server closed that greeted after the client's last hang-up leaves none behind (the client was back since).
     */
    void hungUp(Channel channel) {
        Long identity = channel.attr(CLIENT).get();
        long now = System.nanoTime();
        hungUp.values().removeIf(at -> now - at > HANG_UP_MEMORY_NANOS);
        if (identity != null && identity != 0) {
            if (channel.attr(CLOSED_HERE).get() == null) {
                hungUp.put(identity, now);
            } else {
                Long greeted = channel.attr(GREETED_AT).get();
                hungUp.computeIfPresent(identity, (client, at) -> greeted != null && greeted - at > 0 ? null : at);
            }
        }
    }

    /**
     * The clients that hung up a connection in the last {@link #HANG_UP_MEMORY_NANOS} and have none open now, with the
     * time ({@link System#nanoTime}) of the last hang-up: a process that dies has every connection ended by its kernel.
     * A connection this server closed does not count.
     */
    java.util.Map<Long, Long> hungUpClients() {
        long now = System.nanoTime();
        hungUp.values().removeIf(at -> now - at > HANG_UP_MEMORY_NANOS);
        java.util.Set<Long> open = connectedClients();
        java.util.Map<Long, Long> gone = new java.util.HashMap<>();
        hungUp.forEach((client, at) -> {
            if (!open.contains(client)) {
                gone.put(client, at);
            }
        });
        return gone;
    }

    /** Whether {@code client} is fenced here. */
    boolean isFenced(long client) {
        return fenced.contains(client);
    }

    /** The FENCED answer to a request {@code id} of fenced client {@code client}, with the reason. */
    ByteBuf fencedAnswer(io.netty.buffer.ByteBufAllocator alloc, long id, long client) {
        byte[] text = ("client " + Long.toHexString(client) + " is fenced by memory server " + serverId).getBytes(StandardCharsets.UTF_8);
        ByteBuf out = RegionServer.response(alloc, STATUS_FENCED, id, 0, text.length);
        out.writeBytes(text);
        return out;
    }
}
