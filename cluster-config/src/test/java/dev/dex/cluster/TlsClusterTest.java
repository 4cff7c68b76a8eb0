package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;

/**
 * Mutual TLS, as the node commands set it up from {@code dex certs}' files: a memory node, a compute node and a
 * client with certificates of one CA form a cluster and serve, the memory over the tcp fabric with TLS too; a node with a certificate of another CA, and a
 * node without TLS, cannot join it, and the cluster keeps serving. All on loopback, in this JVM.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TlsClusterTest {
    private static final Duration JOIN = Duration.ofSeconds(30);
    private static final Duration REFUSED_FOR = Duration.ofSeconds(6);

    @TempDir
    static Path dir;

    private final List<ActorSystem<?>> systems = new ArrayList<>();
    private final String fabric = "tls-" + UUID.randomUUID();
    private String seed;
    private DexClientApi client;

    private Config config(String role, Path keyStore, List<String> seeds) {
        Config overrides = ConfigFactory.parseString("""
                dex.fabric.transport = tcp
                dex.fabric.local-name = "%s"
                dex.memory.region-size = 64MiB
                dex.tree.partitions = 4
                dex.compute.cache-size = 8MiB
                """.formatted(fabric));
        if (keyStore != null) {
            overrides = overrides.withFallback(ConfigFactory.parseString("""
                    dex.security.tls = on
                    dex.security.key-store = "%s"
                    dex.security.trust-store = "%s"
                    dex.security.password-file = "%s"
                    """.formatted(keyStore, keyStore.resolveSibling(Certs.TRUST_STORE), keyStore.resolveSibling(Certs.PASSWORD))));
        }
        return DexNodes.nodeConfig(DexNodes.config(overrides), role, "127.0.0.1", 0, seeds);
    }

    @BeforeAll
    void startATlsCluster() throws Exception {
        StringWriter progress = new StringWriter();
        Certs.create(dir.resolve("cluster"), List.of("memory", "compute", "client"), new PrintWriter(progress));
        Certs.create(dir.resolve("other"), List.of("stranger"), new PrintWriter(progress));
        Path certs = dir.resolve("cluster");
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(certs)));
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(certs.resolve("ca.p12"))));

        Config memory = config("memory", certs.resolve("memory.p12"), List.of());
        assertEquals("tls-tcp", memory.getString("pekko.remote.artery.transport"));
        assertTrue(DexSettings.from(memory).fabric().tls() != null, "the tcp fabric's connections use the same certificates");
        ActorSystem<Void> memorySystem = DexNodes.memoryNode(memory, DexSettings.from(memory));
        systems.add(memorySystem);
        seed = DexNodes.hostPort(memorySystem);
        Config compute = config("compute", certs.resolve("compute.p12"), List.of(seed));
        systems.add(DexNodes.computeNode(compute, DexSettings.from(compute)));
        Config clientConfig = config("client", certs.resolve("client.p12"), List.of(seed));
        ActorSystem<DexClient.Command> clientSystem = DexNodes.client(clientConfig, DexSettings.from(clientConfig));
        systems.add(clientSystem);
        ClusterMember.awaitSelfUp(clientSystem, JOIN);
        client = new DexClientApi(clientSystem, clientSystem, Duration.ofSeconds(30));
    }

    @AfterAll
    void stop() throws Exception {
        for (ActorSystem<?> system : systems) {
            system.terminate();
        }
        for (ActorSystem<?> system : systems) {
            system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void aTlsClusterServesAndRefusesNodesWithoutItsCertificates() throws Exception {
        assertFalse(client.put(42, 4200).toCompletableFuture().get(30, TimeUnit.SECONDS), "inserted");
        assertEquals(OptionalLong.of(4200), client.get(42).toCompletableFuture().get(30, TimeUnit.SECONDS));
        int members = Cluster.get(systems.get(0)).state().members().size();
        assertEquals(3, members);

        Config stranger = config("client", dir.resolve("other/stranger.p12"), List.of(seed));
        // It trusts the cluster's CA, so it accepts the cluster's certificates; the cluster does not accept its own.
        String engine = "pekko.remote.artery.ssl.config-ssl-engine.";
        Config trusting = ConfigFactory.parseString(engine + "trust-store = \"" + dir.resolve("cluster/truststore.p12") + "\"\n"
                        + engine + "trust-store-password = \"" + Certs.readPassword(dir.resolve("cluster/password")) + "\"")
                .withFallback(stranger);
        Config plain = config("client", null, List.of(seed));
        assertEquals("tcp", plain.getString("pekko.remote.artery.transport"));
        // The three outsiders try at once: each must stay out for the whole window, which they then share.
        List<java.util.concurrent.CompletableFuture<Void>> refusals = List.of(refusedAsync(stranger, "mutual TLS"),
                refusedAsync(trusting, "mutual TLS"), refusedAsync(plain, "plain TCP"));
        assertAConnectionWithoutACertificateIsRefused();
        for (java.util.concurrent.CompletableFuture<Void> refusal : refusals) {
            try {
                refusal.get(120, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException failed) {
                if (failed.getCause() instanceof AssertionError assertion) {
                    throw assertion;
                }
                throw failed;
            }
        }

        assertEquals(members, Cluster.get(systems.get(0)).state().members().size(), "nobody else joined");
        assertTrue(client.put(42, 4201).toCompletableFuture().get(30, TimeUnit.SECONDS), "the cluster still serves");
        assertEquals(OptionalLong.of(4201), client.get(42).toCompletableFuture().get(30, TimeUnit.SECONDS));
    }

    @Test
    void tlsWithoutItsFilesIsAClearErrorAtStart() {
        Config missing = ConfigFactory.parseString("dex.security.tls = on").withFallback(DexNodes.config(ConfigFactory.empty()));
        IllegalArgumentException unset = assertThrows(IllegalArgumentException.class,
                () -> DexNodes.nodeConfig(missing, "client", "127.0.0.1", 0, List.of()));
        assertTrue(unset.getMessage().contains("dex.security.key-store is not set"), unset.getMessage());
        Config wrong = ConfigFactory.parseString("dex.security.tls = on\ndex.security.key-store = \"" + dir.resolve("nope.p12") + "\"")
                .withFallback(missing);
        IllegalArgumentException absent = assertThrows(IllegalArgumentException.class,
                () -> DexNodes.nodeConfig(wrong, "client", "127.0.0.1", 0, List.of()));
        assertTrue(absent.getMessage().contains("nope.p12: no such readable file"), absent.getMessage());
        IllegalArgumentException twice = assertThrows(IllegalArgumentException.class,
                () -> Certs.create(dir.resolve("cluster"), List.of("again"), new PrintWriter(new StringWriter())));
        assertTrue(twice.getMessage().contains("holds a CA already"), twice.getMessage());
    }

    /**
     * A TLS connection that trusts the cluster's CA but presents no certificate of its own is refused during the
     * handshake (mutual authentication): without it, such a stranger could send the node messages it need not
     * hear answers to. Before the refusal, the node would wait for the stranger's first frame (a read timeout).
     */
    private void assertAConnectionWithoutACertificateIsRefused() throws Exception {
        java.security.KeyStore trust = java.security.KeyStore.getInstance("PKCS12");
        char[] password = Certs.readPassword(dir.resolve("cluster/password")).toCharArray();
        try (var in = Files.newInputStream(dir.resolve("cluster/truststore.p12"))) {
            trust.load(in, password);
        }
        javax.net.ssl.TrustManagerFactory trustManagers = javax.net.ssl.TrustManagerFactory.getInstance(
                javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
        trustManagers.init(trust);
        javax.net.ssl.SSLContext context = javax.net.ssl.SSLContext.getInstance("TLSv1.3");
        context.init(null, trustManagers.getTrustManagers(), null);
        int port = Integer.parseInt(seed.substring(seed.lastIndexOf(':') + 1));
        try (javax.net.ssl.SSLSocket socket = (javax.net.ssl.SSLSocket) context.getSocketFactory().createSocket("127.0.0.1", port)) {
            socket.setSoTimeout(5_000);
            int read;
            try {
                socket.startHandshake();
                socket.getOutputStream().write(new byte[] {'A', 'K', 'K', 'A'});
                socket.getOutputStream().flush();
                read = socket.getInputStream().read();
            } catch (javax.net.ssl.SSLException | java.net.SocketException refused) {
                return; // the handshake failed (no client certificate), and the node closed the connection
            } catch (java.net.SocketTimeoutException accepted) {
                throw new AssertionError("a connection without a client certificate was accepted; the node waits for its data");
            }
            assertEquals(-1, read, "the node closed the connection of a client without a certificate");
        }
    }

    /** A client system with {@code config} never becomes Up, and says why. */
    private java.util.concurrent.CompletableFuture<Void> refusedAsync(Config config, String says) {
        java.util.concurrent.CompletableFuture<Void> done = new java.util.concurrent.CompletableFuture<>();
        Thread thread = new Thread(() -> {
            try {
                assertRefused(config, says);
                done.complete(null);
            } catch (Throwable failed) {
                done.completeExceptionally(failed);
            }
        }, "outsider-" + says);
        thread.setDaemon(true);
        thread.start();
        return done;
    }

    private void assertRefused(Config config, String says) throws Exception {
        ActorSystem<DexClient.Command> outsider = DexNodes.client(config, DexSettings.from(config));
        try {
            IllegalStateException refused = assertThrows(IllegalStateException.class, () -> ClusterMember.awaitSelfUp(outsider, REFUSED_FOR));
            assertTrue(refused.getMessage().contains(says), refused.getMessage());
        } finally {
            outsider.terminate();
            outsider.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }
}
