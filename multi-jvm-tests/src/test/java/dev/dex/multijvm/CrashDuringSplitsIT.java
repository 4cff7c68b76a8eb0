package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import dev.dex.core.partition.PartitionTable;

/**
 * {@link CrashIT} from an empty tree, with the shipped downing settings: the client's writes are inserts,
 * which split leaves and inner nodes all the time, so the compute node is killed among splits. The survivor
 * must find a tree it can follow (a split reaches remote memory right node first, then its parent, then the
 * narrowed node) and every acknowledged insert (replayed from the crashed node's redo logs).
 */
class CrashDuringSplitsIT {
    private static final int PARTITIONS = 16;

    @RegisterExtension
    final ClusterHarness cluster = new ClusterHarness("dex.tree.partitions=" + PARTITIONS,
            "dex.tree.partition-key-max=" + ClusterHarness.key(CrashIT.KEYS));

    @Test
    @Timeout(value = 4, unit = TimeUnit.MINUTES)
    void aNodeKilledWhileItSplitsAnEmptyTreeLosesNoAcknowledgedInsert() throws Exception {
        cluster.startMemoryNode(0);
        cluster.awaitFormatted(0);
        assertEquals(PartitionTable.equalWidth(PARTITIONS, 0, ClusterHarness.key(CrashIT.KEYS)), cluster.table(),
                "memory node 0 formatted the partitions the keys spread over");
        CrashIT.crashUnderLoad(cluster, cluster.table(), true);
    }
}
