package dev.dex.cluster;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;

import picocli.CommandLine.Option;

/** Options every command that joins a cluster shares. */
final class NodeOptions {
    @Option(names = "--seed", paramLabel = "HOST:PORT",
            description = "A seed node to join (repeatable). Without one, the node starts a new cluster.")
    List<String> seeds = new ArrayList<>();

    @Option(names = "--host", paramLabel = "HOST",
            description = "Address this node listens on (default: dex.node.host, 127.0.0.1).")
    String host;

    @Option(names = "--port", paramLabel = "PORT",
            description = "Port this node listens on; 0 picks a free one (default: dex.node.port, 0).")
    Integer port;

    @Option(names = "--fabric", paramLabel = "TRANSPORT",
            description = "local (one JVM only), shm (processes of one host share regions in --shm-dir), tcp (memory nodes "
                    + "serve their regions over TCP at --host; any host) or disni (RDMA verbs; docs/rdma-disni.md) "
                    + "(default: dex.fabric.transport if --config or --set gives it, else dex.node.fabric, shm).")
    String fabric;

    @Option(names = "--shm-dir", paramLabel = "DIR",
            description = "Directory of the shm fabric's region files (default: dex.fabric.shm-directory, /dev/shm/dex).")
    Path shmDirectory;

    @Option(names = "--tls", paramLabel = "KEYSTORE",
            description = "Mutual TLS with this node's key store (made by 'dex certs'), and the truststore.p12 and password"
                    + " files beside it: only nodes with a certificate of the same CA can talk to this one.")
    Path tlsKeyStore;

    @Option(names = "--config", paramLabel = "FILE", description = "A HOCON file of settings (dex.*, pekko.*) to apply.")
    Path configFile;

    @Option(names = "--set", paramLabel = "KEY=VALUE", description = "One setting, e.g. --set dex.compute.cache-size=64MiB (repeatable).")
    List<String> settings = new ArrayList<>();

    /**
     * The overrides these options make, checked. An option not given takes its setting: from --config or --set, else
     * from reference.conf ({@code dex.node.*}), so every default is written in one place.
     */
    Config overrides() {
        Config config = ConfigFactory.empty();
        for (String setting : settings) {
            int eq = setting.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--set takes KEY=VALUE, not '" + setting + "'");
            }
            config = ConfigFactory.parseString(setting).withFallback(config);
        }
        if (configFile != null) {
            if (!Files.isReadable(configFile)) {
                throw new IllegalArgumentException("--config " + configFile + ": no such readable file");
            }
            config = config.withFallback(ConfigFactory.parseFile(configFile.toFile()));
        }
        Config settings = config.withFallback(ConfigFactory.defaultReference());
        if (host == null) {
            host = settings.getString("dex.node.host");
        }
        if (port == null) {
            port = settings.getInt("dex.node.port");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("--port must be in [0, 65535]: " + port);
        }
        if (fabric == null) {
            fabric = config.hasPath("dex.fabric.transport") ? config.getString("dex.fabric.transport") : settings.getString("dex.node.fabric");
        }
        config = config.withValue("dex.fabric.transport", ConfigValueFactory.fromAnyRef(fabric));
        for (String key : new String[] {"dex.fabric.tcp.host", "dex.fabric.disni.host"}) {
            if (!config.hasPath(key)) {
                // A memory node serves its region where it serves the cluster, unless told otherwise.
                config = config.withValue(key, ConfigValueFactory.fromAnyRef(host));
            }
        }
        if (tlsKeyStore != null) {
            Path dir = tlsKeyStore.toAbsolutePath().getParent();
            config = config.withValue("dex.security.tls", ConfigValueFactory.fromAnyRef(true))
                    .withValue("dex.security.key-store", ConfigValueFactory.fromAnyRef(tlsKeyStore.toAbsolutePath().toString()))
                    .withValue("dex.security.trust-store", ConfigValueFactory.fromAnyRef(dir.resolve(Certs.TRUST_STORE).toString()))
                    .withValue("dex.security.password-file", ConfigValueFactory.fromAnyRef(dir.resolve(Certs.PASSWORD).toString()));
        }
        if (shmDirectory != null) {
            config = config.withValue("dex.fabric.shm-directory", ConfigValueFactory.fromAnyRef(shmDirectory.toString()));
        }
        seeds.forEach(DexNodes::seedAddress);
        return config;
    }

    /** The full configuration of a node with {@code role}. */
    Config nodeConfig(Config extra, String role) {
        Config base = DexNodes.config(extra.withFallback(overrides()));
        return DexNodes.nodeConfig(base, role, host, port, seeds);
    }
}
