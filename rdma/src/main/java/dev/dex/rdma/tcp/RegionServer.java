package dev.dex.rdma.tcp;

import static dev.dex.rdma.tcp.TcpFrameDescriptor.ADDRESS_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.COUNT_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.LENGTH_FIELD_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.MAX_REASON_BYTES;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OPERAND1_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OPERAND2_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_APPLY;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_CAS;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_FAA;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_FENCE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_HELLO;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_MESSAGE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_READ;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_STREAM;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_WRITE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.REQUEST_HEADER_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.REQUEST_ID_OFFSET;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.RESPONSE_HEADER_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_OK;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.STATUS_REFUSED;

import java.net.InetSocketAddress;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.function.LongConsumer;

import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.Region;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.util.AttributeKey;
import io.netty.util.concurrent.GlobalEventExecutor;

/**
 * Serves one memory server's region over TCP: every request frame ({@link TcpFrameDescriptor}) is executed on
 * the region by the event-loop thread that read it, and answered on the same connection, in order. The
 * answers to the requests of one read from the socket go out with one flush.
 *
 * <p>Back-pressure: a connection whose queued answers pass the high water mark ({@link #waterMark}) is not
 * read any more; requests already read wait, in order, and are answered once the queue drains below the low
 * mark, then reading resumes. So a client that asks faster than it reads costs the server at most the water
 * mark plus one socket read of requests, never memory in proportion to what it asked.
 *
 * <p>Fencing: every connection greets first, naming its client identity. {@link #fence} adds an identity to
 * the fenced set and closes that client's connections; a fenced client's greeting is answered
 * {@code FENCED} and its connection closed. A fence is complete once every such connection is closed: a
 * connection's requests run on its event loop, which runs the close after the request it is executing and
 * drops whatever it decodes after the close, so nothing of the client is applied after the fence completes.
 *
 * <p>Concurrency: a blocking message ({@link MessageHandler#blocking()}) and the revocation that completes a
 * fence run on a cached pool of their own, never on an event loop; their answer is written back on the
 * connection's event loop, which alone touches the connection's state (its held-back requests included).
 * Each connection is handled by one event-loop thread; connections on different threads
 * touch the region concurrently with exactly the guarantees of {@link Region#readVerb}, {@link Region#writeVerb}
 * and its atomics, the same as the one-sided transports. The set of open connections is a thread-safe
 * {@link ChannelGroup}, closed with the server. The fenced set is concurrent; a greeting stores its identity
 * on the channel (a volatile attribute) before it looks the identity up in the fenced set, and a fence adds to
 * the set before it looks at the channels' identities, so of a greeting and a fence that race, at least one
 * sees the other: the greeting is refused or the fence closes its connection.
 */
