package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

import dev.dex.actors.node.ComputeNode;

/** What {@code bin/dex status} prints of the load each compute node measures on its partitions. */
class StatusLoadTest {
    /** A node that measured its last window of 10 s. */
    private static ComputeNode.Status node(String address, List<Integer> held, List<Double> rates) {
        return new ComputeNode.Status(address, held, 0, 0, 0, 0, 0, Double.NaN, 0, List.of(), List.of(), "jvm", 0, rates, 10, 2, 0, 0);
    }

    /** A node whose first window has not closed. */
    private static ComputeNode.Status fresh(String address, List<Integer> held) {
        return new ComputeNode.Status(address, held, 0, 0, 0, 0, 0, Double.NaN, 0, List.of(), List.of(), "jvm", 0, List.of(), 0, 2, 0, 0);
    }

    @Test
    void aNodesLineNamesItsTotalAndItsBusiestPartitions() {
        var status = node("a", List.of(2, 5, 9, 11), List.of(100.0, 4_000.0, 0.0, 1_500.0));
        assertEquals("load: 5,600 operations per second over its last 10.0 s; busiest: 5 at 4,000, 11 at 1,500, 2 at 100",
                DexCli.loadLine(status));
        // Ties go to the lower partition; a node with fewer partitions than the busiest shown names them all.
        assertEquals("load: 20 operations per second over its last 10.0 s; busiest: 3 at 10, 7 at 10",
                DexCli.loadLine(node("b", List.of(7, 3), List.of(10.0, 10.0))));
    }

    @Test
    void noLineBeforeTheFirstWindowOrFromANodeThatDoesNotMeasure() {
        assertEquals("", DexCli.loadLine(fresh("a", List.of(1, 2))));
        assertEquals("", DexCli.loadLine(new ComputeNode.Status("a", List.of(1), 0, 0, 0, 0, 0, Double.NaN, 0, List.of(), List.of())),
                "a status without the load (a node not ready yet)");
        assertEquals("load: 0 operations per second over its last 10.0 s", DexCli.loadLine(node("a", List.of(), List.of())),
                "a node that holds nothing measured nothing, which is a load of 0");
    }

    @Test
    void theBalanceLineComparesTheNodesPartitionsAndOnceAllMeasuredTheirLoad() {
        var busy = node("a", List.of(0, 1, 2), List.of(3_000.0, 2_000.0, 1_000.0));
        var quiet = node("b", List.of(3, 4), List.of(1_000.0, 500.0));
        assertEquals("balance: 2 to 3 partitions per compute node; load from 1,500 to 6,000 operations per second per node (4.00x)",
                ClusterMember.balanceLine(List.of(busy, quiet)));
        assertEquals("balance: 0 to 3 partitions per compute node; load from 0 to 6,000 operations per second per node",
                ClusterMember.balanceLine(List.of(busy, quiet, node("d", List.of(), List.of()))), "no ratio over an idle node");
        assertEquals("balance: 1 to 3 partitions per compute node", ClusterMember.balanceLine(List.of(busy, quiet, fresh("c", List.of(5)))),
                "no load figure while a node has not measured a window");
        assertEquals("", ClusterMember.balanceLine(List.of()));
    }

    @Test
    void theTableLineNamesTheVersionAndTheSplitsOnceThereWereAny() {
        assertEquals("", DexCli.tableLine(node("a", List.of(1), List.of(5.0))), "the table it was formatted with, no split");
        ComputeNode.Status split = new ComputeNode.Status("b", List.of(1, 16), 0, 0, 0, 0, 0, Double.NaN, 0, List.of(), List.of(),
                "jvm", 0, List.of(), 0, 6, 2, 0);
        assertEquals("; table version 6, 2 splits here", DexCli.tableLine(split));
        ComputeNode.Status elsewhere = new ComputeNode.Status("c", List.of(17), 0, 0, 0, 0, 0, Double.NaN, 0, List.of(), List.of(),
                "jvm", 0, List.of(), 0, 8, 0, 1);
        assertEquals("; table version 8, 0 splits and 1 merge here", DexCli.tableLine(elsewhere), "another node's splits moved the version");
    }
}
