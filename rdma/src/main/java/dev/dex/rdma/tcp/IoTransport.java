package dev.dex.rdma.tcp;

import java.util.concurrent.TimeUnit;

import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;

/**
 * The event loops of one {@link TcpFabric}: native epoll where Netty's native library loads (Linux on x86-64
 * and aarch64), NIO elsewhere. Its threads are daemons, so an unclosed fabric never keeps a JVM alive.
 */
record IoTransport(String name, EventLoopGroup group, Class<? extends SocketChannel> socketChannel,
                   Class<? extends ServerChannel> serverChannel, TcpTls tls) {

    /** Event loops for a fabric object; {@code tls} secures its servers' and clients' connections, or null. */
    static IoTransport create(int threads, TcpTls tls) {
        DefaultThreadFactory threadFactory = new DefaultThreadFactory("dex-tcp-io", true);
        if (Epoll.isAvailable()) {
            return new IoTransport("epoll", new MultiThreadIoEventLoopGroup(threads, threadFactory, EpollIoHandler.newFactory()),
                    EpollSocketChannel.class, EpollServerSocketChannel.class, tls);
        }
        return new IoTransport("nio", new MultiThreadIoEventLoopGroup(threads, threadFactory, NioIoHandler.newFactory()),
                NioSocketChannel.class, NioServerSocketChannel.class, tls);
    }

    /**
     * Opens a connection to the region server at {@code address}: mutual TLS first when configured, then the frame decoder
     * and {@code handler}; a connection that carries bulk ({@code waterMark}) stops being writable past the region server's
     * water mark. Waits up to the settings' connect timeout (and a second). Returns the channel; when it cannot be opened,
     * throws {@code failure} applied to the reason and its cause.
     */
    io.netty.channel.Channel connect(java.net.InetSocketAddress address, TcpSettings settings, io.netty.channel.ChannelHandler handler,
                                     boolean waterMark, java.util.function.BiFunction<String, Throwable, RuntimeException> failure) {
        int maxFrame = TcpFrameDescriptor.maxFrameLength(settings.maxTransfer());
        io.netty.bootstrap.Bootstrap bootstrap = new io.netty.bootstrap.Bootstrap()
                .group(group)
                .channel(socketChannel)
                .option(io.netty.channel.ChannelOption.TCP_NODELAY, true)
                .option(io.netty.channel.ChannelOption.SO_KEEPALIVE, true)
                .option(io.netty.channel.ChannelOption.CONNECT_TIMEOUT_MILLIS,
                        (int) Math.min(Integer.MAX_VALUE, settings.connectTimeout().toMillis()))
                .handler(new io.netty.channel.ChannelInitializer<io.netty.channel.Channel>() {
                    @Override
                    protected void initChannel(io.netty.channel.Channel channel) {
                        if (tls != null) {
                            channel.pipeline().addLast(tls.clientHandler(channel.alloc(), address.getHostString(), address.getPort()));
                        }
                        channel.pipeline().addLast(new io.netty.handler.codec.LengthFieldBasedFrameDecoder(
                                java.nio.ByteOrder.LITTLE_ENDIAN, maxFrame, 0, TcpFrameDescriptor.LENGTH_FIELD_LENGTH, 0,
                                TcpFrameDescriptor.LENGTH_FIELD_LENGTH, true), handler);
                    }
                });
        if (waterMark) {
            bootstrap.option(io.netty.channel.ChannelOption.WRITE_BUFFER_WATER_MARK, RegionServer.waterMark(settings.maxTransfer()));
        }
        io.netty.channel.ChannelFuture connected;
        try {
            connected = bootstrap.connect(address.getHostString(), address.getPort());
        } catch (java.util.concurrent.RejectedExecutionException closed) {
            throw failure.apply("the fabric is closed", null);
        }
        if (!connected.awaitUninterruptibly(settings.connectTimeout().toMillis() + 1000, TimeUnit.MILLISECONDS) || !connected.isSuccess()) {
            connected.channel().close();
            Throwable cause = connected.cause();
            throw failure.apply(cause == null ? "no answer within " + settings.connectTimeout().toMillis() + " ms" : cause.toString(), cause);
        }
        return connected.channel();
    }

    void shutdown() {
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
}
