package dev.dex.rdma.disni;

import java.time.Duration;
import java.util.Objects;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

/**
 * How the {@code disni} fabric serves and reaches regions over RDMA. Every value is checked here, and a bad
 * one fails with a message that names its {@code dex.fabric.disni} key.
 *
 * @param host           the address of the RDMA interface (an IPoIB or RoCE netdev address) a memory node
 *                       listens on and advertises; a wildcard address cannot be advertised and is refused
 * @param port           the RDMA connection manager port it listens on; 0 picks a free one
 * @param verbTimeout    how long one RDMA READ or WRITE may wait for its completion before it fails with
 *                       {@link dev.dex.rdma.FabricException} and the connection to that server is given up
 * @param connectTimeout how long resolving a memory server's address and connecting to it may take
 * @param maxTransfer    bytes of one READ or WRITE work request, a power of two; each calling thread
 *                       registers a staging buffer of this size, and longer verbs are split
 * @param queueDepth     work requests one connection keeps in flight; further verbs wait for a free slot
 */
public record DisniSettings(String host, int port, Duration verbTimeout, Duration connectTimeout, int maxTransfer,
                            int queueDepth) {

    /** Smallest {@link #maxTransfer}: one page. */
    public static final int MIN_MAX_TRANSFER = 4096;
    /** Largest {@link #maxTransfer}: 64 MiB per thread of staging memory is already generous. */
    public static final int MAX_MAX_TRANSFER = 64 << 20;

    /** The defaults: {@code dex.fabric.disni} of this module's reference.conf, their one home. */
    public static final DisniSettings DEFAULTS = fromConfig(ConfigFactory.defaultReferenceUnresolved().getConfig("dex.fabric.disni"));

    /** The settings of a {@code dex.fabric.disni} section; a bad value fails naming its key. */
    public static DisniSettings fromConfig(Config disni) {
        long maxTransfer = disni.getBytes("max-transfer");
        if (maxTransfer > MAX_MAX_TRANSFER) {
            throw new IllegalArgumentException("dex.fabric.disni.max-transfer must be a power of two in ["
                    + MIN_MAX_TRANSFER + ", " + MAX_MAX_TRANSFER + "]: " + maxTransfer);
        }
        return new DisniSettings(disni.getString("host"), disni.getInt("port"), disni.getDuration("verb-timeout"),
                disni.getDuration("connect-timeout"), (int) maxTransfer, disni.getInt("queue-depth"));
    }

    public DisniSettings {
        Objects.requireNonNull(host, "dex.fabric.disni.host");
        if (host.isBlank()) {
            throw new IllegalArgumentException("dex.fabric.disni.host must name the address of an RDMA interface");
        }
        if (isWildcard(host)) {
            throw new IllegalArgumentException("dex.fabric.disni.host must name the address of an RDMA interface, "
                    + "not a wildcard address, because clients connect to what it advertises: " + host);
        }
        check("port", port, 0, 65535);
        check("queue-depth", queueDepth, 1, 4096);
        if (maxTransfer < MIN_MAX_TRANSFER || maxTransfer > MAX_MAX_TRANSFER || Integer.bitCount(maxTransfer) != 1) {
            throw new IllegalArgumentException("dex.fabric.disni.max-transfer must be a power of two in ["
                    + MIN_MAX_TRANSFER + ", " + MAX_MAX_TRANSFER + "]: " + maxTransfer);
        }
        checkPositive("verb-timeout", verbTimeout);
        checkPositive("connect-timeout", connectTimeout);
    }

    public DisniSettings withHost(String newHost) {
        return new DisniSettings(newHost, port, verbTimeout, connectTimeout, maxTransfer, queueDepth);
    }

    public DisniSettings withPort(int newPort) {
        return new DisniSettings(host, newPort, verbTimeout, connectTimeout, maxTransfer, queueDepth);
    }

    public DisniSettings withVerbTimeout(Duration timeout) {
        return new DisniSettings(host, port, timeout, connectTimeout, maxTransfer, queueDepth);
    }

    public DisniSettings withConnectTimeout(Duration timeout) {
        return new DisniSettings(host, port, verbTimeout, timeout, maxTransfer, queueDepth);
    }

    public DisniSettings withMaxTransfer(int bytes) {
        return new DisniSettings(host, port, verbTimeout, connectTimeout, bytes, queueDepth);
    }

    public DisniSettings withQueueDepth(int depth) {
        return new DisniSettings(host, port, verbTimeout, connectTimeout, maxTransfer, depth);
    }

    private static boolean isWildcard(String host) {
        String bare = host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
        return bare.equals("0.0.0.0") || bare.equals("::") || bare.equals("0:0:0:0:0:0:0:0");
    }

    private static void check(String key, int value, int min, int max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException("dex.fabric.disni." + key + " must be in [" + min + ", " + max + "]: " + value);
        }
    }

    private static void checkPositive(String key, Duration value) {
        if (value == null || value.isNegative() || value.isZero()) {
            throw new IllegalArgumentException("dex.fabric.disni." + key + " must be > 0: " + value);
        }
        if (value.compareTo(Duration.ofMillis(Integer.MAX_VALUE)) > 0) {
            throw new IllegalArgumentException("dex.fabric.disni." + key + " must be below " + Integer.MAX_VALUE + " ms: " + value);
        }
    }
}
