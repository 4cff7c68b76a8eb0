package dev.dex.bench;

import java.util.List;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.partition.PartitionedEngine;
import dev.dex.core.partition.PartitionTable;

/**
 * Routes each key to its partition's owner, as a client of a partitioned cluster does: the thread keeps one session
 * per engine and sends each key to the engine that holds the key's partition. A scan goes to the engine of its
 * start key's partition and may stop at the end of that engine's partitions. (The actors module's
 * {@code PartitionRouter} is another thing: a compute node's actor that hands bundled batches to its partitions.)
 *
 * <p>The partition-to-engine map is read from {@link PartitionedEngine#holds} once, when the router is
 * built; every partition must be held by exactly one engine then.
 */
final class OwnerRouter implements Router {
    private final PartitionTable table;
    private final IndexSession[] sessions;
    private final IndexSession[] byPartition;

    OwnerRouter(List<? extends PartitionedEngine> engines) {
        this.table = sharedTable(engines);
        this.sessions = new IndexSession[engines.size()];
        for (int e = 0; e < sessions.length; e++) {
            sessions[e] = engines.get(e).newSession();
        }
        this.byPartition = new IndexSession[table.count()];
        for (int p = 0; p < byPartition.length; p++) {
            for (int e = 0; e < sessions.length; e++) {
                if (engines.get(e).holds(p)) {
                    if (byPartition[p] != null) {
                        throw new IllegalStateException("partition " + p + " is held by more than one engine");
                    }
                    byPartition[p] = sessions[e];
                }
            }
            if (byPartition[p] == null) {
                throw new IllegalStateException("partition " + p + " is held by no engine");
            }
        }
    }

    /** The bench's static assignment: partition {@code p} to engine {@code p mod engines}. */
    static void assign(List<? extends PartitionedEngine> engines) {
        PartitionTable table = sharedTable(engines);
        for (int p = 0; p < table.count(); p++) {
            engines.get(p % engines.size()).acquire(p);
        }
    }

    @Override
    public IndexSession sessionFor(long key) {
        return byPartition[table.partitionOf(key)];
    }

    @Override
    public int partitionOf(long key) {
        return table.partitionOf(key);
    }

    @Override
    public int partitions() {
        return table.count();
    }

    @Override
    public void close() {
        for (IndexSession session : sessions) {
            session.close();
        }
    }

    private static PartitionTable sharedTable(List<? extends PartitionedEngine> engines) {
        if (engines.isEmpty()) {
            throw new IllegalArgumentException("routing needs at least one engine");
        }
        PartitionTable table = engines.get(0).partitions();
        for (PartitionedEngine engine : engines) {
            if (!engine.partitions().equals(table)) {
                throw new IllegalStateException("engines disagree on the partition table: " + table + " vs "
                        + engine.partitions());
            }
        }
        return table;
    }
}
