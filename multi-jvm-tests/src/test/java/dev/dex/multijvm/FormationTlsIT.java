package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

import dev.dex.actors.client.DexClientApi;

/**
 * {@link FormationIT} with mutual TLS everywhere (the cluster's connections and the tcp fabric's), from the files
 * {@code dex certs} makes: the cluster forms from separate JVMs and serves. Then a compute node JVM with a certificate
 * of another CA, and one without TLS, cannot join that cluster; it keeps serving meanwhile.
 */
class FormationTlsIT extends FormationIT {
    @Override
    ClusterHarness newHarness(String... settings) {
        return ClusterHarness.tls(settings);
    }

    /** A compute node with a certificate of another CA, and one without TLS, cannot join the formed cluster; it keeps serving. */
    @Override
    void afterFormation(DexClientApi client) throws Exception {
        NodeProcess stranger = cluster.startComputeNodeAsync("stranger", "--tls", cluster.strangerKeyStore().toString());
        NodeProcess plain = cluster.startComputeNodeAsync("plain", ClusterHarness.PLAIN);
        stranger.awaitPort(ClusterHarness.NODE_START);
        plain.awaitPort(ClusterHarness.NODE_START);
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (System.nanoTime() < deadline) {
            assertFalse(cluster.isMember(stranger), "a node of another CA joined");
            assertFalse(cluster.isMember(plain), "a node without TLS joined");
            Thread.sleep(250);
        }
        assertTrue(stranger.logText().contains("SSLHandshakeException"), "the stranger's handshakes fail: see its log");
        assertTrue(plain.logText().contains("Couldn't join seed nodes"), "the plain node cannot join: see its log");
        cluster.log("neither the stranger nor the plain node joined in 15 s");

        assertFalse(client.put(16, 1_600).toCompletableFuture().get(60, TimeUnit.SECONDS) == null);
        assertEquals(OptionalLong.of(1_600), client.get(16).toCompletableFuture().get(60, TimeUnit.SECONDS), "the cluster serves");
        cluster.awaitMembersUp(4);
    }
}
