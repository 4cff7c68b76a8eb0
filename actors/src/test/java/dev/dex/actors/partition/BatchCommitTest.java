package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.dex.core.cache.DexEngine;
import dev.dex.rdma.local.LocalFabric;

/**
 * A batch of writes on the workers is made durable as a group: its records reach the partition's redo log
 * with one fabric write before the batch is answered, and when that write fails the batch's writes are
 * answered FAILED ("not durable"), never OK, and so are its reads, which may have seen them. A read waits
 * for the writes of other batches it may have seen.
 */
class BatchCommitTest {
    private static Ops.Op put(long key, long value) {
        return new Ops.Op(Ops.PUT, key, value, 0);
    }

    private static Ops.Op get(long key) {
        return new Ops.Op(Ops.GET, key, 0, 0);
    }

    @Test
    void aBatchOfWritesIsOneLogWriteAndAFailedOneIsNotAcknowledged() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            SwitchableMemory memory = SwitchableMemory.onFreshTree(fabric);
            DexEngine engine = memory.openLoggedEngine();
            engine.acquire(0);
            EngineWorkers workers = new EngineWorkers(engine, 2, "batch-commit-test");
            try {
                // Warm up: the root leaf is cached, so the puts below change only the cache and the log.
                workers.execute(0, List.of(get(1))).toCompletableFuture().get(10, TimeUnit.SECONDS);
                List<Ops.Op> batch = new ArrayList<>();
                for (long k = 1; k <= 20; k++) {
                    batch.add(put(k, k * 10));
                }
                int before = memory.writes;
                Ops.Results results = workers.execute(0, batch).toCompletableFuture().get(10, TimeUnit.SECONDS);
                results.results().forEach(r -> assertEquals(Ops.OK, r.status(), r.error()));
                assertEquals(1, memory.writes - before, "20 writes of one batch reach the log with one fabric write");
                assertEquals(21, engine.log(0).nextLsn(), "one record per write");

                memory.failWrites = true;
                Ops.Results failed = workers.execute(0, List.of(put(5, 55), get(6))).toCompletableFuture().get(10, TimeUnit.SECONDS);
                Ops.Result write = failed.results().get(0);
                assertEquals(Ops.FAILED, write.status(), "a write whose record is not in the log is not acknowledged");
                assertTrue(write.error().contains("not durable"), write.error());
                Ops.Result read = failed.results().get(1);
                assertEquals(Ops.FAILED, read.status(), "a read that may have seen a write that is not durable is not answered");
                assertTrue(read.error().contains("not durable"), read.error());
            } finally {
                memory.failWrites = false;
                workers.close();
            }
        }
    }
}
