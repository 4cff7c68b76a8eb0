package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LoggingTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * A partition whose redo log lost an append (the memory node was unreachable for a moment) used to fail every
 * later commit until it happened to be acquired again. Now its entity gives the partition up and stops; the
 * next batch starts it again, its acquire replays the log up to the hole under a new epoch, and the partition
 * serves with every acknowledged write and none of the unacknowledged one. Its warning names the cause: an
 * unreachable memory node, or a fence (then the node must leave, not acquire the partition again).
 */
class PartitionLogFailureTest {
    private final ActorTestKit kit = ActorTestKit.create();
    private final LocalFabric fabric = new LocalFabric();

    @AfterEach
    void close() {
        kit.shutdownTestKit();
        fabric.close();
    }

    private Ops.Results execute(ActorRef<Partition.Command> entity, List<Ops.Op> ops) {
        TestProbe<Ops.Results> replies = kit.createTestProbe();
        entity.tell(new Partition.Execute(EntityProbes.DIRECT, ops, replies.getRef()));
        return replies.expectMessageClass(Ops.Results.class, Duration.ofSeconds(15));
    }

    @Test
    void aPartitionWhoseLogLostAnAppendIsGivenUpAndServesAgainWithEveryAcknowledgedWrite() throws Exception {
        SwitchableMemory memory = SwitchableMemory.onFreshTree(fabric);
        DexEngine engine = memory.openLoggedEngine();
        EngineWorkers workers = new EngineWorkers(engine, 2, "log-failure-test");
        try {
            ActorRef<Partition.Command> first = kit.spawn(Partition.create(0, workers));
            List<Ops.Op> puts = new ArrayList<>();
            for (long k = 1; k <= 10; k++) {
                puts.add(new Ops.Op(Ops.PUT, k, k * 10, 0));
            }
            execute(first, puts).results().forEach(r -> assertEquals(Ops.OK, r.status(), r.error()));

            memory.failWrites = true;
            Ops.Result lost = LoggingTestKit.warn("its redo log could not be written because the memory node was unreachable")
                    .expect(kit.system(), () -> execute(first, List.of(new Ops.Op(Ops.PUT, 5, 55, 0))).results().get(0));
            assertEquals(Ops.FAILED, lost.status(), "the write whose record did not reach the log is not acknowledged");
            memory.failWrites = false;

            TestProbe<Object> watcher = kit.createTestProbe();
            watcher.expectTerminated(first, Duration.ofSeconds(15));
            assertFalse(engine.holds(0), "the entity gave its partition up");

            ActorRef<Partition.Command> second = kit.spawn(Partition.create(0, workers));
            List<Ops.Op> gets = new ArrayList<>();
            for (long k = 1; k <= 10; k++) {
                gets.add(new Ops.Op(Ops.GET, k, 0, 0));
            }
            List<Ops.Result> found = execute(second, gets).results();
            for (int i = 0; i < 10; i++) {
                assertEquals(Ops.OK, found.get(i).status(), found.get(i).error());
                assertEquals((i + 1) * 10L, found.get(i).value(), "key " + (i + 1) + " has its acknowledged value");
            }
            assertEquals(Ops.OK, execute(second, List.of(new Ops.Op(Ops.PUT, 11, 110, 0))).results().get(0).status(),
                    "and the partition takes writes again");
            assertTrue(engine.log(0).epoch() > 1, "under a new epoch of its log");
        } finally {
            workers.close();
        }
    }

    @Test
    void aLogLostToAFenceSaysSoAndThatTheNodeMustLeave() throws Exception {
        try (TcpFabric tcp = new TcpFabric()) {
            ExportedRegion region = tcp.export(0, 16L << 20, 64 << 10);
            Map<Integer, String> endpoints = Map.of(0, region.endpoint());
            try (RemoteMemory admin = tcp.connect(endpoints)) {
                Superblock.format(admin, TreeSettings.defaults());
                PartitionTable.store(admin, PartitionTable.equalWidth(1, 0, 1_000_000));
            }
            long client = 0xFE7CEDL;
            try (RemoteMemory memory = tcp.connect(endpoints, client)) {
                DexEngine engine = DexEngine.open(memory, DexEngineSettings.withCache("no-offload", 8L << 20).withLeafAdmission(1.0), null,
                        RedoLogSettings.ON);
                try (EngineWorkers workers = new EngineWorkers(engine, 2, "log-fenced-test")) {
                    ActorRef<Partition.Command> entity = kit.spawn(Partition.create(0, workers));
                    assertEquals(Ops.OK, execute(entity, List.of(new Ops.Op(Ops.PUT, 1, 10, 0))).results().get(0).status());

                    tcp.fence(0, client);
                    // The leaf is cached: the put itself succeeds, and only its commit, the append to the log, is fenced.
                    Ops.Result lost = LoggingTestKit.warn("its redo log could not be written because a memory node fenced this"
                                    + " compute node")
                            .withMessageContains("this node must leave the cluster")
                            .expect(kit.system(), () -> execute(entity, List.of(new Ops.Op(Ops.PUT, 1, 11, 0))).results().get(0));
                    assertEquals(Ops.FAILED, lost.status(), "a fenced node's write is never acknowledged");
                    kit.createTestProbe().expectTerminated(entity, Duration.ofSeconds(15));
                }
            }
        }
    }

    @Test
    void aPartitionWhoseCacheFailedIsToldApartFromOneWhoseLogFailed() {
        String cache = Partition.cacheLost(3, new dev.dex.rdma.FabricException("memory server 0 did not answer a WRITE"));
        assertTrue(cache.contains("structure could not be written") && cache.contains("replay"), cache);
        assertTrue(cache.contains("did not answer a WRITE"), cache);
        String log = Partition.logLost(3, new dev.dex.rdma.FabricException("memory server 0 did not answer a WRITE"));
        assertTrue(log.contains("redo log could not be written"), log);
    }
}
