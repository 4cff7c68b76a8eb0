package dev.dex.cluster;

import java.util.List;
import java.util.stream.Collectors;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.node.Fabrics;
import dev.dex.actors.node.MemoryNode;
import dev.dex.rdma.Fabric;

/**
 * Starts the nodes of a DEX cluster, each in an actor system of its own named {@code dex}: a memory node
 * (role {@code memory}), a compute node ({@code compute}) or a client ({@code client}).
 *
 * <p>Configuration, highest first: {@code overrides} (the command line's), system properties,
 * {@code application.conf}, {@code dex-cluster.conf} (the cluster's Pekko settings), the libraries'
 * {@code reference.conf}.
 */
public final class DexNodes {
    public static final String SYSTEM = "dex";

    private DexNodes() {
    }

    /** The configuration stack with {@code overrides} on top. */
    public static Config config(Config overrides) {
        return overrides
                .withFallback(ConfigFactory.defaultOverrides())
                .withFallback(ConfigFactory.defaultApplication())
                .withFallback(ConfigFactory.parseResources("dex-cluster.conf"))
                .withFallback(ConfigFactory.defaultReference())
                .resolve();
    }

    /**
     * A node's configuration: its role file ({@code dex-memory.conf}, {@code dex-compute.conf},
     * {@code dex-client.conf}), host, port and seed nodes ("host:port"; empty: join itself), over {@code base}.
     */
    public static Config nodeConfig(Config base, String role, String host, int port, List<String> seeds) {
        Config roleFile = ConfigFactory.parseResources("dex-" + role + ".conf");
        if (roleFile.isEmpty()) {
            throw new IllegalArgumentException("no role file dex-" + role + ".conf; roles are memory, compute and client");
        }
        Config node = ConfigFactory.empty()
                .withValue("pekko.remote.artery.canonical.hostname", ConfigValueFactory.fromAnyRef(host))
                .withValue("pekko.remote.artery.canonical.port", ConfigValueFactory.fromAnyRef(port));
        if (!seeds.isEmpty()) {
            node = node.withValue("pekko.cluster.seed-nodes", ConfigValueFactory.fromIterable(
                    seeds.stream().map(DexNodes::seedAddress).collect(Collectors.toList())));
        }
        return withSecurity(node.withFallback(roleFile).withFallback(base));
    }

    /**
     * {@code config} with Artery's mutual TLS when {@code dex.security.tls} is on: transport {@code tls-tcp}, the
     * node's key store, the CA's trust store and their password (from {@code dex.security.password-file}),
     * TLS 1.3, peers required to present a certificate of that CA. Each path is checked here, so a typo is a
     * clear error at start rather than a node that cannot talk to anyone.
     */
    static Config withSecurity(Config config) {
        if (!config.hasPath("dex.security.tls") || !config.getBoolean("dex.security.tls")) {
            return config;
        }
        java.nio.file.Path keyStore = readable(config, "dex.security.key-store");
        java.nio.file.Path trustStore = readable(config, "dex.security.trust-store");
        String password = Certs.readPassword(readable(config, "dex.security.password-file"));
        String engine = "pekko.remote.artery.ssl.config-ssl-engine.";
        return ConfigFactory.empty()
                .withValue("pekko.remote.artery.transport", ConfigValueFactory.fromAnyRef("tls-tcp"))
                .withValue(engine + "key-store", ConfigValueFactory.fromAnyRef(keyStore.toString()))
                .withValue(engine + "trust-store", ConfigValueFactory.fromAnyRef(trustStore.toString()))
                .withValue(engine + "key-store-password", ConfigValueFactory.fromAnyRef(password))
                .withValue(engine + "key-password", ConfigValueFactory.fromAnyRef(password))
                .withValue(engine + "trust-store-password", ConfigValueFactory.fromAnyRef(password))
                .withValue(engine + "protocol", ConfigValueFactory.fromAnyRef("TLSv1.3"))
                .withValue(engine + "require-mutual-authentication", ConfigValueFactory.fromAnyRef(true))
                .withFallback(config);
    }

