package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dex bench --cluster --processes}: the nodes run in JVMs of their own, the bench measures through them and
 * stops every one of them when it ends, also when a node fails.
 */
class ProcessBenchTest {
    @Test
    void theBenchRunsEachNodeInAProcessOfItsOwnAndLeavesNoneBehind(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("processes.json");
        // Over tcp, and after the measured mix the compute node process that runs the shard coordinator is killed with
        // SIGKILL: the memory node finds its hang-up, fences and downs it, and the other node takes its partitions over.
        DexCliTest.Run run = DexCliTest.run("bench", "--cluster", "--processes", "--fabric", "tcp", "--keys", "10000", "--seconds", "1",
                "--partitions", "6", "--compute-nodes", "2", "--in-flight", "4", "--warmup", "0", "--baseline", "off", "--trace-sample",
                "1", "--kill-coordinator", "--json", json.toString());

        assertEquals(0, run.exit(), run.out() + run.err());
        var result = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json.toFile());
        assertTrue(result.get("ops").asLong() > 0, result.toString());
        assertTrue(result.get("perOp").get("reads").asDouble() > 0, "the compute node process read the memory node's: " + result);
        DexCliTest.assertHops(run, result, (int) result.get("ops").asLong());
        var heap = result.get("heapAllocatedPerOp");
        assertTrue(!heap.get("oneJvm").asBoolean() && heap.get("clientJvm").asDouble() > 0 && heap.get("computeNodeJvms").asDouble() > 0,
                "the client's and the compute node's JVMs are measured apart: " + heap);
        var kill = result.get("coordinatorKill");
        assertTrue(kill != null && kill.get("partitions").asInt() >= 1 && kill.get("newCoordinatorSeconds").asDouble() > 0
                && kill.get("newCoordinatorSeconds").asDouble() <= kill.get("servedAgainSeconds").asDouble(),
                "a new coordinator, then the killed node's partitions served again, in --json: " + result);
        assertTrue(run.out().contains("killing the shard coordinator's compute node") && run.out().contains("with SIGKILL under the mix")
                && run.out().contains("a new shard coordinator ran on "), run.out());
        assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count(),
                "every node process has ended");
        Matcher logs = Pattern.compile("node logs in (\\S+)").matcher(run.out());
        assertTrue(logs.find(), run.out());
        Path directory = Path.of(logs.group(1));
        assertTrue(Files.readString(directory.resolve("memory-0.log")).contains("memory node 0 up at"), "the memory node's log");
        assertTrue(Files.readString(directory.resolve("compute-0.log")).contains("up at"), "the compute node's log");
    }

    @Test
    void aNodeThatEndsBeforeItIsUpIsReportedWithItsLogAndARunningNodeIsStoppedAtClose(@TempDir Path dir) throws Exception {
        NodeProcesses.Node running;
        Path shm = Files.createDirectories(dir.resolve("shm"));
        Files.writeString(shm.resolve("region-0"), "a region");
        try (NodeProcesses nodes = new NodeProcesses(dir, ProcessBench.jvmFlags(), shm)) {
            NodeProcesses.Node bad = nodes.start("bad", List.of("memory-node", "--region-size", "banana"));
            IllegalStateException failure = assertThrows(IllegalStateException.class, () -> bad.awaitUp(Duration.ofSeconds(60)));
            assertTrue(failure.getMessage().startsWith("bad ended (exit ") && failure.getMessage().contains("banana"),
                    failure.getMessage());
            running = nodes.start("memory-0", List.of("memory-node", "--server-id", "0", "--region-size", "64MiB", "--host",
                    "127.0.0.1", "--port", "0", "--fabric", "tcp"));
            String hostPort = running.awaitUp(Duration.ofSeconds(60));
            assertTrue(hostPort.startsWith("127.0.0.1:"), hostPort);
        }
        assertFalse(running.process().isAlive(), "close stopped the node");
        assertFalse(Files.exists(shm), "and deleted the nodes' shared-memory directory");
        assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count());
    }

    @Test
    void noNodeStartsOnceTheNodesAreBeingStopped(@TempDir Path dir) throws Exception {
        NodeProcesses nodes = new NodeProcesses(dir, ProcessBench.jvmFlags());
        nodes.close(); // as the shutdown hook does on Ctrl-C, while the bench's thread may still be starting nodes
        IllegalStateException refused = assertThrows(IllegalStateException.class,
                () -> nodes.start("compute-0", List.of("compute-node")));
        assertTrue(refused.getMessage().contains("compute-0 is not started"), refused.getMessage());
        assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count());
    }
}
