package dev.dex.actors.client;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.partition.EngineWorkers;
import dev.dex.actors.partition.LocalTree;
import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;
import dev.dex.actors.partition.PartitionRouter;

/**
 * A stand-in compute node whose entities run the real {@link Partition} on a local tree, behind a gate that can
 * hold one batch of writes back (a batch lost or delayed on its way) and that records the batches it lets through.
 */
final class GatedComputeNode {
    /** The real entity behind each partition's gate. */
    final Map<Integer, ActorRef<Partition.Command>> entities = new ConcurrentHashMap<>();
    /** While set, the next batch with a write is held instead of delivered. */
    final AtomicBoolean holdNextWrite = new AtomicBoolean();
    /** The batch held, if any: delivered only if the test does. */
    final AtomicReference<Partition.Execute> held = new AtomicReference<>();
    /** Every batch the gates let through, in the order they did. */
    final List<Partition.Execute> delivered = new CopyOnWriteArrayList<>();

    static Config config(String role) {
        return ConfigFactory.parseString("pekko.cluster.roles = [" + role + "]").withFallback(ActorTestKit.applicationTestConfig());
    }

    private Behavior<Partition.Command> gate(int partition, EngineWorkers workers) {
        return Behaviors.setup(context -> {
            ActorRef<Partition.Command> entity = context.spawn(Partition.create(partition, workers), "partition");
            entities.put(partition, entity);
            return Behaviors.receive(Partition.Command.class)
                    .onMessage(Partition.Execute.class, execute -> {
                        if (execute.ops().stream().anyMatch(op -> op.kind() != Ops.GET) && holdNextWrite.compareAndSet(true, false)) {
                            held.set(execute);
                        } else {
                            delivered.add(execute);
                            entity.tell(execute);
                        }
                        return Behaviors.same();
                    })
                    .onMessage(Partition.Handoff.class, handoff -> Behaviors.stopped())
                    .build();
        });
    }

    /** Starts the stand-in as the first member of a cluster (its own seed); the caller terminates it. */
    ActorSystem<Void> start(LocalTree tree) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            ActorRef<Partition.Command> region = ClusterSharding.get(context.getSystem()).init(
                    Entity.of(Partition.TYPE_KEY, entity -> gate(Integer.parseInt(entity.getEntityId()), tree.workers))
                            .withMessageExtractor(new Partition.IdExtractor())
                            .withStopMessage(Partition.Handoff.INSTANCE)
                            .withRole("compute"));
            context.spawn(PartitionRouter.create(region), "partition-router");
            context.getSystem().receptionist().tell(Receptionist.register(ComputeNode.KEY,
                    context.spawn(Behaviors.receive(ComputeNode.Command.class)
                            .onMessage(ComputeNode.GetPartitionTable.class, get -> {
                                // The engine's table: a test's split moves it.
                                dev.dex.core.partition.PartitionTable.Versioned served = tree.engine.servedTable(false);
                                get.replyTo().tell(new ComputeNode.PartitionTableReply(served.table().upperBounds(),
                                        served.table().ids(), served.version()));
                                return Behaviors.same();
                            })
                            .build(), "compute")));
            return Behaviors.empty();
        }), "dex", config("compute"));
        Cluster.get(system).manager().tell(Join.create(Cluster.get(system).selfMember().address()));
        return system;
    }

    /**
     * Starts the stand-in on {@code tree} and a client system that joins it, both added to {@code systems} (the caller
     * terminates them); returns the client's facade, its requests waiting up to {@code wait}.
     */
    DexClientApi startWithClient(LocalTree tree, java.time.Duration batchTimeout, java.time.Duration wait, List<ActorSystem<?>> systems)
            throws InterruptedException {
        ActorSystem<Void> node = start(tree);
        systems.add(node);
        ActorSystem<DexClient.Command> clientSystem = ActorSystem.create(DexClient.create(batchTimeout), "dex", config("client"));
        systems.add(clientSystem);
        Cluster.get(clientSystem).manager().tell(Join.create(Cluster.get(node).selfMember().address()));
        dev.dex.actors.TestCluster.awaitMembersUp(node, 2);
        return new DexClientApi(clientSystem, clientSystem, wait);
    }
}
