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

    /**
     * Fewer than {@link FormationIT}'s: the model mix is the same code over another transport, and what this test adds is
     * that it runs over TLS at all, and the strangers.
     */
    @Override
    int operations() {
        return 15_000;
    }

    /** A compute node with a certificate of another CA, and one without TLS, cannot join the formed cluster; it keeps serving. */
    @Override
    void afterFormation(DexClientApi client) throws Exception {
        NodeProcess stranger = cluster.startComputeNodeAsync("stranger", "--tls", cluster.strangerKeyStore().toString());
        // Its join attempts are given up on after 2 x seed-node-timeout; 1 s instead of 5 s each, so that it says so sooner.
        NodeProcess plain = cluster.startComputeNodeAsync("plain", ClusterHarness.PLAIN, "--set", "pekko.cluster.seed-node-timeout=1s");
        stranger.awaitPort(ClusterHarness.NODE_START);
        plain.awaitPort(ClusterHarness.NODE_START);
        // Until each has tried and failed (its log says how), and a little longer: neither ever becomes a member.
        long started = System.nanoTime();
        long deadline = started + Duration.ofSeconds(45).toNanos();
        long failedAt = 0;
        while (failedAt == 0 || System.nanoTime() - failedAt < Duration.ofSeconds(2).toNanos()) {
            assertFalse(cluster.isMember(stranger), "a node of another CA joined");
            assertFalse(cluster.isMember(plain), "a node without TLS joined");
            if (failedAt == 0 && stranger.logText().contains("SSLHandshakeException")
                    && plain.logText().contains("Couldn't join seed nodes")) {
                failedAt = System.nanoTime();
            }
            assertTrue(System.nanoTime() < deadline, "the stranger's handshakes fail and the plain node cannot join (see their"
                    + " logs) within 45 s");
            Thread.sleep(250);
        }
        cluster.log(String.format("neither the stranger nor the plain node joined; both failed within %.1f s",
                (failedAt - started) / 1e9));

        assertFalse(client.put(16, 1_600).toCompletableFuture().get(60, TimeUnit.SECONDS) == null);
        assertEquals(OptionalLong.of(1_600), client.get(16).toCompletableFuture().get(60, TimeUnit.SECONDS), "the cluster serves");
        cluster.awaitMembersUp(4);
    }
}
