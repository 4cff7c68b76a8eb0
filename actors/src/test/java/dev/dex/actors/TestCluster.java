package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

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

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.node.Fabrics;
import dev.dex.actors.node.MemoryNode;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.Fabric;

/**
 * Actor systems of one cluster in this JVM, on loopback with free ports, sharing one local fabric: the
 * memory node, compute nodes and a client each in a system of their own, as separate processes would be.
 */
public final class TestCluster implements AutoCloseable {
    public static final int PARTITIONS = 16;
    public static final long KEY_RANGE = 1_000_000;

    public final String fabricName = "test-" + UUID.randomUUID();
    public final Fabric fabric = Fabrics.open(new Fabrics.Spec("local", fabricName, null, 0));
    public final List<ActorSystem<?>> systems = new ArrayList<>();
    private ActorSystem<?> first;
    /** Settings of every system of this cluster over the tests' own. */
    private final Config overrides;

    public TestCluster() {
        this(ConfigFactory.empty());
    }

    /** A cluster whose systems all take {@code overrides} over the tests' configuration. */
    public TestCluster(Config overrides) {
        this.overrides = overrides;
    }

    private Config config(String role) {
        return ConfigFactory.parseString("pekko.cluster.roles = [" + role + "]").withFallback(overrides)
                .withFallback(ActorTestKit.applicationTestConfig());
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

    public ActorSystem<Void> memoryNode() {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 64L << 20, 64 << 10, 1, 256,
                PartitionTable.equalWidth(PARTITIONS, 0, KEY_RANGE), 3, false, 8);
        return start("memory", MemoryNode.create(settings, fabric), "memory");
    }

    /** A memory node that formats a tree of keys {@code keyBytes} wide, with {@code table} as its partitions. */
    public ActorSystem<Void> memoryNode(int keyBytes, PartitionTable table) {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 64L << 20, 64 << 10, 1, 256, table, 3, false, keyBytes);
        return start("memory", MemoryNode.create(settings, fabric), "memory");
    }

    /** A memory node serving {@code region}, in a system of {@code roles} (comma-separated, e.g. "memory, voter"). */
    public ActorSystem<Void> memoryNode(dev.dex.actors.node.MemoryRegion region, String roles) {
        return start(roles, MemoryNode.create(region), "memory");
    }

    /** A compute node with {@code settings} on {@code through}, in a system of {@code roles}. */
    public ActorSystem<Void> computeNode(ComputeNode.Settings settings, Fabric through, String roles) {
        return start(roles, ComputeNode.create(settings, through), "compute");
    }

    public ActorSystem<Void> computeNode(long cacheBytes) {
        ComputeNode.Settings settings = new ComputeNode.Settings(1, DexEngineSettings.dex(cacheBytes), 2, Duration.ofSeconds(2));
        return start("compute", ComputeNode.create(settings, fabric), "compute");
    }

    /** A compute node with {@code settings}, reaching the memory node through {@code through} (a test's wrapper). */
    public ActorSystem<Void> computeNode(ComputeNode.Settings settings, Fabric through) {
        return start("compute", ComputeNode.create(settings, through), "compute");
    }

    /** The last client system {@link #client()} started: its guardian is the client actor. */
    public ActorSystem<DexClient.Command> clientSystem;

    /** A client system and the client actor's Java facade. */
    public DexClientApi client() {
        return client(Duration.ofSeconds(5));
    }

    /** A client whose batches go again after {@code batchTimeout} without an answer. */
    public DexClientApi client(Duration batchTimeout) {
        ActorSystem<DexClient.Command> system = ActorSystem.create(DexClient.create(batchTimeout), "dex", config("client"));
        clientSystem = system;
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(first).selfMember().address()));
        return new DexClientApi(system, system, batchTimeout.multipliedBy(6));
    }

    /** A client whose API converts byte-string keys to {@code keyBytes}-byte keys. */
    public DexClientApi client(int keyBytes) {
        ActorSystem<DexClient.Command> system = ActorSystem.create(DexClient.create(Duration.ofSeconds(5)), "dex",
                ConfigFactory.parseString("dex.tree.key-bytes = " + keyBytes).withFallback(config("client")));
        clientSystem = system;
        systems.add(system);
        Cluster.get(system).manager().tell(Join.create(Cluster.get(first).selfMember().address()));
        return new DexClientApi(system, system, Duration.ofSeconds(30));
    }

    /** Waits until every system sees every member Up. */
    public void awaitUp(Duration max) throws InterruptedException {
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

    /**
     * Stops {@code systems}, the last started first, and waits for each. The whole cluster stops
     * ({@code LeaveDrain.CLUSTER_STOP}): no compute node drains its partitions to one that stops next, which cost a
     * test several seconds of teardown.
     */
    public static void terminateAll(List<ActorSystem<?>> systems) {
        for (int i = systems.size() - 1; i >= 0; i--) {
            org.apache.pekko.actor.CoordinatedShutdown.get(org.apache.pekko.actor.typed.javadsl.Adapter.toClassic(systems.get(i)))
                    .runAll(dev.dex.actors.partition.LeaveDrain.CLUSTER_STOP);
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
    public static void awaitMembersUp(ActorSystem<?> system, int count) throws InterruptedException {
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

    /**
     * Reads every key of {@code model} back through {@code client}, and scans across every partition: the cluster
     * holds exactly the model's entries.
     */
    public static void verify(DexClientApi client, TreeMap<Long, Long> model) throws Exception {
        List<CompletableFuture<OptionalLong>> reads = new ArrayList<>();
        List<Long> keys = new ArrayList<>(model.keySet());
        for (long key : keys) {
            reads.add(client.get(key).toCompletableFuture());
        }
        for (int i = 0; i < keys.size(); i++) {
            OptionalLong value = reads.get(i).get(60, TimeUnit.SECONDS);
            assertEquals(OptionalLong.of(model.get(keys.get(i))), value, "key " + keys.get(i));
        }
        List<DexClientApi.Entry> all = client.scan(Long.MIN_VALUE, model.size() + 10).toCompletableFuture().get(60, TimeUnit.SECONDS);
        assertEquals(model.size(), all.size(), "a scan across every partition returns every entry");
        int i = 0;
        for (Map.Entry<Long, Long> e : model.entrySet()) {
            assertEquals(e.getKey(), all.get(i).key());
            assertEquals(e.getValue(), all.get(i).value());
            i++;
        }
    }
}
