package dev.dex.rdma.tcp;

import java.time.Duration;
import java.util.Objects;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

/**
 * How the {@code tcp} fabric serves and reaches regions. Every value is checked here, and a bad one fails
 * with a message that names its {@code dex.fabric.tcp} key.
 *
 * @param host                 the address a memory node's region server binds to and advertises
 * @param port                 its port; 0 picks a free one
 * @param connectionsPerServer connections a client keeps to each memory node; a calling thread always uses
 *                             the same one
 * @param window               requests in flight on one connection before further ones wait
 * @param verbTimeout          how long a verb may wait for its answer before the connection is closed and
 *                             the verb fails with {@link dev.dex.rdma.FabricException}
 * @param connectTimeout       how long opening a connection (and its handshake) may take
 * @param ioThreads            event-loop threads of one fabric object, shared by its servers and clients
 * @param spinNanos            how long a calling thread spins for its answer before it parks
 * @param maxTransfer          largest payload of one frame; longer reads and writes are split into several
 *                             requests, and a longer frame closes the connection
 * @param maxConnections       connections a memory node's region server keeps open at once; a further one is
 *                             closed at once, with a log line (about: event loops admit connections concurrently)
 */
public record TcpSettings(String host, int port, int connectionsPerServer, int window, Duration verbTimeout,
                          Duration connectTimeout, int ioThreads, long spinNanos, int maxTransfer, int maxConnections) {

    /**
     * The defaults: {@code dex.fabric.tcp} of this module's reference.conf, their one home (loopback, a free port, one
     * connection of 64 requests in flight; {@code docs/fabric.md} has the measurements behind them).
     */
    public static final TcpSettings DEFAULTS = fromConfig(ConfigFactory.defaultReferenceUnresolved().getConfig("dex.fabric.tcp"));

    /** Connections a region server admits unless told otherwise ({@code dex.fabric.tcp.max-connections}). */
    public static final int DEFAULT_MAX_CONNECTIONS = DEFAULTS.maxConnections();

    /** The settings of a {@code dex.fabric.tcp} section; a bad value fails naming its key. */
    public static TcpSettings fromConfig(Config tcp) {
        long maxTransfer = tcp.getBytes("max-transfer");
        if (maxTransfer > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("dex.fabric.tcp.max-transfer must be in [4096, " + (16 << 20) + "]: " + maxTransfer);
        }
        return new TcpSettings(tcp.getString("host"), tcp.getInt("port"), tcp.getInt("connections-per-server"),
                tcp.getInt("window"), tcp.getDuration("verb-timeout"), tcp.getDuration("connect-timeout"),
                tcp.getInt("io-threads"), tcp.getDuration("spin").toNanos(), (int) maxTransfer, tcp.getInt("max-connections"));
    }

    public TcpSettings {
        Objects.requireNonNull(host, "dex.fabric.tcp.host");
        if (host.isBlank()) {
            throw new IllegalArgumentException("dex.fabric.tcp.host must name an address");
        }
        check("port", port, 0, 65535);
        check("connections-per-server", connectionsPerServer, 1, 64);
        check("window", window, 1, 1 << 16);
        check("io-threads", ioThreads, 1, 256);
        check("max-transfer", maxTransfer, 4096, 16 << 20);
        check("max-connections", maxConnections, 1, 1 << 20);
        if (verbTimeout == null || verbTimeout.isNegative() || verbTimeout.isZero()) {
            throw new IllegalArgumentException("dex.fabric.tcp.verb-timeout must be > 0: " + verbTimeout);
        }
        if (connectTimeout == null || connectTimeout.isNegative() || connectTimeout.isZero()) {
            throw new IllegalArgumentException("dex.fabric.tcp.connect-timeout must be > 0: " + connectTimeout);
        }
        if (spinNanos < 0) {
            throw new IllegalArgumentException("dex.fabric.tcp.spin must be >= 0: " + spinNanos + " ns");
        }
    }

    /** Settings with the default limit of connections. */
    public TcpSettings(String host, int port, int connectionsPerServer, int window, Duration verbTimeout, Duration connectTimeout,
                       int ioThreads, long spinNanos, int maxTransfer) {
        this(host, port, connectionsPerServer, window, verbTimeout, connectTimeout, ioThreads, spinNanos, maxTransfer,
                DEFAULT_MAX_CONNECTIONS);
    }

    public TcpSettings withMaxConnections(int limit) {
        return new TcpSettings(host, port, connectionsPerServer, window, verbTimeout, connectTimeout, ioThreads, spinNanos,
                maxTransfer, limit);
    }

    public TcpSettings withHost(String newHost) {
        return new TcpSettings(newHost, port, connectionsPerServer, window, verbTimeout, connectTimeout, ioThreads, spinNanos,
                maxTransfer, maxConnections);
    }

    public TcpSettings withPort(int newPort) {
        return new TcpSettings(host, newPort, connectionsPerServer, window, verbTimeout, connectTimeout, ioThreads, spinNanos,
                maxTransfer, maxConnections);
    }

    public TcpSettings withIoThreads(int threads) {
        return new TcpSettings(host, port, connectionsPerServer, window, verbTimeout, connectTimeout, threads, spinNanos,
                maxTransfer, maxConnections);
    }

    public TcpSettings withVerbTimeout(Duration timeout) {
        return new TcpSettings(host, port, connectionsPerServer, window, timeout, connectTimeout, ioThreads, spinNanos,
                maxTransfer, maxConnections);
    }

    private static void check(String key, int value, int min, int max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException("dex.fabric.tcp." + key + " must be in [" + min + ", " + max + "]: " + value);
        }
    }
}