    private static java.nio.file.Path readable(Config config, String key) {
        String value = config.getString(key);
        if (value.isBlank()) {
            throw new IllegalArgumentException("dex.security.tls is on but " + key + " is not set (bin/dex certs makes the files;"
                    + " --tls DIR/NAME.p12 sets them)");
        }
        java.nio.file.Path path = java.nio.file.Path.of(value);
        if (!java.nio.file.Files.isReadable(path)) {
            throw new IllegalArgumentException(key + " = " + path + ": no such readable file");
        }
        return path;
    }

    /** "host:port" as an actor system address of the cluster. */
    static String seedAddress(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0 || colon == hostPort.length() - 1) {
            throw new IllegalArgumentException("a seed node is host:port, not '" + hostPort + "'");
        }
        try {
            int port = Integer.parseInt(hostPort.substring(colon + 1));
            if (port < 1 || port > 65535) {
                throw new NumberFormatException();
            }
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("seed node '" + hostPort + "': the port must be 1..65535");
        }
        return "pekko://" + SYSTEM + "@" + hostPort;
    }

    public static ActorSystem<Void> memoryNode(Config config, DexSettings settings) {
        Fabric fabric = Fabrics.open(settings.fabric());
        return closeWith(start(config, MemoryNode.create(settings.memory(), fabric), "memory"), fabric, settings);
    }

    public static ActorSystem<Void> computeNode(Config config, DexSettings settings) {
        Fabric fabric = Fabrics.open(settings.fabric());
        return closeWith(start(config, ComputeNode.create(settings.compute(), fabric), "compute"), fabric, settings);
    }

    /** A node's own fabric object (tcp's event loops, shm's mappings) lives as long as its actor system. */
    private static ActorSystem<Void> closeWith(ActorSystem<Void> system, Fabric fabric, DexSettings settings) {
        if (settings.fabric().perNode()) {
            system.getWhenTerminated().thenRun(fabric::close);
        }
        return system;
    }

    /** A client node: the actor system is the client actor itself. */
    public static ActorSystem<DexClient.Command> client(Config config, DexSettings settings) {
        ActorSystem<DexClient.Command> system = ActorSystem.create(DexClient.create(settings.batchTimeout(), settings.clientWindow()), SYSTEM, config);
        joinSelfIfNoSeeds(system, config);
        operatorEndpoint(system, config);
        return system;
    }

    /**
     * The node's actor runs on Pekko's dispatcher for blocking work: it blocks while it opens the memory pool (a fabric
     * connection, the engine's first reads) and while it stops (its workers' end), and the default dispatcher, one
     * thread per core, also runs Artery's streams (dex-cluster.conf). The hot path (partitions, routers) stays there.
     */
    private static ActorSystem<Void> start(Config config, Behavior<?> node, String name) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            context.spawn(node, name, org.apache.pekko.actor.typed.DispatcherSelector.blocking());
            return Behaviors.empty();
        }), SYSTEM, config);
        joinSelfIfNoSeeds(system, config);
        operatorEndpoint(system, config);
        return system;
    }

    /** Starts the node's operator endpoint (OperatorEndpoint); a bad setting stops the node again. */
    static void operatorEndpoint(ActorSystem<?> system, Config config) {
        try {
            OperatorEndpoint.start(system, config);
        } catch (RuntimeException e) {
            system.terminate();
            throw e;
        }
    }

    /** {@code config} without the operator endpoint: for short-lived clients (dex client, status, YCSB's). */
    public static Config withoutEndpoint(Config config) {
        return ConfigFactory.parseString("dex.management.enabled = off").withFallback(config);
    }

    private static void joinSelfIfNoSeeds(ActorSystem<?> system, Config config) {
        if (config.getStringList("pekko.cluster.seed-nodes").isEmpty()) {
            Cluster.get(system).manager().tell(Join.create(Cluster.get(system).selfMember().address()));
        }
    }

    /** "host:port" of a running node, to give other nodes as a seed. */
    public static String hostPort(ActorSystem<?> system) {
        var address = Cluster.get(system).selfMember().address();
        return address.getHost().orElse("127.0.0.1") + ":" + address.getPort().orElse(0);
    }
}
