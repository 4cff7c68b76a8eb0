package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import com.typesafe.config.ConfigFactory;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;

/**
 * A compute node's start-up never gives up: a memory node that does not answer its describe request is asked
 * again, and a memory pool that is not formatted yet is opened again later, until the node is ready. The
 * memory node here is a stand-in that drops requests as told; its region is real.
 */
class ComputeNodeStartTest {
    private final Fabric fabric = Fabrics.open(new Fabrics.Spec("local", "start-" + UUID.randomUUID(), null, 0));
    private final ExportedRegion region = fabric.export(0, 16L << 20, 64 << 10);
    private final ActorTestKit kit = ActorTestKit.create(
            ConfigFactory.parseString("pekko.cluster.roles = [compute]").withFallback(ActorTestKit.applicationTestConfig()));

    @AfterEach
    void close() {
        kit.shutdownTestKit();
        fabric.close();
    }

    /** A memory node that ignores its first {@code ignored} describe requests and counts them all. */
    private Behavior<MemoryNode.Command> memoryNode(int ignored, AtomicInteger asked) {
        return Behaviors.setup(context -> {
            context.getSystem().receptionist().tell(Receptionist.register(MemoryNode.KEY, context.getSelf()));
            return Behaviors.receive(MemoryNode.Command.class)
                    .onMessage(MemoryNode.Describe.class, describe -> {
                        if (asked.incrementAndGet() > ignored) {
                            describe.replyTo().tell(new MemoryNode.Description(0, region.region().length(), region.endpoint(),
                                    context.getSelf()));
                        }
                        return Behaviors.same();
                    })
                    .build();
        });
    }

    private ComputeNode.Settings settings() {
        return new ComputeNode.Settings(1, DexEngineSettings.dex(1 << 20), 1, Duration.ofSeconds(2), Duration.ofMillis(300),
                new Backoff(Duration.ofMillis(50), Duration.ofMillis(400)));
    }

    private TestProbe<Receptionist.Listing> readiness() {
        Cluster.get(kit.system()).manager().tell(Join.create(Cluster.get(kit.system()).selfMember().address()));
        TestProbe<Receptionist.Listing> probe = kit.createTestProbe();
        kit.system().receptionist().tell(Receptionist.subscribe(ComputeNode.KEY, probe.getRef()));
        assertTrue(probe.receiveMessage().getServiceInstances(ComputeNode.KEY).isEmpty());
        return probe;
    }

    private static void format(RemoteMemory memory) {
        Superblock.format(memory, new TreeSettings(1, 0.8));
        PartitionTable.store(memory, PartitionTable.equalWidth(4, 0, 1_000));
    }

    @Test
    void aMemoryNodeThatDoesNotAnswerIsAskedAgainUntilItDoes() {
        try (RemoteMemory memory = fabric.connect(0)) {
            format(memory);
        }
        TestProbe<Receptionist.Listing> ready = readiness();
        AtomicInteger asked = new AtomicInteger();
        kit.spawn(memoryNode(3, asked), "memory");
        kit.spawn(ComputeNode.create(settings(), fabric), "compute");

        Set<ActorRef<ComputeNode.Command>> nodes = ready.fishForMessage(Duration.ofSeconds(20),
                listing -> listing.getServiceInstances(ComputeNode.KEY).isEmpty()
                        ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.continueAndIgnore()
                        : org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.complete())
                .get(0).getServiceInstances(ComputeNode.KEY);
        assertEquals(1, nodes.size(), "the compute node became ready");
        assertEquals(4, asked.get(), "three unanswered requests, then the one answered");
    }

    /**
     * A ready compute node subscribes to two Receptionist keys (memory nodes, engine instances) through one
     * adapter: a later change of the memory nodes' listing must not reach the engine-instance handler (which
     * cannot read it and would stop the node).
     */
    @Test
    void aReadyNodeKeepsServingWhenTheMemoryNodesListingChanges() {
        try (RemoteMemory memory = fabric.connect(0)) {
            format(memory);
        }
        TestProbe<Receptionist.Listing> ready = readiness();
        AtomicInteger asked = new AtomicInteger();
        kit.spawn(memoryNode(0, asked), "memory");
        ActorRef<ComputeNode.Command> compute = kit.spawn(ComputeNode.create(settings(), fabric), "compute");
        ready.fishForMessage(Duration.ofSeconds(20), listing -> listing.getServiceInstances(ComputeNode.KEY).isEmpty()
                ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.continueAndIgnore()
                : org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.complete());

        TestProbe<Receptionist.Listing> memoryNodes = kit.createTestProbe();
        kit.system().receptionist().tell(Receptionist.subscribe(MemoryNode.KEY, memoryNodes.getRef()));
        memoryNodes.receiveMessage();
        kit.spawn(memoryNode(0, new AtomicInteger()), "another-memory");
        memoryNodes.fishForMessage(Duration.ofSeconds(10), listing -> listing.getServiceInstances(MemoryNode.KEY).size() == 2
                ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.complete()
                : org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.continueAndIgnore());

        TestProbe<ComputeNode.Status> status = kit.createTestProbe();
        for (int i = 0; i < 3; i++) {
            status.expectNoMessage(Duration.ofMillis(300)); // the node has the new listing by now
            compute.tell(new ComputeNode.GetStatus(status.getRef()));
            ComputeNode.Status answer = status.receiveMessage(Duration.ofSeconds(5));
            assertEquals(kit.system().address().toString(), answer.address(), "the compute node still answers");
        }
    }

    @Test
    void aPoolThatIsNotFormattedYetIsOpenedOnceItIs() throws Exception {
        TestProbe<Receptionist.Listing> ready = readiness();
        AtomicInteger asked = new AtomicInteger();
        kit.spawn(memoryNode(0, asked), "memory");
        kit.spawn(ComputeNode.create(settings(), fabric), "compute");

        ready.expectNoMessage(Duration.ofSeconds(2));
        assertEquals(1, asked.get(), "described once; opening the unformatted pool failed and is being retried");
        try (RemoteMemory memory = fabric.connect(0)) {
            format(memory);
        }
        Receptionist.Listing listing = ready.expectMessageClass(Receptionist.Listing.class, Duration.ofSeconds(10));
        assertEquals(1, listing.getServiceInstances(ComputeNode.KEY).size(), "ready once the tree was formatted");
    }
}
