package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.Test;

import com.typesafe.config.ConfigFactory;

import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * A memory node that comes (back) into the cluster fences every fabric client whose member is not in it: a compute node
 * the cluster downed while this memory node was away (restarting, or downed itself) kept its connection to the region,
 * which its process served all along, and was never fenced here. Anonymous clients (tools, the node's own) stay. A
 * client whose member joins only after the memory node is up (its gossip came later than its connection) is a live
 * member, and is not fenced.
 */
class MemoryNodeFencesAbsentClientsTest {
    /** An actor system running a memory node on {@code region}, which starts a cluster of its own. */
    private static ActorSystem<Void> memoryNodeJoiningItself(MemoryRegion region) {
        ActorSystem<Void> system = ActorSystem.create(Behaviors.setup(context -> {
            context.spawn(MemoryNode.create(region), "memory");
            return Behaviors.empty();
        }), "dex", ConfigFactory.parseString("pekko.cluster.roles = [memory]").withFallback(ActorTestKit.applicationTestConfig()));
        Cluster.get(system).manager().tell(Join.create(Cluster.get(system).selfMember().address()));
        return system;
    }

    @Test
    void aClientWithoutAMemberIsFencedWhenTheMemoryNodeIsUp() throws Exception {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 16L << 20, 64 << 10, 1, 16, PartitionTable.equalWidth(4, 0, 1000), 3,
                false, 8);
        try (TcpFabric fabric = new TcpFabric(); TcpFabric clients = new TcpFabric();
             MemoryRegion region = MemoryRegion.open(settings, fabric)) {
            RemoteMemory stranger = clients.connect(Map.of(0, region.region().endpoint()), 0x5150L);
            RemoteMemory anonymous = clients.connect(Map.of(0, region.region().endpoint()));
            UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
            long address = GlobalAddress.of(0, 64L << 10);
            stranger.write(address, word, 0, 8);
            assertTrue(fabric.connectedClients(0).contains(0x5150L), "the stranger is connected: " + fabric.connectedClients(0));

            ActorSystem<Void> system = memoryNodeJoiningItself(region);
            try {
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (fabric.connectedClients(0).contains(0x5150L)) {
                    assertTrue(System.nanoTime() < deadline, "the client without a member is fenced once the memory node is up");
                    Thread.sleep(50);
                }
                assertThrows(FencedException.class, () -> {
                    for (int attempt = 0; attempt < 3; attempt++) {
                        try {
                            stranger.write(address, word, 0, 8);
                        } catch (FencedException fenced) {
                            throw fenced;
                        } catch (dev.dex.rdma.FabricException closedFirst) {
                            // the connection was closed under the verb; the reconnect's greeting is refused
                        }
                    }
                }, "nothing of the stranger is applied any more");
                anonymous.write(address, word, 0, 8); // tools' anonymous connections are not fenced
            } finally {
                system.terminate();
                system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
                stranger.close();
                anonymous.close();
            }
        }
    }

    @Test
    void aClientWhoseMemberJoinsJustAfterTheMemoryNodeIsUpIsNotFenced() throws Exception {
        MemoryNode.Settings settings = new MemoryNode.Settings(0, 16L << 20, 64 << 10, 1, 16, PartitionTable.equalWidth(4, 0, 1000), 3,
                false, 8);
        ActorSystem<Void> late = ActorSystem.create(Behaviors.empty(), "dex", ActorTestKit.applicationTestConfig());
        try (TcpFabric fabric = new TcpFabric(); TcpFabric clients = new TcpFabric();
             MemoryRegion region = MemoryRegion.open(settings, fabric)) {
            long lateClient = Fabrics.clientId(Cluster.get(late).selfMember().uniqueAddress());
            RemoteMemory joining = clients.connect(Map.of(0, region.region().endpoint()), lateClient);
            UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
            long address = GlobalAddress.of(0, 64L << 10);
            joining.write(address, word, 0, 8);
            ActorSystem<Void> system = memoryNodeJoiningItself(region);
            try {
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (Cluster.get(system).selfMember().status() != org.apache.pekko.cluster.MemberStatus.up()) {
                    assertTrue(System.nanoTime() < deadline, "the memory node comes up");
                    Thread.sleep(20);
                }
                // The memory node is up and has seen the client without a member; the member joins now, within the grace.
                Cluster.get(late).manager().tell(Join.create(Cluster.get(system).selfMember().address()));
                Thread.sleep(AbsentClients.GRACE.multipliedBy(2).toMillis());
                boolean joined = false;
                for (org.apache.pekko.cluster.Member member : Cluster.get(system).state().getMembers()) {
                    joined |= member.uniqueAddress().equals(Cluster.get(late).selfMember().uniqueAddress());
                }
                assertTrue(joined, "the late member joined within the grace");
                assertTrue(fabric.connectedClients(0).contains(lateClient),
                        "a live member's client stays connected: " + fabric.connectedClients(0));
                joining.write(address, word, 0, 8); // and its verbs are applied
            } finally {
                system.terminate();
                system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
                joining.close();
            }
        } finally {
            late.terminate();
            late.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }
}
