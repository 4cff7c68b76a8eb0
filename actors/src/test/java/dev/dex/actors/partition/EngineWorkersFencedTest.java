package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * A compute node that a memory node fenced learns it from its first failed operation: the batch fails (never
 * acknowledged) and the workers tell their owner once, which then leaves the cluster (ComputeNode).
 */
class EngineWorkersFencedTest {
    @Test
    void aFencedNodesFailedBatchTellsTheOwnerOnce() throws Exception {
        try (TcpFabric fabric = new TcpFabric()) {
            ExportedRegion region = fabric.export(0, 16L << 20, 64 << 10);
            Map<Integer, String> endpoints = Map.of(0, region.endpoint());
            try (RemoteMemory admin = fabric.connect(endpoints)) {
                Superblock.format(admin, TreeSettings.defaults());
                PartitionTable.store(admin, PartitionTable.equalWidth(1, 0, 1_000_000));
            }
            RemoteMemory memory = fabric.connect(endpoints, 0xFE7CEDL);
            DexEngine engine = DexEngine.open(memory, DexEngineSettings.withCache("no-offload", 8L << 20), null, RedoLogSettings.ON);
            engine.acquire(0);
            AtomicInteger told = new AtomicInteger();
            try (EngineWorkers workers = new EngineWorkers(engine, 2, "fenced-test")) {
                workers.onFenced(told::incrementAndGet);
                Ops.Results ok = workers.execute(0, List.of(new Ops.Op(Ops.PUT, 1, 10, 0))).toCompletableFuture().get(10, TimeUnit.SECONDS);
                assertEquals(Ops.OK, ok.results().get(0).status(), ok.results().get(0).error());
                assertEquals(0, told.get(), "not fenced yet");

                fabric.fence(0, 0xFE7CEDL);
                for (int i = 0; i < 3; i++) {
                    Ops.Result failed = workers.execute(0, List.of(new Ops.Op(Ops.PUT, 2 + i, 20, 0))).toCompletableFuture()
                            .get(10, TimeUnit.SECONDS).results().get(0);
                    assertEquals(Ops.FAILED, failed.status(), "a fenced node's write is never acknowledged");
                    assertTrue(failed.error().contains("fenced"), failed.error());
                }
                assertEquals(1, told.get(), "the owner is told once");
            }
            memory.close();
        }
    }
}
