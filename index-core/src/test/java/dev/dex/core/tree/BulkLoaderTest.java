package dev.dex.core.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.rdma.RemoteMemory;
import dev.dex.core.node.KeyFormat;

class BulkLoaderTest {

    @ParameterizedTest(name = "entries={0} servers={1} M={2} fill={3}")
    @CsvSource({
            "1,      1, 3, 0.8",
            "59,     2, 0, 1.0",
            "100000, 3, 1, 0.8",
            "200000, 2, 2, 0.5",
            "150000, 4, 3, 1.0"})
    void loadsEveryEntryInOrderAndKeepsSubtreesOnOneServer(int entries, int servers, int subtreeLevel, double fill) {
        try (TestPools pools = new TestPools(servers, 64)) {
            RemoteMemory memory = pools.connect();
            long[] keys = new long[entries];
            long[] values = new long[entries];
            for (int i = 0; i < entries; i++) {
                keys[i] = 3L * i - entries;
                values[i] = keys[i] + 1;
            }
            List<Long> progress = new ArrayList<>();
            BulkLoader.Result result = BulkLoader.formatAndLoad(memory,
                    new TreeSettings(subtreeLevel, fill), SortedEntries.of(keys, values), progress::add);

            assertEquals(entries, result.entries());
            assertEquals(entries, (long) progress.get(progress.size() - 1), "progress ends at the entry count");
            int leafFill = Math.max(1, (int) Math.floor(KeyFormat.EIGHT.leafCapacity() * fill));
            assertEquals((entries + leafFill - 1) / leafFill, result.leaves());

            long[] index = {0};
            TreeValidator.Report report = TreeValidator.validate(memory, (k, v) -> {
                assertEquals(keys[(int) index[0]], k);
                assertEquals(values[(int) index[0]], v);
                index[0]++;
            });
            assertEquals(entries, index[0]);
            assertEquals(result.height(), report.height());
            assertEquals(result.leaves(), report.nodesPerLevel()[0]);
            int fanOut = Math.max(2, (int) Math.floor((KeyFormat.EIGHT.innerCapacity() + 1) * fill));
            long levelMSubtrees = report.height() > subtreeLevel ? report.nodesPerLevel()[subtreeLevel] : 1;
            int expectedServers = (int) Math.min(servers, levelMSubtrees);
            assertEquals(expectedServers, report.nodesPerServer().size(),
                    "level-M subtrees dealt round robin over the servers: " + report.nodesPerServer()
                            + " (fan-out " + fanOut + ")");

            BaselineTree.Session session = BaselineTree.open(memory).newSession();
            for (int i = 0; i < entries; i += Math.max(1, entries / 1000)) {
                assertTrue(session.lookup(keys[i]));
                assertEquals(values[i], session.value());
                assertFalse(session.lookup(keys[i] + 1));
            }
        }
    }

    @Test
    void emptyInputLeavesAnEmptyTree() {
        try (TestPools pools = new TestPools(1, 4)) {
            RemoteMemory memory = pools.connect();
            BulkLoader.Result result = BulkLoader.formatAndLoad(memory, TreeSettings.defaults(),
                    SortedEntries.of(new long[0], new long[0]), n -> { });
            assertEquals(0, result.entries());
            assertEquals(0, TreeValidator.validate(memory).entries());
            assertFalse(BaselineTree.open(memory).newSession().lookup(1));
        }
    }

    @Test
    void rejectsKeysOutOfOrderDuplicatesAndTheReservedKey() {
        long[][] bad = {{1, 3, 2}, {1, 2, 2}, {Long.MIN_VALUE, 1}};
        String[] messages = {"not above the previous key", "not above the previous key", "reserved"};
        for (int i = 0; i < bad.length; i++) {
            try (TestPools pools = new TestPools(1, 4)) {
                RemoteMemory memory = pools.connect();
                Superblock.format(memory, TreeSettings.defaults());
                long[] keys = bad[i];
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> BulkLoader.load(memory, 0.8, SortedEntries.of(keys, new long[keys.length]), n -> { }));
                assertTrue(e.getMessage().contains(messages[i]), e.getMessage());
                assertEquals(0, TreeValidator.validate(memory).entries(), "a rejected load leaves the tree empty");
            }
        }
    }

    @Test
    void refusesToLoadIntoATreeThatHoldsData() {
        try (TestPools pools = new TestPools(1, 4)) {
            RemoteMemory memory = pools.connect();
            Superblock.format(memory, TreeSettings.defaults());
            BaselineTree.open(memory).newSession().insert(5, 6);
            assertThrows(IllegalStateException.class,
                    () -> BulkLoader.load(memory, 0.8, SortedEntries.of(new long[] {1}, new long[] {1}), n -> { }));
        }
    }

    @Test
    void formatTwiceAndOpenWithoutFormatFailClearly() {
        try (TestPools pools = new TestPools(1, 4)) {
            RemoteMemory memory = pools.connect();
            IllegalStateException missing = assertThrows(IllegalStateException.class, () -> BaselineTree.open(memory));
            assertTrue(missing.getMessage().contains("holds no tree"), missing.getMessage());
            Superblock.format(memory, TreeSettings.defaults());
            IllegalStateException twice = assertThrows(IllegalStateException.class,
                    () -> Superblock.format(memory, TreeSettings.defaults()));
            assertTrue(twice.getMessage().contains("already holds a tree"), twice.getMessage());
        }
    }

    @Test
    void treeGrowsUntilTheRegionIsFullThenReportsIt() {
        try (TestPools pools = new TestPools(1, 1)) {
            RemoteMemory memory = pools.connect();
            Superblock.format(memory, TreeSettings.defaults());
            BaselineTree.Session session = BaselineTree.open(memory).newSession();
            dev.dex.rdma.MemoryFullException full = assertThrows(dev.dex.rdma.MemoryFullException.class, () -> {
                for (long k = 1; ; k++) {
                    session.insert(k, k);
                }
            });
            assertEquals(0, full.serverId());
            long[] count = {0};
            TreeValidator.validate(memory, (k, v) -> {
                assertEquals(k, v);
                count[0]++;
            });
            assertTrue(count[0] > 10_000, "a 1 MiB region holds more than 10k entries before it is full: " + count[0]);
            assertFalse(session.insert(1, 1), "the tree still serves operations after memory ran out");
            assertTrue(session.lookup(count[0]));
        }
    }
}
