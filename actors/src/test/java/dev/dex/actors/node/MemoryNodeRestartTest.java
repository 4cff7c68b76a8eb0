package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.typesafe.config.ConfigFactory;

import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.shm.ShmFabric;

/**
 * A memory node on {@code shm} that stops and starts again reattaches to its region: the tree, the partition
 * table and every chunk keep their contents (before, a restarted memory node 0 formatted a fresh tree over the
 * live one, and a stop deleted the region file). Only an explicit format starts over, and a second memory node
 * with the same server id on the host is refused while the first serves, before it touches the region, even when
 * started with a format.
 */
class MemoryNodeRestartTest {
    @TempDir
    Path directory;

    private final ActorTestKit kit = ActorTestKit.create(
            ConfigFactory.parseString("pekko.cluster.roles = [memory]").withFallback(ActorTestKit.applicationTestConfig()));

    @AfterEach
    void close() {
        kit.shutdownTestKit();
    }

    private static MemoryNode.Settings settings(PartitionTable table, boolean format) {
        return new MemoryNode.Settings(0, 16L << 20, 64 << 10, 1, 16, table, 3, format, 8);
    }

    private ActorRef<MemoryNode.Command> start(ShmFabric fabric, MemoryNode.Settings settings) {
        ActorRef<MemoryNode.Command> node = kit.spawn(MemoryNode.create(settings, fabric));
        TestProbe<MemoryNode.Description> described = kit.createTestProbe();
        node.tell(new MemoryNode.Describe(described.getRef()));
        described.expectMessageClass(MemoryNode.Description.class, Duration.ofSeconds(10));
        return node;
    }

    private void stop(ActorRef<MemoryNode.Command> node) {
        TestProbe<Object> watcher = kit.createTestProbe();
        kit.stop(node);
        watcher.expectTerminated(node, Duration.ofSeconds(10));
    }

    @Test
    void aRestartedMemoryNodeKeepsItsTreeTableAndDataAndOnlyAFormatStartsOver() {
        PartitionTable table = PartitionTable.equalWidth(8, 0, 80_000);
        try (ShmFabric fabric = new ShmFabric(directory)) {
            ActorRef<MemoryNode.Command> first = start(fabric, settings(table, false));
            long root;
            long chunk;
            try (RemoteMemory memory = fabric.connect(0)) {
                root = Superblock.read(memory).root();
                chunk = memory.chunkAllocator().allocateChunk(0);
                org.agrona.concurrent.UnsafeBuffer marker = new org.agrona.concurrent.UnsafeBuffer(new byte[8]);
                marker.putLong(0, 0x5EED);
                memory.write(chunk, marker, 0, 8);
            }
            stop(first);

            ActorRef<MemoryNode.Command> second = start(fabric, settings(PartitionTable.equalWidth(2, 0, 10), false));
            try (RemoteMemory memory = fabric.connect(0)) {
                assertEquals(root, Superblock.read(memory).root(), "the same tree");
                assertEquals(8, PartitionTable.load(memory).count(), "the stored partition table, not the new settings'");
                org.agrona.concurrent.UnsafeBuffer read = new org.agrona.concurrent.UnsafeBuffer(new byte[8]);
                memory.read(chunk, read, 0, 8);
                assertEquals(0x5EED, read.getLong(0), "the data of an allocated chunk");
                long next = memory.chunkAllocator().allocateChunk(0);
                assertTrue(next > chunk, "the allocator goes on after the chunks it handed out before the restart: "
                        + GlobalAddress.toString(next) + " after " + GlobalAddress.toString(chunk));
            }

            // A second memory node with the same server id on this host is refused while the first serves, with a
            // format too (which used to replace the region file before the refusal stopped it).
            // (A fabric object of its own, as another process would have.)
            for (boolean format : new boolean[] {false, true}) {
                TestProbe<Object> watcher = kit.createTestProbe();
                try (ShmFabric other = new ShmFabric(directory)) {
                    ActorRef<MemoryNode.Command> duplicate = kit.spawn(MemoryNode.create(settings(table, format), other));
                    watcher.expectTerminated(duplicate, Duration.ofSeconds(10));
                }
                try (RemoteMemory memory = fabric.connect(0)) {
                    assertEquals(root, Superblock.read(memory).root(), "the duplicate (format " + format + ") changed nothing");
                    org.agrona.concurrent.UnsafeBuffer read = new org.agrona.concurrent.UnsafeBuffer(new byte[8]);
                    memory.read(chunk, read, 0, 8);
                    assertEquals(0x5EED, read.getLong(0), "the marker survives the duplicate (format " + format + ")");
                }
            }
            stop(second);

            start(fabric, settings(table, true));
            try (RemoteMemory memory = fabric.connect(0)) {
                org.agrona.concurrent.UnsafeBuffer read = new org.agrona.concurrent.UnsafeBuffer(new byte[8]);
                memory.read(chunk, read, 0, 8);
                assertEquals(0, read.getLong(0), "an explicit format discards the data");
            }
        }
    }
}
