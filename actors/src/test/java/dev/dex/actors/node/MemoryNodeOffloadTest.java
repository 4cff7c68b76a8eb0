package dev.dex.actors.node;

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

import dev.dex.core.node.LeafOps;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.core.partition.OwnershipTable;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;

/**
 * The memory node's offload path refuses an offload that reaches its memory-side threads after its deadline
 * (the compute side stops waiting soon after and falls back to its caching path; executed late, the offload
 * would race that path on the same leaf), and runs one within its deadline; and malformed messages do not take
 * it down.
 */
class MemoryNodeOffloadTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private final String name = "offload-" + UUID.randomUUID();
    private final Fabric fabric = Fabrics.open(new Fabrics.Spec("local", name, null, 0));
    private final ActorTestKit kit = ActorTestKit.create(
            ConfigFactory.parseString("pekko.cluster.roles = [memory]").withFallback(ActorTestKit.applicationTestConfig()));

    @AfterEach
    void close() {
        kit.shutdownTestKit();
        Fabrics.closeLocal(name);
    }

    private static final PartitionTable PARTITIONS = PartitionTable.equalWidth(4, 0, 1000);

    /**
     * A memory node serving a fresh tree (4 partitions), once it has answered a Describe; partition 0 (key 7's)
     * owned at epoch 0, as a compute node's acquire without a redo log leaves it.
     */
    private ActorRef<MemoryNode.Command> startedNode() {
        ActorRef<MemoryNode.Command> node = kit.spawn(MemoryNode.create(new MemoryNode.Settings(0, 16L << 20, 64 << 10, 1, 16,
                PARTITIONS, 3, false, 8), fabric));
        TestProbe<MemoryNode.Description> described = kit.createTestProbe();
        node.tell(new MemoryNode.Describe(described.getRef()));
        described.expectMessageClass(MemoryNode.Description.class, Duration.ofSeconds(10));
        registerOwner(0, 0);
        return node;
    }

    private void registerOwner(int partition, long epoch) {
        try (RemoteMemory memory = fabric.connect(0)) {
            OwnershipTable.register(memory, PARTITIONS.count(), partition, epoch, PARTITIONS.lowerExclusive(partition), PARTITIONS.upperInclusive(partition), 8);
        }
    }

    /**
     * An offload from anyone but the current owner of the partition it names is refused and changes nothing: an owner that was superseded (its epoch is older), one that names another partition than
     * its key's, and one that names no epoch of a partition that has an owner. Before, any member could read or
     * write any key of any leaf through the memory node.
     */
    @Test
    void onlyThePartitionsCurrentOwnerMayOffload() {
        ActorRef<MemoryNode.Command> node = startedNode();
        long root = root();
        TestProbe<MemoryNode.OffloadResult> replies = kit.createTestProbe();
        long future = System.currentTimeMillis() + 60_000;
        registerOwner(0, 2); // a new owner took partition 0 over at epoch 2

        // The refusal's log line is rate-limited across tests (one a second), so only SubtreeExecutorTest checks its text.
        node.tell(new MemoryNode.Offload(1, OffloadRequest.WRITE, LeafOps.PUT, 0, 0, 7, 70, root,
                future, replies.getRef()));
        assertEquals(OffloadRequest.STALE, replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT).status(),
                "the superseded owner's write");
        node.tell(new MemoryNode.Offload(2, OffloadRequest.READ, LeafOps.LOOKUP, 1, 0, 7, 0, root,
                future, replies.getRef()));
        assertEquals(OffloadRequest.STALE, replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT).status(),
                "a key of partition 0 named as partition 1's (which has no owner)");
        registerOwner(1, 1);
        node.tell(new MemoryNode.Offload(3, OffloadRequest.READ, LeafOps.LOOKUP, 1, 1, 7, 0, root,
                future, replies.getRef()));
        assertEquals(OffloadRequest.STALE, replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT).status(),
                "partition 1's owner asking for a key of partition 0");

        node.tell(new MemoryNode.Offload(4, OffloadRequest.READ, LeafOps.LOOKUP, 0, 2, 7, 0, root,
                future, replies.getRef()));
        assertEquals(OffloadRequest.OK, replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT).status(),
                "the current owner's lookup");
        node.tell(new MemoryNode.Offload(5, OffloadRequest.WRITE, LeafOps.INSERT, 0, 0, 7, 70, root, future, replies.getRef()));
        assertEquals(OffloadRequest.STALE, replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT).status(),
                "the superseded owner's insert");
        node.tell(new MemoryNode.Offload(6, OffloadRequest.READ, LeafOps.LOOKUP, 0, 2, 7, 0, root,
                future, replies.getRef()));
        MemoryNode.OffloadResult read = replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT);
        assertEquals(OffloadRequest.OK, read.status());
        assertFalse(read.found(), "no refused offload put key 7");
    }

    private long root() {
        try (RemoteMemory memory = fabric.connect(0)) {
            return Superblock.read(memory).root();
        }
    }

    @Test
    void anOffloadPastItsDeadlineIsRefusedAndOneWithinItRuns() {
        ActorRef<MemoryNode.Command> node = startedNode();
        long root = root();
        TestProbe<MemoryNode.OffloadResult> replies = kit.createTestProbe();
        long future = System.currentTimeMillis() + 60_000;

        node.tell(new MemoryNode.Offload(2, OffloadRequest.WRITE, LeafOps.PUT, 0, 0, 7, 70, root, System.currentTimeMillis() - 1,
                replies.getRef()));
        MemoryNode.OffloadResult late = replies.expectMessageClass(MemoryNode.OffloadResult.class, Duration.ofSeconds(10));
        assertEquals(OffloadRequest.REJECTED, late.status(), "a write past its deadline is refused");
        assertFalse(read(node, replies, root, 7).found(), "and did not put the key");

        node.tell(new MemoryNode.Offload(3, OffloadRequest.WRITE, LeafOps.PUT, 0, 0, 7, 70, root, future, replies.getRef()));
        assertEquals(OffloadRequest.OK, replies.expectMessageClass(MemoryNode.OffloadResult.class, Duration.ofSeconds(10)).status());
        MemoryNode.OffloadResult found = read(node, replies, root, 7);
        assertTrue(found.found(), "a write within its deadline put the key");
        assertEquals(70, found.value());
    }

    /**
     * Malformed messages (a missing reply address, a write of a lookup, a phase of an older build's two-message write)
     * are dropped or refused, and the node
     * goes on serving with its data. Before, each of them threw in the actor, which stopped and gave its region up
     * under the compute nodes using it: one bad message took the index's memory away.
     */
    @Test
    void malformedMessagesAreRefusedAndTheNodeKeepsServingItsData() {
        ActorRef<MemoryNode.Command> node = startedNode();
        long root = root();
        TestProbe<MemoryNode.Description> described = kit.createTestProbe();
        TestProbe<MemoryNode.OffloadResult> replies = kit.createTestProbe();
        long future = System.currentTimeMillis() + 60_000;
        node.tell(new MemoryNode.Offload(2, OffloadRequest.WRITE, LeafOps.PUT, 0, 0, 7, 70, root, future, replies.getRef()));
        assertEquals(OffloadRequest.OK, replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT).status(), "key 7 is put");

        // Each of these stopped the actor before.
        node.tell(new MemoryNode.Describe(null));
        node.tell(new MemoryNode.AllocateChunk(null));
        node.tell(new MemoryNode.Offload(3, OffloadRequest.READ, LeafOps.LOOKUP, 0, 0, 7, 0, root, 0, null));
        node.tell(new MemoryNode.Offload(4, OffloadRequest.WRITE, LeafOps.LOOKUP, 0, 0, 7, 0, root, 0,
                replies.getRef()));
        node.tell(new MemoryNode.Offload(5, 1, LeafOps.PUT, 0, 0, 7, 1, root, future, replies.getRef()));
        for (long id : new long[] {4, 5}) {
            MemoryNode.OffloadResult refused = replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT);
            assertEquals(id, refused.id());
            assertEquals(OffloadRequest.STALE, refused.status(), "malformed offload " + id + " is refused");
        }

        // Still serving, with its data: it describes itself, grants chunks, and reads key 7 back.
        node.tell(new MemoryNode.Describe(described.getRef()));
        assertEquals(0, described.expectMessageClass(MemoryNode.Description.class, WAIT).serverId());
        TestProbe<MemoryNode.ChunkGranted> chunks = kit.createTestProbe();
        node.tell(new MemoryNode.AllocateChunk(chunks.getRef()));
        MemoryNode.ChunkGranted chunk = chunks.expectMessageClass(MemoryNode.ChunkGranted.class, WAIT);
        assertTrue(chunk.error() == null && chunk.address() != 0, chunk.toString());
        node.tell(new MemoryNode.Offload(6, OffloadRequest.READ, LeafOps.LOOKUP, 0, 0, 7, 0, root, 0,
                replies.getRef()));
        MemoryNode.OffloadResult found = replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT);
        assertEquals(OffloadRequest.OK, found.status());
        assertTrue(found.found());
        assertEquals(70, found.value());
    }

    /**
     * An offload naming an address outside the memory node's region, or one not word-aligned, is refused without
     * touching memory, and the node says so (at most one such line a second).
     */
    @Test
    void anOffloadOutsideTheRegionIsRefusedAndLogged() throws InterruptedException {
        ActorRef<MemoryNode.Command> node = startedNode();
        // Refusals are logged at most once a second across the JVM: let a refusal of another test's pass.
        Thread.sleep(1_100);
        TestProbe<MemoryNode.OffloadResult> replies = kit.createTestProbe();
        long outside = dev.dex.rdma.GlobalAddress.of(0, 16L << 20);
        MemoryNode.OffloadResult refused = org.apache.pekko.actor.testkit.typed.javadsl.LoggingTestKit
                .warn("lies outside memory server 0's region of 16777216 bytes").expect(kit.system(), () -> {
                    node.tell(new MemoryNode.Offload(1, OffloadRequest.READ, LeafOps.LOOKUP, 0, 0, 7, 0, outside, 0, replies.getRef()));
                    return replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT);
                });
        assertEquals(OffloadRequest.STALE, refused.status());
        node.tell(new MemoryNode.Offload(2, OffloadRequest.WRITE, LeafOps.PUT, 0, 0, 7, 70, root() + 3, 0,
                replies.getRef()));
        MemoryNode.OffloadResult misaligned = replies.expectMessageClass(MemoryNode.OffloadResult.class, WAIT);
        assertEquals(OffloadRequest.STALE, misaligned.status(), "a misaligned node address is refused too");
        assertEquals(OffloadRequest.OK, read(node, replies, root(), 7).status(), "and the node keeps serving");
    }

    private static MemoryNode.OffloadResult read(ActorRef<MemoryNode.Command> node, TestProbe<MemoryNode.OffloadResult> replies,
                                                 long root, long key) {
        node.tell(new MemoryNode.Offload(9, OffloadRequest.READ, LeafOps.LOOKUP, 0, 0, key, 0, root, 0,
                replies.getRef()));
        MemoryNode.OffloadResult result = replies.expectMessageClass(MemoryNode.OffloadResult.class, Duration.ofSeconds(10));
        assertEquals(OffloadRequest.OK, result.status());
        return result;
    }
}
