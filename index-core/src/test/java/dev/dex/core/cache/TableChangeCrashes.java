package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;

import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.SuperblockDescriptor;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;

/**
 * What the tests of partition table changes share (PartitionSplitTest, PartitionMergeTest): an owner killed at each
 * writing verb of a change in turn, and a connection that holds a change just before its commit.
 */
final class TableChangeCrashes {
    private TableChangeCrashes() {
    }

    /** A change of the table by the engine that holds every partition. */
    interface Change {
        /** The table the change commits, planned before it starts (reads only). */
        PartitionTable plan(DexEngine engine);

        /** Runs the change. */
        void run(DexEngine engine);
    }

    /**
     * One engine that logs its writes, holding every partition, on a connection that dies when told ({@code dying[0]}, set
     * here).
     */
    static DexEngine openDying(DexFixture fixture, DexEngineSettings config, CrashRecoveryTest.DyingMemory[] dying) {
        fixture.redoLog = RedoLogSettings.ON;
        fixture.connectionWrapper = memory -> dying[0] == null ? (dying[0] = new CrashRecoveryTest.DyingMemory(memory, Long.MAX_VALUE))
                : memory;
        return fixture.open(1, config).get(0);
    }

    /**
     * Kills the owner after 0, 1, 2, ... writing verbs of {@code change}, until one run completes: each time, after writes
     * to every sixth key up to {@code high} of the table and an insert of a new key just below it, a successor acquires
     * every partition of the stored table (the one before, or the one the change planned; the planned one if the change
     * completed) and must find every acknowledged write and every key left alone. Returns the crashes seen.
     */
    static int crashAtEveryWritingVerb(DexEngineSettings config, java.util.function.ToLongFunction<PartitionTable> high,
                                       java.util.function.Supplier<Change> changes) {
        int crashed = 0;
        for (long budget = 0; ; budget++) {
            try (DexFixture fixture = new DexFixture(2, 2, 4_000, 4, true, 0)) {
                CrashRecoveryTest.DyingMemory[] dying = new CrashRecoveryTest.DyingMemory[1];
                DexEngine a = openDying(fixture, config, dying);
                PartitionTable before = a.partitions();
                long top = high.applyAsLong(before);
                TreeMap<Long, Long> model = new TreeMap<>();
                try (DexSession session = a.newSession()) {
                    for (long key = 2; key <= top; key += 6) {
                        session.put(key, key * 10 + budget);
                        model.put(key, key * 10 + budget);
                    }
                    session.insert(top - 1, 7); // an odd key: an insert, at the far end of the range that changes
                    model.put(top - 1, 7L);
                }
                Change change = changes.get();
                PartitionTable planned = change.plan(a);
                dying[0].arm(budget);
                boolean completed;
                try {
                    change.run(a);
                    completed = true;
                } catch (RuntimeException crash) {
                    assertTrue(dying[0].dead(), "only the crash stops the change: " + crash);
                    completed = false;
                    crashed++;
                }
                dying[0].kill();

                DexEngine successor = fixture.openEngine(config, null);
                successor.instanceGone(a.instanceId());
                PartitionTable now = PartitionTable.load(fixture.admin);
                assertTrue(now.equals(planned) || !completed && now.equals(before), "the old table, or the planned one: " + now);
                for (int id : now.ids()) {
                    successor.acquire(id);
                }
                try (DexSession session = successor.newSession()) {
                    for (Map.Entry<Long, Long> e : model.entrySet()) {
                        assertTrue(session.lookup(e.getKey()), "crash after " + budget + " writes: key " + e.getKey() + " is there");
                        assertEquals(e.getValue(), session.value(), "crash after " + budget + " writes: key " + e.getKey());
                    }
                    for (long key = 4; key <= top; key += 6) {
                        assertTrue(session.lookup(key), "an untouched loaded key " + key);
                        assertEquals(key + 1, session.value());
                    }
                }
                CacheValidator.validate(successor);
                if (completed) {
                    return crashed;
                }
            }
        }
    }

    /**
     * {@code memory} whose first lock of the table's version (a split's or a merge's commit starting, its partitions
     * paused) counts {@code locking} down and waits for {@code commit}.
     */
    static RemoteMemory holdingTheCommit(RemoteMemory memory, CountDownLatch locking, CountDownLatch commit) {
        return new ForwardingRemoteMemory(memory) {
            @Override
            public long compareAndSwap(long address, long expected, long desired) {
                if (address == SuperblockDescriptor.TABLE_VERSION_ADDRESS && (desired & 1) == 1) {
                    locking.countDown();
                    try {
                        commit.await();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return super.compareAndSwap(address, expected, desired);
            }
        };
    }
}
