package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.agrona.MutableDirectBuffer;
import org.junit.jupiter.api.Test;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;

import dev.dex.core.cache.CacheStats;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/**
 * {@code dex.compute.warm-on-acquire}: the workers read a partition's inner nodes into the cache when they acquire it,
 * before its first batch; a warm-up that fails is logged and leaves the partition held and serving.
 */
class WarmOnAcquireTest {
    private static final int KEYS = 20_000;
    private static final int PARTITIONS = 4;

    /** A connection whose reads of whole nodes fail while told to (a memory node that stops answering, or fenced us). */
    private static final class NodeReadsFailing extends ForwardingRemoteMemory {
        volatile boolean fail;
        volatile boolean fenced;

        NodeReadsFailing(RemoteMemory delegate) {
            super(delegate);
        }

        @Override
        public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
            if (fenced && length == NodeHeaderDescriptor.NODE_LENGTH) {
                throw new dev.dex.rdma.FencedException("memory node 0 fenced this compute node (injected)");
            }
            if (fail && length == NodeHeaderDescriptor.NODE_LENGTH) {
                throw new FabricException("memory node 0 does not answer (injected)");
            }
            super.read(address, dst, dstOffset, length);
        }
    }

    @Test
    void aPartitionIsWarmedWhenAcquiredAndNotWithTheSettingOff() {
        for (boolean warm : new boolean[] {true, false}) {
            try (LocalTree tree = LocalTree.bulkLoaded(KEYS, PARTITIONS, 2, memory -> memory, warm)) {
                tree.workers.acquire(2);
                CacheStats stats = tree.engine.stats();
                if (warm) {
                    // The engine admits every leaf it reads here, so a warm-up that read leaves would admit far more: a
                    // quarter of the tree's leaves against a few inner nodes.
                    long[] perLevel = TreeValidator.validate(tree.admin).nodesPerLevel();
                    long inner = java.util.Arrays.stream(perLevel).skip(1).sum();
                    assertTrue(perLevel[0] / PARTITIONS > 10 * inner, "the partition has many more leaves than the tree inner nodes");
                    assertTrue(stats.admissions() >= 3 && stats.admissions() <= inner,
                            "the root and the nodes above the partition's leaves, no leaf: " + stats + ", inner nodes " + inner);
                    assertEquals(stats.misses(), stats.admissions(), "each admitted: " + stats);
                } else {
                    assertEquals(0, stats.misses(), "nothing read before the first batch: " + stats);
                }
                assertGetsServed(tree, 2);
            }
        }
    }

    @Test
    void aWarmUpThatFailsIsLoggedAndThePartitionIsHeldAndServes() {
        NodeReadsFailing[] memory = new NodeReadsFailing[1];
        Logger logger = (Logger) org.slf4j.LoggerFactory.getLogger(EngineWorkers.class);
        ListAppender<ILoggingEvent> appender = new ListAppender<>();
        appender.start();
        logger.addAppender(appender);
        try (LocalTree tree = LocalTree.bulkLoaded(KEYS, PARTITIONS, 2, m -> memory[0] = new NodeReadsFailing(m), true)) {
            memory[0].fail = true;
            assertEquals(1, tree.workers.acquire(1).partition(), "the acquire itself succeeds");
            memory[0].fail = false;
            assertTrue(appender.list.stream().anyMatch(e -> e.getLevel() == ch.qos.logback.classic.Level.WARN
                    && e.getFormattedMessage().contains("partition 1 was not warmed")
                    && e.getFormattedMessage().contains("does not answer")), "warned: " + appender.list);
            assertGetsServed(tree, 1);
        } finally {
            logger.detachAppender(appender);
        }
    }

    /** A node fenced during a warm-up learns it then, as from a failed batch: its owner is told, once. */
    @Test
    void aFencedWarmUpTellsTheOwner() {
        NodeReadsFailing[] memory = new NodeReadsFailing[1];
        try (LocalTree tree = LocalTree.bulkLoaded(KEYS, PARTITIONS, 2, m -> memory[0] = new NodeReadsFailing(m), true)) {
            java.util.concurrent.atomic.AtomicInteger told = new java.util.concurrent.atomic.AtomicInteger();
            tree.workers.onFenced(told::incrementAndGet);
            tree.workers.acquire(0);
            assertEquals(0, told.get(), "not fenced yet");
            memory[0].fenced = true;
            tree.workers.acquire(3);
            assertEquals(1, told.get(), "the owner is told by the warm-up");
        }
    }

    /** Every loaded key of {@code partition} is found through the workers, with its value. */
    private static void assertGetsServed(LocalTree tree, int partition) {
        List<Ops.Op> gets = LocalTree.loadedModel(KEYS).keySet().stream()
                .filter(k -> tree.table.partitionOf(k) == partition)
                .map(k -> new Ops.Op(Ops.GET, k, 0, 0)).toList();
        assertTrue(gets.size() > 100);
        Ops.Results results;
        try {
            results = tree.workers.execute(partition, gets).toCompletableFuture().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
        for (int i = 0; i < gets.size(); i++) {
            Ops.Result result = results.results().get(i);
            assertEquals(Ops.OK, result.status(), result.error());
            assertTrue(result.found());
            assertEquals(gets.get(i).key()[0] + 1, result.value());
        }
    }
}
