package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

import dev.dex.core.log.RedoLog;
import dev.dex.core.log.RedoLogDescriptor;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * A tree of up to 1,024 partitions: its bounds fill more of server 0's root area than the first layout's 256 did, and
 * the log directory holds the words of partitions 256 and up after the engine instances' word, which keeps its place
 * (a directory of a tree of 256 partitions or fewer reads as before). Too many partitions for the chunks fail clearly.
 */
class ManyPartitionsTest {
    private static final int CHUNK = 16 * 1024;
    private static final long RANGE = 1L << 24;

    private static DexEngine open(RemoteMemory memory) {
        return DexEngine.open(memory, new DexEngineSettings("no-offload", 4096L * FrameHeaderDescriptor.FRAME_LENGTH,
                DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, RedoLogSettings.ON.withBytes(CHUNK));
    }

    @Test
    void engineOwnersOfPartitionsOnBothSidesOfTheInstancesWordKeepTheirLogsAndTheRegistryItsWord() throws Exception {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 256L << 20, CHUNK);
            RemoteMemory admin = fabric.connect(0);
            Superblock.format(admin, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            PartitionTable table = PartitionTable.equalWidth(PartitionTable.MAX_PARTITIONS, 0, RANGE);
            PartitionTable.store(admin, table);
            assertEquals(table, PartitionTable.load(admin), "1,024 partitions read back as stored");

            InstanceRegistry registry = new InstanceRegistry(admin);
            registry.register(7, 99);
            // Engine A writes into partitions 255 and 256 (the words around the instances' word) and 1,023, and vanishes:
            // its writes are only in the redo logs.
            DexEngine a = open(fabric.connect(0));
            int[] partitions = {255, 256, 1023};
            TreeMap<Long, Long> acknowledged = new TreeMap<>();
            SplittableRandom random = new SplittableRandom(5);
            for (int p : partitions) {
                a.acquire(p);
            }
            DexSession session = a.newSession(); // never closed, never checkpointed
            for (int p : partitions) {
                for (int i = 0; i < 200; i++) {
                    long key = table.lowerExclusive(p) + 1 + random.nextLong(table.upperInclusive(p) - table.lowerExclusive(p));
                    long value = random.nextLong();
                    session.put(key, value);
                    acknowledged.put(key, value);
                }
            }
            assertEquals(99, new InstanceRegistry(fabric.connect(0)).memberOf(7),
                    "no partition's log word overwrote the engine instances' word");

            // Engine B takes them over: each replays its own log, and serves every acknowledged write.
            DexEngine b = open(fabric.connect(0));
            for (int p : partitions) {
                b.acquire(p);
            }
            try (DexSession reader = b.newSession()) {
                acknowledged.forEach((key, value) -> {
                    assertTrue(reader.lookup(key), "key " + key + " is served after the takeover");
                    assertEquals(value.longValue(), reader.value(), "key " + key);
                });
            }
            assertTrue(RedoLogDescriptor.slotOffset(256) > RedoLogDescriptor.INSTANCES_POINTER_OFFSET);
            assertEquals(RedoLogDescriptor.INSTANCES_POINTER_OFFSET - Long.BYTES, RedoLogDescriptor.slotOffset(255));
            b.close();
        }
    }

    @Test
    void moreThanTheChunksHoldFailClearly() {
        try (LocalFabric fabric = new LocalFabric()) {
            fabric.export(0, 16L << 20, 4096);
            RemoteMemory admin = fabric.connect(0);
            Superblock.format(admin, new TreeSettings(1, TreeSettings.DEFAULT_BULK_FILL_FACTOR));
            int fits = PartitionTable.maxPartitions(4096);
            IllegalArgumentException tooMany = assertThrows(IllegalArgumentException.class,
                    () -> PartitionTable.store(admin, PartitionTable.equalWidth(fits + 1, 0, RANGE)));
            assertTrue(tooMany.getMessage().contains("dex.memory.chunk-size"), tooMany.getMessage());
            PartitionTable most = PartitionTable.equalWidth(fits, 0, RANGE);
            PartitionTable.store(admin, most);
            assertEquals(most, PartitionTable.load(admin), fits + " partitions fit a 4 KiB chunk");
            // A directory of one 4 KiB chunk holds the words of 511 partitions, not 1,024: refused also when the directory
            // exists already (the engine instances' registry makes it for its own word).
            new InstanceRegistry(admin).register(1, 2);
            IllegalStateException directory = assertThrows(IllegalStateException.class,
                    () -> RedoLog.open(admin, 0, 1024, 1, 4096, 1_000_000_000L));
            assertTrue(directory.getMessage().contains("1024 partitions"), directory.getMessage());
        }
    }
}
