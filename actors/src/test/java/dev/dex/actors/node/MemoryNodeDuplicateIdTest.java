package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import com.typesafe.config.ConfigFactory;

import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * Two memory nodes started with the same server id on different hosts (here: two actor systems, each with a tcp
 * fabric of its own, where no file lock can notice) used to serve two regions under the same addresses. Now
 * the younger one refuses to serve and ends its actor system, and the older one keeps serving.
 */
class MemoryNodeDuplicateIdTest {
    private final TcpFabric olderFabric = new TcpFabric();
    private final TcpFabric youngerFabric = new TcpFabric();
    private ActorSystem<Void> older;
    private ActorSystem<Void> younger;

    private static ActorSystem<Void> memorySystem(TcpFabric fabric) {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 16L << 20, 64 << 10, 1, 16, PartitionTable.equalWidth(4, 0, 1000), 3, false, 8);
        return ActorSystem.create(Behaviors.setup(context -> {
            context.spawn(MemoryNode.create(settings, fabric), "memory");
            return Behaviors.empty();
        }), "dex", ConfigFactory.parseString("pekko.cluster.roles = [memory]").withFallback(ActorTestKit.applicationTestConfig()));
    }

    @AfterEach
    void close() throws Exception {
        for (ActorSystem<Void> system : new ActorSystem[] {younger, older}) {
            if (system != null) {
                system.terminate();
                system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
            }
        }
        youngerFabric.close();
        olderFabric.close();
    }

    @Test
    void theYoungerOfTwoMemoryNodesWithOneServerIdStopsAndTheOlderKeepsServing() throws Exception {
        older = memorySystem(olderFabric);
        Cluster.get(older).manager().tell(Join.create(Cluster.get(older).selfMember().address()));
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (Cluster.get(older).selfMember().status() != org.apache.pekko.cluster.MemberStatus.up()) {
            assertTrue(System.nanoTime() < deadline, "the first node came up");
            Thread.sleep(50);
        }
        younger = memorySystem(youngerFabric);
        Cluster.get(younger).manager().tell(Join.create(Cluster.get(older).selfMember().address()));

        younger.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);

        assertFalse(older.whenTerminated().isCompleted(), "the older memory node keeps running");
        // The stopped node left the cluster; once the Receptionist has caught up, one memory node is listed.
        java.util.Set<org.apache.pekko.actor.typed.ActorRef<MemoryNode.Command>> nodes;
        deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        do {
            Thread.sleep(100);
            Receptionist.Listing listing = AskPattern.<Receptionist.Command, Receptionist.Listing>ask(older.receptionist(),
                    replyTo -> Receptionist.find(MemoryNode.KEY, replyTo), Duration.ofSeconds(10), older.scheduler())
                    .toCompletableFuture().get(10, TimeUnit.SECONDS);
            nodes = listing.getServiceInstances(MemoryNode.KEY);
        } while (nodes.size() != 1 && System.nanoTime() < deadline);
        assertEquals(1, nodes.size(), "one memory node is listed: " + nodes);
        MemoryNode.Description description = AskPattern.<MemoryNode.Command, MemoryNode.Description>ask(nodes.iterator().next(),
                MemoryNode.Describe::new, Duration.ofSeconds(10), older.scheduler()).toCompletableFuture().get(10, TimeUnit.SECONDS);
        assertTrue(description.node().path().address().hasLocalScope(), "the older one serves: " + description.node());
        assertEquals(0, description.serverId());
    }
}
