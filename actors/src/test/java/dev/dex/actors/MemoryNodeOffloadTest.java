package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.UUID;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import com.typesafe.config.ConfigFactory;

import dev.dex.core.offload.OffloadRequest;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;

/**
 * The memory node's offload path refuses an offload that reaches its memory-side threads after its deadline
 * (the compute side stops waiting soon after and falls back to its caching path; executed late, the offload
 * would race that path on the same leaf), and runs one within its deadline.
 */
class MemoryNodeOffloadTest {
    private final String name = "offload-" + UUID.randomUUID();
    private final Fabric fabric = Fabrics.open(new Fabrics.Spec("local", name, null, 0));
    private final ActorTestKit kit = ActorTestKit.create(
            ConfigFactory.parseString("pekko.cluster.roles = [memory]").withFallback(ActorTestKit.applicationTestConfig()));

    @AfterEach
    void close() {
        kit.shutdownTestKit();
        Fabrics.closeLocal(name);
    }

    @Test
    void anOffloadPastItsDeadlineIsRefusedAndOneWithinItRuns() {
        ActorRef<MemoryNode.Command> node = kit.spawn(MemoryNode.create(new MemoryNode.Settings(0, 16L << 20, 64 << 10, 1, 16,
                PartitionTable.equalWidth(4, 0, 1000), 3), fabric));
        TestProbe<MemoryNode.Description> described = kit.createTestProbe();
        node.tell(new MemoryNode.Describe(described.getRef()));
        described.expectMessageClass(MemoryNode.Description.class, Duration.ofSeconds(10));
        long root;
        try (RemoteMemory memory = fabric.connect(0)) {
            root = Superblock.read(memory).root();
        }
        TestProbe<MemoryNode.OffloadResult> replies = kit.createTestProbe();
        long future = System.currentTimeMillis() + 60_000;

        node.tell(new MemoryNode.Offload(1, OffloadRequest.PROBE, OffloadRequest.PUT, 7, 70, root, new long[0], new long[0], 0, future,
                replies.getRef()));
        MemoryNode.OffloadResult probe = replies.expectMessageClass(MemoryNode.OffloadResult.class, Duration.ofSeconds(10));
        assertEquals(OffloadRequest.OK, probe.status(), "the probe ran");

        node.tell(new MemoryNode.Offload(2, OffloadRequest.EXECUTE, OffloadRequest.PUT, 7, 70, root, probe.path(), probe.versions(),
                probe.pathLength(), System.currentTimeMillis() - 1, replies.getRef()));
        MemoryNode.OffloadResult late = replies.expectMessageClass(MemoryNode.OffloadResult.class, Duration.ofSeconds(10));
        assertEquals(OffloadRequest.REJECTED, late.status(), "an execute past its deadline is refused");
        assertFalse(read(node, replies, root, 7).found(), "and did not put the key");

        node.tell(new MemoryNode.Offload(3, OffloadRequest.EXECUTE, OffloadRequest.PUT, 7, 70, root, probe.path(), probe.versions(),
                probe.pathLength(), future, replies.getRef()));
        assertEquals(OffloadRequest.OK, replies.expectMessageClass(MemoryNode.OffloadResult.class, Duration.ofSeconds(10)).status());
        MemoryNode.OffloadResult found = read(node, replies, root, 7);
        assertTrue(found.found(), "an execute within its deadline put the key");
        assertEquals(70, found.value());
    }

    private static MemoryNode.OffloadResult read(ActorRef<MemoryNode.Command> node, TestProbe<MemoryNode.OffloadResult> replies,
                                                 long root, long key) {
        node.tell(new MemoryNode.Offload(9, OffloadRequest.READ, OffloadRequest.LOOKUP, key, 0, root, new long[0], new long[0], 0, 0,
                replies.getRef()));
        MemoryNode.OffloadResult result = replies.expectMessageClass(MemoryNode.OffloadResult.class, Duration.ofSeconds(10));
        assertEquals(OffloadRequest.OK, result.status());
        return result;
    }
}
