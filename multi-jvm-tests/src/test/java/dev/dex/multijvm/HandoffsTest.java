package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

class HandoffsTest {

    @Test
    void parsesEveryHandoffLineOfANodeLog() {
        String log = """
                compute node up at 127.0.0.1:41234; stop with Ctrl-C (a graceful leave)
                07:07:20.201 INFO  d.dex.actors.ComputeNode - compute node ready: 1 memory nodes, 16 partitions, engine dex
                07:07:31.002 INFO  d.dex.actors.Partition - partition 3 handed off in 41 ms: 12 pages (12288 bytes) written back, 57 frames dropped
                07:07:31.090 WARN  o.a.p.cluster.Cluster - something else
                07:07:31.120 INFO  d.dex.actors.Partition - partition 11 handed off in 0 ms: 0 pages (0 bytes) written back, 0 frames dropped
                """;

        List<Handoffs.Handoff> handoffs = Handoffs.parse("compute-0", log);

        assertEquals(List.of(new Handoffs.Handoff("compute-0", 3, 41, 12, 57), new Handoffs.Handoff("compute-0", 11, 0, 0, 0)),
                handoffs);
    }
}