final class RegionServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RegionServer.class);

    private final int serverId;
    private final Channel listener;
    private final ChannelGroup connections = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);
    private final String endpoint;
    private volatile MessageHandler messages;
    /** Runs what must not block an event loop: blocking messages, and what a fence revokes besides connections. */
    private final java.util.concurrent.ExecutorService blockingWork = java.util.concurrent.Executors.newCachedThreadPool(task -> {
        Thread thread = new Thread(task, "dex-region-server-blocking");
        thread.setDaemon(true);
        return thread;
    });
    private static final AttributeKey<Long> CLIENT = ClientFences.CLIENT;
    /** Answers one connection holds for its backups' acknowledgements before it stops reading requests. */
    private static final int MAX_HELD = 4096;
    /** Set on a connection that carries a primary's replication stream (not a client). */
    private static final AttributeKey<Boolean> STREAM = AttributeKey.valueOf(RegionServer.class, "stream");
    /** Its part in a replica group. */
    final Replica replica;

    private RegionServer(int serverId, Region region, long chunkLength, TcpSettings settings, ReplicaSettings replication,
                         IoTransport io, java.nio.file.Path fenceFile, ReplicaFile record) {
        this.serverId = serverId;
        // Before it binds: no fenced client greets in between.
        this.fences = new ClientFences(serverId, connections, blockingWork, fenceFile);
        this.replica = new Replica(serverId, region, settings, replication, io, this::dropClients, fences::recordStreamed, record);
        fences.beforeFence = client -> {
            ReplicationStream stream = replica.stream;
            if (stream != null) {
                // On the backups before the fence completes (it runs on the blocking pool): a new primary refuses the client too.
                stream.awaitCommitted(stream.fence(client), settings.verbTimeout());
            }
        };
        ServerBootstrap bootstrap = new ServerBootstrap()
                .group(io.group())
                .channel(io.serverChannel())
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, waterMark(settings.maxTransfer()))
                .childOption(ChannelOption.SO_KEEPALIVE, true)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel channel) {
                        initConnection(channel, region, chunkLength, settings, io.tls());
                    }
                });
        ChannelFuture bound = bootstrap.bind(settings.host(), settings.port()).awaitUninterruptibly();
        if (!bound.isSuccess()) {
            throw new IllegalArgumentException("memory server " + serverId + " cannot listen on " + settings.host() + ":"
                    + settings.port() + ": " + bound.cause(), bound.cause());
        }
        this.listener = bound.channel();
        InetSocketAddress local = (InetSocketAddress) listener.localAddress();
        this.endpoint = TcpEndpoint.format(settings.host(), local.getPort());
        LOG.info("memory server {} serves its region over tcp ({}{}) at {}", serverId, io.name(),
                io.tls() != null ? ", mutual TLS" : "", endpoint);
    }

    /**
     * Sets up a client connection's pipeline: refused beyond the connection limit; TLS first when configured; then
     * the frame decoder and the request handler. Package-private for the fuzz test, which feeds frames to an
     * embedded channel set up the same way.
     */
    void initConnection(Channel channel, Region region, long chunkLength, TcpSettings settings, TcpTls tls) {
        if (connections.size() >= settings.maxConnections()) {
            LOG.warn("memory server {}: refused a connection from {}: {} are open, the most it keeps"
                    + " (dex.fabric.tcp.max-connections)", serverId, channel.remoteAddress(), connections.size());
            ClientFences.closeHere(channel);
            return;
        }
        connections.add(channel);
        if (tls != null) {
            channel.pipeline().addLast(tls.serverHandler(channel.alloc()));
        }
        channel.pipeline().addLast(
                new LengthFieldBasedFrameDecoder(ByteOrder.LITTLE_ENDIAN, TcpFrameDescriptor.maxFrameLength(settings.maxTransfer()), 0,
                        LENGTH_FIELD_LENGTH, 0, LENGTH_FIELD_LENGTH, true),
                new RequestHandler(region, chunkLength, settings.maxTransfer()));
    }

    /**
     * Answers a connection may have queued before the server stops reading its requests: a few of the largest,
     * and at least 1 MiB so that a window of small answers never waits.
     */
    static WriteBufferWaterMark waterMark(int maxTransfer) {
        int low = Math.max(1 << 20, 2 * maxTransfer);
        return new WriteBufferWaterMark(low, 2 * low);
    }

    /** Bytes of answers queued on this server's connections and not yet written to their sockets (for tests). */
    long pendingAnswerBytes() {
        long pending = 0;
        for (Channel channel : connections) {
            io.netty.channel.ChannelOutboundBuffer buffer = channel.unsafe().outboundBuffer();
            if (buffer != null) {
                pending += buffer.totalPendingWriteBytes();
            }
        }
        return pending;
    }

    /** Binds the server; throws {@link IllegalArgumentException} when the address cannot be bound. */
    static RegionServer start(int serverId, Region region, long chunkLength, TcpSettings settings, IoTransport io) {
        return new RegionServer(serverId, region, chunkLength, settings, ReplicaSettings.DEFAULTS, io, null,
                ReplicaFile.inMemory(serverId));
    }

    /**
     * As {@link #start}, with replica groups' settings, a fence file (null: fences in memory only) and the record of the
     * region's part in its group ({@link ReplicaFile}).
     */
    static RegionServer start(int serverId, Region region, long chunkLength, TcpSettings settings, ReplicaSettings replication,
                              IoTransport io, java.nio.file.Path fenceFile, ReplicaFile record) {
        return new RegionServer(serverId, region, chunkLength, settings, replication, io, fenceFile, record);
    }

    /** Closes every client connection (not a stream's): this replica stopped serving clients. */
    private void dropClients() {
        for (Channel channel : connections) {
            if (channel.attr(STREAM).get() == null) {
                ClientFences.closeHere(channel);
            }
        }
    }

    /** As {@link #start}, keeping the fenced clients in {@code fenceFile} ({@link FenceFile}) from before it binds. */
    static RegionServer start(int serverId, Region region, long chunkLength, TcpSettings settings, IoTransport io,
                              java.nio.file.Path fenceFile) {
        return new RegionServer(serverId, region, chunkLength, settings, ReplicaSettings.DEFAULTS, io, fenceFile,
                ReplicaFile.inMemory(serverId));
    }

    /** {@code host:port} where clients connect. */
    String endpoint() {
        return endpoint;
    }

    /** Handles the two-sided messages sent to this server from now on (the event loops run it). */
    void handleMessages(MessageHandler handler) {
        messages = handler;
    }

    /** The clients this server fenced. */
    final ClientFences fences;

    /** See {@link ClientFences#whenFenced}. */
    void whenFenced(LongConsumer revoke) {
        fences.whenFenced(revoke);
    }

    /** See {@link ClientFences#fence(long)}. */
    void fence(long client) {
        fences.fence(client);
    }

    java.util.Set<Long> connectedClients() {
        return fences.connectedClients();
    }

    boolean isFenced(long client) {
        return fences.isFenced(client);
    }

    @Override
    public void close() {
        replica.close();
        listener.close().awaitUninterruptibly();
        fences.closeAllHere().awaitUninterruptibly();
        blockingWork.shutdown();
    }

    /** One connection's requests; not shared between connections (it holds views over its buffers). */
    private final class RequestHandler extends SimpleChannelInboundHandler<ByteBuf> {
        private final Region region;
        private final long chunkLength;
        private final int maxTransfer;
        private final UnsafeBuffer view = new UnsafeBuffer(0, 0);
        private final UnsafeBuffer replyView = new UnsafeBuffer(0, 0);
        /** Requests read while the connection could not take more answers, or waited for a fence, in order. */
        private final java.util.ArrayDeque<ByteBuf> deferred = new java.util.ArrayDeque<>();
        /** The connection said HELLO (as anyone, or as a client that is not fenced). */
        private boolean greeted;
        /**
         * A FENCE or a blocking message of this connection is not answered yet: later requests wait, so answers
         * stay in order.
         */
        private boolean holding;
        /** The greeting was refused (a fenced client): nothing more of this connection is executed. */
        private boolean refused;
        /** Answers held for the backups' acknowledgements (a replicated primary's), in request order. */
        private final HeldAnswers held = new HeldAnswers(replica, this::resume);

        RequestHandler(Region region, long chunkLength, int maxTransfer) {
            this.region = region;
            this.chunkLength = chunkLength;
            this.maxTransfer = maxTransfer;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, ByteBuf frame) {
            if (holding || !deferred.isEmpty() || !ctx.channel().isWritable() || held.size() >= MAX_HELD) {
                // Back-pressure: the client does not take its answers as fast as it asks. Stop reading the
                // socket, keep what was read already (requests are small, answers up to max-transfer), and
                // answer it once the answers queued so far have gone out.
                deferred.add(frame.retain());
                ctx.channel().config().setAutoRead(false);
                return;
            }
            handle(ctx, frame);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            if (ctx.channel().isWritable()) {
                resume(ctx);
            }
            ctx.fireChannelWritabilityChanged();
        }

        /** Answers the deferred requests while the connection takes answers and no fence is pending. */
        private void resume(ChannelHandlerContext ctx) {
            boolean answered = false;
            while (!holding && !deferred.isEmpty() && ctx.channel().isWritable() && ctx.channel().isActive()
                    && held.size() < MAX_HELD) {
                ByteBuf frame = deferred.poll();
                try {
                    handle(ctx, frame);
                } finally {
                    frame.release();
                }
                answered = true;
            }
            if (answered) {
                ctx.flush();
            }
            if (deferred.isEmpty() && !holding) {
                ctx.channel().config().setAutoRead(true);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            ByteBuf frame;
            while ((frame = deferred.poll()) != null) {
                frame.release();
            }
            held.drop(); // never answered: the client fails them as verbs of unknown outcome
            if (ctx.channel().attr(STREAM).get() == null) {
                fences.hungUp(ctx.channel());
            }
            ctx.fireChannelInactive();
        }

        /** Executes one request frame and writes its answer (flushed at the end of the socket read). */
        private void handle(ChannelHandlerContext ctx, ByteBuf frame) {
            if (refused || !ctx.channel().isActive()) {
                // Decoded from what was left in the socket buffer after the connection closed (by a fence, or
                // a verb timeout on the client's side), or sent behind a refused greeting: nobody waits for it,
                // and it must not take effect.
                return;
            }
            int base = frame.readerIndex();
            int length = frame.readableBytes();
            if (length < REQUEST_HEADER_LENGTH) {
                malformed(ctx, "a request of " + length + " bytes is shorter than its " + REQUEST_HEADER_LENGTH + "-byte header");
                return;
            }
            byte op = frame.getByte(base + OP_OFFSET);
            int count = frame.getIntLE(base + COUNT_OFFSET);
            long id = frame.getLongLE(base + REQUEST_ID_OFFSET);
            long address = frame.getLongLE(base + ADDRESS_OFFSET);
            int payload = length - REQUEST_HEADER_LENGTH;
            String layout = checkLayout(op, count, payload);
            if (layout != null) {
                malformed(ctx, layout);
                return;
            }
            String refusal = checkAddress(op, address);
            if (refusal != null) {
                refuse(ctx, id, refusal);
                return;
            }
            if (op == OP_HELLO) {
                greet(ctx, id, frame.getLongLE(base + OPERAND1_OFFSET));
                return;
            }
            if (op == OP_STREAM || op == OP_APPLY) {
                stream(ctx, op, frame, base, count, id);
                return;
            }
            if (!greeted) {
                refuse(ctx, id, "say HELLO first: memory server " + serverId + " serves only clients that greeted it");
                return;
            }
            if (op == OP_FENCE) {
                fenceFor(ctx, id, frame.getLongLE(base + OPERAND1_OFFSET));
                return;
            }
            long offset = GlobalAddress.offset(address);
            try {
                switch (op) {
                    case OP_READ -> {
                        if (!region.contains(offset, count)) {
                            refuse(ctx, id, outside(offset, count));
                            return;
                        }
                        ByteBuf out = header(ctx, STATUS_OK, id, 0, count);
                        ByteBufViews.wrap(view, out, out.writerIndex(), count);
                        region.readVerb(offset, view, 0, count);
                        out.writerIndex(out.writerIndex() + count);
                        out(ctx, out);
                    }
                    case OP_WRITE -> {
                        if (!region.contains(offset, count)) {
                            refuse(ctx, id, outside(offset, count));
                            return;
                        }
                        ByteBufViews.wrap(view, frame, base + REQUEST_HEADER_LENGTH, count);
                        ReplicationStream stream = replica.stream;
                        if (stream == null) {
                            region.writeVerb(offset, view, 0, count);
                        } else {
                            stream.write(offset, view, 0, count);
                        }
                        out(ctx, header(ctx, STATUS_OK, id, 0, 0));
                    }
                    case OP_MESSAGE -> {
                        MessageHandler handler = messages;
                        if (handler == null) {
                            refuse(ctx, id, "memory server " + serverId + " takes no messages");
                            return;
                        }
                        if (handler.blocking()) {
                            handleBlocking(ctx, id, handler, frame, base + REQUEST_HEADER_LENGTH, count);
                            return;
                        }
                        ByteBuf out = header(ctx, STATUS_OK, id, 0, MessageHandler.MAX_MESSAGE);
                        ByteBufViews.wrap(replyView, out, out.writerIndex(), MessageHandler.MAX_MESSAGE);
                        ByteBufViews.wrap(view, frame, base + REQUEST_HEADER_LENGTH, count);
                        int n;
                        try {
                            Long client = ctx.channel().attr(CLIENT).get();
                            n = handler.handle(client == null ? 0 : client, view, 0, count, replyView);
                        } catch (IllegalArgumentException | IndexOutOfBoundsException malformedMessage) {
                            out.release();
                            refuse(ctx, id, "message refused: " + malformedMessage.getMessage());
                            return;
                        } catch (RuntimeException handlerFailed) {
                            out.release();
                            throw handlerFailed;
                        }
                        if (n < 0 || n > MessageHandler.MAX_MESSAGE) {
                            out.release();
                            refuse(ctx, id, "the message handler answered " + n + " bytes");
                            return;
                        }
                        out.setIntLE(out.readerIndex(), RESPONSE_HEADER_LENGTH + n);
                        out.setIntLE(out.readerIndex() + LENGTH_FIELD_LENGTH + COUNT_OFFSET, n);
                        out.writerIndex(out.writerIndex() + n);
                        out(ctx, out);
                    }
                    case OP_CAS -> {
                        long expected = frame.getLongLE(base + OPERAND1_OFFSET);
                        long desired = frame.getLongLE(base + OPERAND2_OFFSET);
                        ReplicationStream stream = replica.stream;
                        long found = stream == null ? region.compareAndSwapLong(offset, expected, desired)
                                : stream.compareAndSwap(offset, expected, desired);
                        out(ctx, header(ctx, STATUS_OK, id, found, 0));
                    }
                    default -> {
                        long delta = frame.getLongLE(base + OPERAND1_OFFSET);
                        ReplicationStream stream = replica.stream;
                        long previous = stream == null ? region.getAndAddLong(offset, delta) : stream.fetchAndAdd(offset, delta);
                        out(ctx, header(ctx, STATUS_OK, id, previous, 0));
                    }
                }
            } catch (IllegalArgumentException outsideOrMisaligned) {
                refuse(ctx, id, outsideOrMisaligned.getMessage());
            } catch (NotPrimaryException replaced) {
                notPrimary(ctx, id, replaced.getMessage());
            }
        }

        /** An answer: written now, or held until the backups acknowledged what it may have seen ({@link HeldAnswers}). */
        private void out(ChannelHandlerContext ctx, ByteBuf answer) {
            held.out(ctx, answer);
        }

        /** A primary's stream to this backup: its greeting or one of its frames (see {@link Replica}). */
        private void stream(ChannelHandlerContext ctx, byte op, ByteBuf frame, int base, int count, long id) {
            try {
                long value;
                if (op == OP_STREAM) {
                    if (count != Long.BYTES) {
                        malformed(ctx, "STREAM with " + count + " payload bytes");
                        return;
                    }
                    ctx.channel().attr(STREAM).set(Boolean.TRUE);
                    value = replica.openStream(ctx.channel(), frame.getLongLE(base + OPERAND1_OFFSET),
                            frame.getLongLE(base + OPERAND2_OFFSET), frame.getLongLE(base + REQUEST_HEADER_LENGTH));
                } else {
                    long offset = GlobalAddress.offset(frame.getLongLE(base + ADDRESS_OFFSET));
                    if (count > 0 && !region.contains(offset, count)) {
                        refuse(ctx, id, outside(offset, count));
                        ClientFences.closeHere(ctx.channel());
                        return;
                    }
                    ByteBufViews.wrap(view, frame, base + REQUEST_HEADER_LENGTH, count);
                    value = replica.apply(ctx.channel(), frame.getLongLE(base + OPERAND1_OFFSET),
                            frame.getLongLE(base + OPERAND2_OFFSET), offset, view, count);
                }
                ctx.write(header(ctx, STATUS_OK, id, value, 0), ctx.voidPromise());
            } catch (NotPrimaryException refusedView) {
                notPrimary(ctx, id, refusedView.getMessage());
            } catch (IllegalStateException notNow) {
                // Not a backup now, or another stream's connection: refused and closed; the primary greets again later.
                refuse(ctx, id, notNow.getMessage());
                ctx.flush();
                ClientFences.closeHere(ctx.channel());
            }
        }

        /** Answers NOT_PRIMARY with the reason and closes the connection after it. */
        private void notPrimary(ChannelHandlerContext ctx, long id, String reason) {
            refused = true;
            byte[] text = reason.getBytes(StandardCharsets.UTF_8);
            int n = Math.min(text.length, MAX_REASON_BYTES);
            ByteBuf out = header(ctx, TcpFrameDescriptor.STATUS_NOT_PRIMARY, id, 0, n);
            out.writeBytes(text, 0, n);
            ctx.channel().attr(ClientFences.CLOSED_HERE).set(Boolean.TRUE);
            ctx.writeAndFlush(out).addListener(ChannelFutureListener.CLOSE);
        }

        /**
         * A message whose handler blocks (system calls, long work) runs on {@link #blockingWork}, not on this event
         * loop, which serves the other connections meanwhile; this connection's later requests wait for its answer.
         */
        private void handleBlocking(ChannelHandlerContext ctx, long id, MessageHandler handler, ByteBuf frame, int at, int count) {
            byte[] message = new byte[count];
            frame.getBytes(at, message);
            Long identity = ctx.channel().attr(CLIENT).get();
            long client = identity == null ? 0 : identity;
            holding = true;
            ctx.channel().config().setAutoRead(false);
            Runnable work = () -> {
                byte[] reply = new byte[MessageHandler.MAX_MESSAGE];
                int n;
                String refusal = null;
                try {
                    n = handler.handle(client, new UnsafeBuffer(message), 0, count, new UnsafeBuffer(reply));
                    if (n < 0 || n > MessageHandler.MAX_MESSAGE) {
                        refusal = "the message handler answered " + n + " bytes";
                    }
                } catch (RuntimeException failed) {
                    n = 0;
                    refusal = failed instanceof IllegalArgumentException || failed instanceof IndexOutOfBoundsException
                            ? "message refused: " + failed.getMessage() : "the message handler failed: " + failed;
                }
                int length = n;
                String reason = refusal;
                ctx.executor().execute(() -> {
                    holding = false;
                    if (ctx.channel().isActive()) {
                        if (reason != null) {
                            refuse(ctx, id, reason);
                        } else {
                            ByteBuf out = header(ctx, STATUS_OK, id, 0, length);
                            out.writeBytes(reply, 0, length);
                            out(ctx, out);
                        }
                        resume(ctx);
                        ctx.flush();
                    }
                });
            };
            try {
                blockingWork.execute(work);
            } catch (java.util.concurrent.RejectedExecutionException closing) {
                holding = false;
                refuse(ctx, id, "memory server " + serverId + " is closing");
            }
        }

        /** A HELLO: checks the server id, records the client's identity and refuses a fenced client. */
        private void greet(ChannelHandlerContext ctx, long id, long client) {
            Long before = ctx.channel().attr(CLIENT).get();
            if (greeted && (before == null ? client != 0 : before != client)) {
                refuse(ctx, id, "a connection keeps the identity it greeted with");
                return;
            }
            String notServing = replica.clientRefusal();
            if (notServing != null) {
                notPrimary(ctx, id, notServing);
                return;
            }
            if (client != 0) {
                fences.greeting(ctx.channel(), client);
                if (fences.isFenced(client)) {
                    refused = true;
                    ctx.channel().attr(ClientFences.CLOSED_HERE).set(Boolean.TRUE);
                    ctx.writeAndFlush(fences.fencedAnswer(ctx.alloc(), id, client)).addListener(ChannelFutureListener.CLOSE);
                    LOG.info("memory server {}: refused fenced client {} from {}", serverId, Long.toHexString(client),
                            ctx.channel().remoteAddress());
                    return;
                }
            }
            greeted = true;
            ByteBuf out = header(ctx, STATUS_OK, id, region.length(), 3 * Long.BYTES);
            out.writeLongLE(chunkLength);
            out.writeLongLE(maxTransfer);
            out.writeLongLE(dev.dex.rdma.RegionFormat.incarnation(region));
            out(ctx, out);
        }

        /** A FENCE: later requests of this connection wait until the fenced client's connections are closed. */
        private void fenceFor(ChannelHandlerContext ctx, long id, long client) {
            Long own = ctx.channel().attr(CLIENT).get();
            if (client == 0 || own != null && own == client) {
                refuse(ctx, id, client == 0 ? "client 0 (anonymous) cannot be fenced" : "a client cannot fence itself");
                return;
            }
            holding = true;
            ctx.channel().config().setAutoRead(false);
            fences.fence(client, failed -> ctx.executor().execute(() -> {
                holding = false;
                if (ctx.channel().isActive()) {
                    if (failed == null) {
                        out(ctx, header(ctx, STATUS_OK, id, 0, 0));
                    } else {
                        refuse(ctx, id, "client " + Long.toHexString(client) + " is not fenced for sure: " + failed.getMessage());
                    }
                    resume(ctx);
                    ctx.flush();
                }
            }));
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            LOG.warn("memory server {}: closing the connection from {}: {}", serverId, ctx.channel().remoteAddress(), cause.toString());
            if (!(cause instanceof java.io.IOException) || cause instanceof javax.net.ssl.SSLException) { // a reset: a hang-up
                ctx.channel().attr(ClientFences.CLOSED_HERE).set(Boolean.TRUE);
            }
            ctx.close();
        }

        /** Null when the frame keeps to the layout, else what is wrong with it. */
        private String checkLayout(byte op, int count, int payload) {
            return switch (op) {
                case OP_STREAM -> payload == Long.BYTES && count == Long.BYTES ? null : "STREAM with " + payload + " payload bytes";
                case OP_APPLY -> payload == count && count >= 0 && count <= maxTransfer ? null
                        : "APPLY of " + count + " bytes carries " + payload + " payload bytes (at most " + maxTransfer + ")";
                case OP_HELLO, OP_CAS, OP_FAA, OP_FENCE -> payload == 0 && count == 0 ? null
                        : TcpFrameDescriptor.opName(op) + " with count " + count + " and " + payload + " payload bytes";
                case OP_READ -> payload == 0 && count >= 0 && count <= maxTransfer ? null
                        : "READ of " + count + " bytes with " + payload + " payload bytes (at most " + maxTransfer + ")";
                case OP_WRITE -> payload == count && count >= 0 ? null
                        : "WRITE of " + count + " bytes carries " + payload + " payload bytes";
                case OP_MESSAGE -> payload == count && count >= 0 && count <= MessageHandler.MAX_MESSAGE ? null
                        : "MESSAGE of " + count + " bytes carries " + payload + " payload bytes (at most "
                                + MessageHandler.MAX_MESSAGE + ")";
                default -> "unknown op code " + op;
            };
        }

        /** Null when the address is this server's and fits the op, else the reason to refuse it. */
        private String checkAddress(byte op, long address) {
            if (GlobalAddress.isSwizzled(address)) {
                return "swizzled pointer " + GlobalAddress.toString(address) + " is not a remote address";
            }
            if (GlobalAddress.serverId(address) != serverId) {
                return "this endpoint serves memory server " + serverId + ", not " + GlobalAddress.serverId(address);
            }
            return null;
        }

        private String outside(long offset, int count) {
            return "range [" + offset + ", " + offset + " + " + count + ") outside region of " + region.length() + " bytes";
        }

        private void refuse(ChannelHandlerContext ctx, long id, String reason) {
            byte[] text = reason.getBytes(StandardCharsets.UTF_8);
            int n = Math.min(text.length, MAX_REASON_BYTES);
            ByteBuf out = header(ctx, STATUS_REFUSED, id, 0, n);
            out.writeBytes(text, 0, n);
            out(ctx, out);
        }

        private void malformed(ChannelHandlerContext ctx, String what) {
            LOG.warn("memory server {}: closing the connection from {}: malformed request: {}", serverId,
                    ctx.channel().remoteAddress(), what);
            ClientFences.closeHere(ctx.channel());
        }

        /** {@link #response} from this connection's allocator. */
        private ByteBuf header(ChannelHandlerContext ctx, byte status, long id, long value, int payload) {
            return response(ctx.alloc(), status, id, value, payload);
        }
    }

    /** A response buffer with its length prefix and header written, room for {@code payload} more bytes. */
    static ByteBuf response(io.netty.buffer.ByteBufAllocator alloc, byte status, long id, long value, int payload) {
        ByteBuf out = alloc.directBuffer(LENGTH_FIELD_LENGTH + RESPONSE_HEADER_LENGTH + payload);
        out.writeIntLE(RESPONSE_HEADER_LENGTH + payload);
        out.writeByte(status);
        out.writeZero(3);
        out.writeIntLE(payload);
        out.writeLongLE(id);
        out.writeLongLE(value);
        return out;
    }

}
