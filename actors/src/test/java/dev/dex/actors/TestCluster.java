package dev.dex.actors;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.Fabric;

/**
 * Actor systems of one cluster in this JVM, on loopback with free ports, sharing one local fabric: the
 * memory node, compute nodes and a client each in a system of their own, as separate processes would be.
 */
final class TestCluster implements AutoCloseable {
    static final int PARTITIONS = 16;
    static final long KEY_RANGE = 1_000_000;

    final String fabricName = "test-" + UUID.randomUUID();
    final Fabric fabric = Fabrics.open(new Fabrics.Spec("local", fabricName, null, 0));
    final List<ActorSystem<?>> systems = new ArrayList<>();
    private ActorSystem<?> first;

    private Config config(String role) {
        return ConfigFactory.parseString("pekko.cluster.roles = [" + role + "]").withFallback(ActorTestKit.applicationTestConfig());
    }

    private ActorSystem<Void> start(String role, Behavior<?> node, String name) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            context.spawn(node, name);
            return Behaviors.empty();
        }), "dex", config(role));
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(first == null ? system.address() : Cluster.get(first).selfMember().address()));
        if (first == null) {
            first = system;
        }
        return system;
    }

    ActorSystem<Void> memoryNode() {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 64L << 20, 64 << 10, 1, 256,
                PartitionTable.equalWidth(PARTITIONS, 0, KEY_RANGE), 3);
        return start("memory", MemoryNode.create(settings, fabric), "memory");
    }

    /** A memory node that formats a tree of keys {@code keyBytes} wide, with {@code table} as its partitions. */
    ActorSystem<Void> memoryNode(int keyBytes, PartitionTable table) {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 64L << 20, 64 << 10, 1, 256, table, 3, false, keyBytes);
        return start("memory", MemoryNode.create(settings, fabric), "memory");
    }

    ActorSystem<Void> computeNode(long cacheBytes) {
        ComputeNode.Settings settings = new ComputeNode.Settings(1, DexEngineSettings.dex(cacheBytes), 2, Duration.ofSeconds(2));
        return start("compute", ComputeNode.create(settings, fabric), "compute");
    }

    /** A compute node with {@code settings}, reaching the memory node through {@code through} (a test's wrapper). */
    ActorSystem<Void> computeNode(ComputeNode.Settings settings, Fabric through) {
        return start("compute", ComputeNode.create(settings, through), "compute");
    }

    /** The last client system {@link #client()} started: its guardian is the client actor. */
    ActorSystem<DexClient.Command> clientSystem;

    /** A client system and the client actor's Java facade. */
    DexClientApi client() {
        return client(Duration.ofSeconds(5));
    }

    /** A client whose batches go again after {@code batchTimeout} without an answer. */
    DexClientApi client(Duration batchTimeout) {
        ActorSystem<DexClient.Command> system = ActorSystem.create(DexClient.create(batchTimeout), "dex", config("client"));
        clientSystem = system;
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(first).selfMember().address()));
        return new DexClientApi(system, system, batchTimeout.multipliedBy(6));
    }

    /** A client whose API converts byte-string keys to {@code keyBytes}-byte keys. */
    DexClientApi client(int keyBytes) {
        ActorSystem<DexClient.Command> system = ActorSystem.create(DexClient.create(Duration.ofSeconds(5)), "dex",
                ConfigFactory.parseString("dex.tree.key-bytes = " + keyBytes).withFallback(config("client")));
        clientSystem = system;
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(first).selfMember().address()));
        return new DexClientApi(system, system, Duration.ofSeconds(30));
    }

    /** Waits until every system sees every member Up. */
    void awaitUp(Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        while (System.nanoTime() < deadline) {
            boolean all = true;
            for (ActorSystem<?> system : systems) {
                Cluster cluster = Cluster.get(system);
                int up = 0;
                for (org.apache.pekko.cluster.Member member : cluster.state().getMembers()) {
                    if (member.status() == MemberStatus.up()) {
                        up++;
                    }
                }
                all &= up == systems.size() && cluster.selfMember().status() == MemberStatus.up();
            }
            if (all) {
                return;
            }
            Thread.sleep(50);
        }
        throw new AssertionError("cluster of " + systems.size() + " did not come up in " + max);
    }

    @Override
    public void close() {
        terminateAll(systems);
        Fabrics.closeLocal(fabricName);
    }

    /** Terminates {@code systems}, the last started first, and waits for each. */
    static void terminateAll(List<ActorSystem<?>> systems) {
        for (int i = systems.size() - 1; i >= 0; i--) {
            systems.get(i).terminate();
        }
        for (ActorSystem<?> system : systems) {
            try {
                system.getWhenTerminated().toCompletableFuture().get(30, java.util.concurrent.TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new IllegalStateException("actor system did not terminate", e);
            }
        }
    }

    /** Waits until {@code system} sees {@code count} members Up (30 s at most). */
    static void awaitMembersUp(ActorSystem<?> system, int count) throws InterruptedException {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            long up = 0;
            for (org.apache.pekko.cluster.Member member : Cluster.get(system).state().getMembers()) {
                up += member.status() == MemberStatus.up() ? 1 : 0;
            }
            if (up == count) {
                return;
            }
            Thread.sleep(50);
        }
        throw new AssertionError(count + " members up within 30 s");
    }
}
