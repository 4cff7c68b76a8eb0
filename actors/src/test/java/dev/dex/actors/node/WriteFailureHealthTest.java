package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.dex.actors.TestCluster;
import dev.dex.actors.client.DexClientApi;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.FaultInjectingRemoteMemory;
import dev.dex.rdma.FaultPlan;
import dev.dex.rdma.RemoteMemory;

/**
 * A compute node whose writes to the memory node keep failing (issue 26, item 2): after
 * {@code dex.compute.write-back-timeout} it reports itself not ready and leaves the cluster, and its partitions move to
 * a node that can write, with every acknowledged write (the redo log is on).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class WriteFailureHealthTest {
    private final TestCluster cluster = new TestCluster();

    @AfterEach
    void close() {
        cluster.close();
    }

    /** The test cluster's fabric, with every connection a compute node opens behind one switchable fault injector. */
    private static final class FaultyFabric implements Fabric {
        private final Fabric delegate;
        volatile FaultInjectingRemoteMemory connection;

        FaultyFabric(Fabric delegate) {
            this.delegate = delegate;
        }

        @Override
        public String transport() {
            return delegate.transport();
        }

        @Override
        public ExportedRegion export(int serverId, long regionLength, int chunkLength) {
            return delegate.export(serverId, regionLength, chunkLength);
        }

        @Override
        public RemoteMemory connect(int... serverIds) {
            return wrap(delegate.connect(serverIds));
        }

        @Override
        public RemoteMemory connect(Map<Integer, String> endpoints, long clientId) {
            return wrap(delegate.connect(endpoints, clientId));
        }

        private RemoteMemory wrap(RemoteMemory memory) {
            FaultInjectingRemoteMemory faulty = new FaultInjectingRemoteMemory(memory,
                    FaultPlan.none().withRate(1).withKinds(FaultPlan.Kind.WRITE, FaultPlan.Kind.CAS).withApplyFirst(0));
            faulty.enabled(false);
            connection = faulty;
            return faulty;
        }

        @Override
        public void close() {
            // the test cluster closes the delegate
        }
    }

    @Test
    void aNodeThatCannotWriteReportsNotReadyLeavesAndLosesNothing() throws Exception {
        cluster.memoryNode();
        FaultyFabric faulty = new FaultyFabric(cluster.fabric);
        ComputeNode.Settings settings = new ComputeNode.Settings(1, DexEngineSettings.dex(1 << 20), 2, Duration.ofSeconds(2),
                Duration.ofSeconds(5), Backoff.DEFAULTS, RedoLogSettings.ON, Duration.ofSeconds(5),
                Duration.ofMillis(500), Duration.ofSeconds(1));
        ActorSystem<Void> sick = cluster.computeNode(settings, faulty);
        DexClientApi client = cluster.client();
        cluster.awaitUp(Duration.ofSeconds(30));
        for (long key = 1; key <= 200; key++) {
            client.put(key * 4_999, key).toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
        NodeHealth.Readiness readiness = new NodeHealth.Readiness(Adapter.toClassic(sick));
        assertTrue(readiness.get().toCompletableFuture().get(), "ready while it can write");
        assertNull(NodeHealth.get(sick).problem());

        ActorSystem<Void> healthy = cluster.computeNode(1 << 20);
        cluster.awaitUp(Duration.ofSeconds(30));
        faulty.connection.enabled(true); // from now on no write or compare-and-swap of the first node is applied
        for (long key = 201; key <= 220; key++) {
            try {
                client.put(key * 4_999, key).toCompletableFuture().get(30, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException notNow) {
                // its partitions on the sick node cannot commit; the client is told
            }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (NodeHealth.get(sick).problem() == null && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        String problem = NodeHealth.get(sick).problem();
        assertNotNull(problem, "the node noticed it cannot write");
        assertTrue(problem.contains("writes to the memory nodes have failed"), problem);
        assertEquals(Boolean.FALSE, readiness.get().toCompletableFuture().get(), "/ready says 503");

        // It leaves; the healthy node serves every acknowledged write.
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!leftOrLeaving(healthy, Cluster.get(sick).selfMember().uniqueAddress()) && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        assertTrue(leftOrLeaving(healthy, Cluster.get(sick).selfMember().uniqueAddress()), "the sick node leaves the cluster");
        for (long key = 1; key <= 200; key++) {
            long k = key;
            java.util.OptionalLong value = retry(() -> client.get(k * 4_999).toCompletableFuture().get(30, TimeUnit.SECONDS));
            assertEquals(java.util.OptionalLong.of(key), value, "acknowledged write of key " + key * 4_999);
        }
        // A write to a partition the leaving node still holds fails clearly (it cannot commit) until the partition moves.
        retry(() -> client.put(7, 7).toCompletableFuture().get(30, TimeUnit.SECONDS));
    }

    private static boolean leftOrLeaving(ActorSystem<?> observer, org.apache.pekko.cluster.UniqueAddress node) {
        for (org.apache.pekko.cluster.Member member : Cluster.get(observer).state().getMembers()) {
            if (member.uniqueAddress().equals(node)) {
                return member.status() != MemberStatus.up() && member.status() != MemberStatus.joining();
            }
        }
        return true;
    }

    private interface Call<T> {
        T call() throws Exception;
    }

    /** A read that may meet a partition in the middle of its move: asked again until it answers. */
    private static <T> T retry(Call<T> call) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                return call.call();
            } catch (java.util.concurrent.ExecutionException e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }
}
