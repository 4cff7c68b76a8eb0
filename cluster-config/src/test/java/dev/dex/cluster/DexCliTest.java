package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class DexCliTest {

    record Run(int exit, String out, String err) {
    }

    static Run run(String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(o, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(e, true, StandardCharsets.UTF_8));
            int exit = DexCli.run(args);
            return new Run(exit, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8));
        } finally {
            System.setOut(out);
            System.setErr(err);
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
            "client get 1                                | client needs --seed",
            "client --seed 127.0.0.1:1 fly 1             | unknown operation 'fly'",
            "client --seed 127.0.0.1:1 put 1             | put takes 2 argument(s)",
            "client --seed 127.0.0.1:1 get x            | 'x' is not a 64-bit integer",
            "client --seed 127.0.0.1:1 scan 0 4294967297 | scan COUNT must be in [1, 131072]: 4294967297",
            "client --seed 127.0.0.1:1 scan 0 0          | scan COUNT must be in [1, 131072]: 0",
            "client --seed 127.0.0.1:1 --keys bytes get user:4200 | key user:4200 is 9 bytes; this index's keys are at most 8 bytes",
            "client --seed 127.0.0.1:1 --keys bytes put 0x 7 | the empty key (all zero bytes) is reserved",
            "client --seed 127.0.0.1:1 --keys bytes put 0x123 7 | '0x123' is not a hex key",
            "client --seed 127.0.0.1:1 --keys bytes delete 0x0000 | the empty key (all zero bytes) is reserved",
            "client --seed 127.0.0.1:1 --keys text get a  | --keys must be long or bytes, not 'text'",
            "client --seed 127.0.0.1:1 --key-bytes 16 get 0123456789abcdefg | key 0123456789abcdefg is 17 bytes; this index's keys are at most 16 bytes",
            "client --seed 127.0.0.1:1 --key-bytes 12 get a | --key-bytes: key width 12 bytes",
            "client --seed 127.0.0.1:1 --key-bytes 16 --keys long get 1 | long keys are 8 bytes; this cluster's keys are 16 bytes",
            "client --seed 127.0.0.1:1 scan 0 ten        | scan COUNT 'ten' is not a count",
            "demo --keys 10k --partitions 2              | --partitions must be in [3",
            "demo --keys lots                            | 'lots' is not a count",
            "demo --in-flight 0                          | --in-flight must be in [1, 100000]: 0",
            "demo --rate -5                              | --rate must be in [0, 100000000]",
            "demo --baseline maybe                       | --baseline must be on or off: maybe",
            "demo --warmup -1                            | --warmup must be in [0, 600] seconds: -1",
            "demo --trace-sample -2                      | --trace-sample must be in [0, 1000000]",
            "demo --workload scanny                      | --workload must be read-only, read-intensive, write-intensive or scan-intensive",
            "demo --processes                            | --processes goes with bench --cluster",
            "bench --cluster --processes --fabric local  | --processes needs --fabric shm or tcp",
            "bench --cluster --join-leave --processes    | --join-leave goes with bench --cluster in one JVM, not --processes",
            "bench --cluster --compute-nodes 65          | --compute-nodes must be in [1, 64]: 65",
            "bench --cluster --processes --compute-nodes 17 | --compute-nodes above 16 goes with the demo and bench --cluster in one JVM, not with --processes",
            "demo --replicas 2 --compute-nodes 17        | --compute-nodes above 16 goes with the demo and bench --cluster in one JVM, not with --replicas",
            "demo --join-leave                           | --join-leave goes with bench --cluster in one JVM (the demo always joins and leaves)",
            "client --seed nohost get 1                  | a seed node is host:port",
            "status                                      | status needs --seed",
            "demo --keys 10                              | --keys must be in [1000",
            "demo --partitions 2 --keys 5000             | --partitions must be in [3",
            "demo --fabric udp                           | dex.fabric.transport must be local, shm, tcp or disni",
            "demo --replicas 4                           | --replicas must be 1, 2 or 3: 4",
            "demo --replicas 2 --fabric shm              | --replicas 2 needs --fabric tcp or local: shm",
            "demo --kill-memory-node                     | --kill-memory-node needs --replicas 2 or 3",
            "demo --replicas 2 --kill-memory-node=all    | --kill-memory-node takes primary or backup: all",
            "demo --kill-compute-node --compute-nodes 1  | --kill-compute-node needs --compute-nodes 2 or more",
            "demo --kill-compute-node --replicas 2 --fabric tcp | --kill-compute-node goes with the demo of one replica",
            "demo --kill-coordinator --kill-compute-node | --kill-coordinator and --kill-compute-node: one kill per run",
            "demo --kill-coordinator --compute-nodes 1   | --kill-coordinator needs --compute-nodes 2 or more",
            "bench --cluster --kill-coordinator          | --kill-coordinator goes with the demo, bench --cluster --join-leave or bench --cluster --processes",
            "bench --cluster --dist pareto               | --dist must be uniform or zipf, --theta in [0, 1): pareto",
            "bench --cluster --dist zipf --theta 1       | --dist must be uniform or zipf, --theta in [0, 1)",
            "bench --cluster --splits maybe              | --splits on|off and --dist go with bench --cluster in one JVM",
            "demo --splits on                            | --splits on|off and --dist go with bench --cluster in one JVM",
            "bench --cluster --splits on --join-leave    | --splits on|off and --dist go with bench --cluster in one JVM, without --join-leave",
            "memory-node --set dex.fabric.tcp.window=0   | dex.fabric.tcp.window must be in [1, 65536]",
            "compute-node --set dex.compute.cache-sise=8MiB | unknown setting dex.compute.cache-sise (did you mean dex.compute.cache-size?)",
            "memory-node --port 70000                    | --port must be in [0, 65535]",
            "compute-node --set nokeyvalue               | --set takes KEY=VALUE",
            "memory-node --config /nonexistent.conf      | no such readable file",
            "certs                                       | Missing required option: '--out=DIR'",
            "certs --out /tmp/dex-certs-bad --nodes ca    | node name 'ca'",
            "certs --out /tmp/dex-certs-bad --nodes a,b,a | names a node twice",
            "certs --out /tmp/dex-certs-bad --nodes x/y   | node name 'x/y'",
            "memory-node --tls /nonexistent/memory.p12   | dex.security.key-store = /nonexistent/memory.p12: no such readable file"})
    void badInputExitsWithTwoAndSaysWhy(String args, String message) {
        Run run = run(args.trim().split("\\s+"));
        assertEquals(2, run.exit(), run.err());
        assertTrue(run.err().contains(message), run.err());
    }

    @Test
    void aDisniNodeWithoutAnRdmaDeviceStopsAtStartUpSayingWhy() {
        org.junit.jupiter.api.Assumptions.assumeFalse(dev.dex.rdma.disni.RdmaDevices.available(),
                "this machine can run RDMA; the refusal is for machines that cannot");
        Run run = run("memory-node", "--fabric", "disni", "--region-size", "8MiB");
        assertEquals(1, run.exit(), run.out() + run.err());
        assertTrue(run.err().contains("the disni fabric cannot run in this JVM: " + dev.dex.rdma.disni.RdmaDevices.reason()), run.err());
    }

    @Test
    void theDemosHelpPrintsWithoutAFormatWarning() {
        Run run = run("demo", "--help");
        assertEquals(0, run.exit(), run.out() + run.err());
        assertTrue(run.out().contains("read-only (100% get)"), run.out());
        assertTrue(!(run.out() + run.err()).contains("Could not format"), run.out() + run.err());
    }

    @Test
    void withoutACommandItPrintsTheCommands() {
        Run run = run();
        assertEquals(0, run.exit());
        for (String command : new String[] {"demo", "memory-node", "compute-node", "client", "status", "bench", "certs"}) {
            assertTrue(run.out().contains(command), run.out());
        }
    }


    @Test
    void theClusterBenchMeasuresTheMixThroughTheClientAndWritesJson(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        java.nio.file.Path json = dir.resolve("cluster.json");
        // A cache smaller than the tree (about 220 nodes): a moved partition's leaves are admitted on their first read
        // (dex.compute.warm-on-acquire), so a cache that holds the whole tree would leave no remote read to count.
        Run run = run("bench", "--cluster", "--keys", "10000", "--seconds", "1", "--partitions", "6", "--compute-nodes", "1",
                "--workload", "scan-intensive", "--in-flight", "64", "--rate", "3k", "--warmup", "1", "--json", json.toString(),
                "--trace-sample", "4", "--cache-size", "96KiB");
        assertEquals(0, run.exit(), run.out() + run.err());
        var result = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json.toFile());
        assertEquals("cluster", result.get("mode").asText());
        assertEquals("scan-intensive", result.get("workload").asText());
        // The mix checks every scan (it starts at its key, and holds 100 entries unless it ran past the last key) and fails
        // the run if one does not; the engine alone ran the same workload first, with the cluster's redo log and batches.
        java.util.regex.Matcher scans = java.util.regex.Pattern.compile("([0-9,]+) scans of 100").matcher(run.out());
        assertTrue(scans.find() && Long.parseLong(scans.group(1).replace(",", "")) > 0, run.out());
        assertEquals(1, result.get("computeNodes").asInt());
        assertTrue(result.get("ops").asLong() > 0 && result.get("throughputOpsPerSec").asDouble() > 0, result.toString());
        assertTrue(result.get("perOp").get("reads").asDouble() > 0, "operations read remote memory: " + result);
        assertEquals(64, result.get("inFlight").asInt());
        assertEquals(3000, result.get("rateOpsPerSec").asInt());
        long ops = result.get("ops").asLong();
        assertTrue(ops >= 1_000 && ops <= 3_001, "an open loop at 3,000 ops/s for 1 s started " + ops + " operations");
        double engine = result.get("engineOpsPerSec").asDouble();
        assertTrue(engine > 0, "the engine alone ran in the same run: " + result);
        assertEquals(result.get("throughputOpsPerSec").asDouble() / engine, result.get("clusterToEngine").asDouble(), 1e-9);
        assertTrue(run.out().contains("engine alone"), run.out());
        var latency = result.get("latencyNs");
        assertTrue(latency.get("p50").asLong() <= latency.get("p99").asLong()
                && latency.get("p99").asLong() <= latency.get("p999").asLong() && latency.get("p50").asLong() > 0, latency.toString());
        assertTrue(!run.out().contains("scale-out"), "the cluster bench does not scale out");
        assertHops(run, result, 1);
        var heap = result.get("heapAllocatedPerOp");
        assertTrue(heap.get("oneJvm").asBoolean() && heap.get("clientJvm").asDouble() > 0, "one JVM for every node: " + heap);
    }

    /**
     * The per-hop table of a bench run with --trace-sample, printed and in its JSON: every traced operation passed the
     * partition, the engine's worker and the wire both ways (client and nodes are separate actor systems), and each hop
     * took no longer than the whole round; about {@code 1 / sampleFraction} of the operations at least were traced.
     */
    static void assertHops(Run run, com.fasterxml.jackson.databind.JsonNode result, int minTraced) {
        assertTrue(run.out().contains("where the time goes:"), run.out());
        var hops = result.get("hops");
        java.util.Map<String, com.fasterxml.jackson.databind.JsonNode> byName = new java.util.HashMap<>();
        hops.forEach(row -> byName.put(row.get("hop").asText(), row));
        var round = byName.get(dev.dex.actors.client.HopTable.ROUND);
        long traced = round.get("passed").asLong();
        assertTrue(traced >= minTraced, "traced operations: " + hops);
        for (int hop : new int[] {dev.dex.actors.partition.HopTrace.DECODED, dev.dex.actors.partition.HopTrace.PARTITION,
                dev.dex.actors.partition.HopTrace.WORKER_END, dev.dex.actors.partition.HopTrace.ANSWER_DECODED,
                dev.dex.actors.partition.HopTrace.COMPLETED}) {
            var row = byName.get(dev.dex.actors.partition.HopTrace.hopName(hop));
            assertEquals(traced, row.get("passed").asLong(), "every traced operation passed " + row);
            assertTrue(row.get("p50Ns").asLong() <= round.get("p99Ns").asLong() && row.get("p50Ns").asLong() >= 0, row.toString());
        }
    }
}
