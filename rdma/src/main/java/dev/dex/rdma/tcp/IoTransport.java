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

    void shutdown() {
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
}
