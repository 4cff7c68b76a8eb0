package dev.dex.cluster;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.pekko.actor.typed.ActorSystem;

import com.typesafe.config.Config;

import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.ComputeNode;
import dev.dex.core.partition.PartitionTable;

/**
 * The demo's crash of a compute node, as a crash happens: over a fabric another process reaches ({@code tcp},
 * {@code shm}) and without TLS, the demo starts one more compute node in a JVM of its own, waits until it holds
 * partitions and kills it with SIGKILL, so that it neither leaves nor tells anyone that it ends (a node stopped inside
 * the demo's JVM does both: it closes its fabric connections while it still answers, and its remoting announces its
 * end). Elsewhere the demo stops a node in its own JVM instead ({@link #notPossible}), as it does when the process does not
 * come up.
 */
final class DemoKill {
    private static final Duration NODE_START = Duration.ofSeconds(90);

    private DemoKill() {
    }

    /** What the kill measured. */
    record Result(int partitions, double servedAgainSeconds, long killedAtNanos) {
    }

    /** Null when a process can be killed here, else why not. */
    static String notPossible(Config base, String transport) {
        if (!transport.equals("tcp") && !transport.equals("shm")) {
            return "the " + transport + " fabric lives inside this JVM";
        }
        if (base.getBoolean("dex.security.tls")) {
            return "the node processes would need the demo's TLS keys";
        }
        return null;
    }

    /**
     * Starts a compute node process that joins through {@code seed}, waits until the partitions have spread over
     * {@code computeNodes + 1} nodes, kills it and returns how long until every partition it held served again; null
     * when the process did not come up or take partitions (the process is stopped; the caller kills otherwise).
     */
    static Result killAProcess(PrintWriter out, Config base, DexSettings settings, DexClientApi client, ActorSystem<?> clientSystem,
                               PartitionTable table, long lastKey, int computeNodes, String seed) throws Exception {
        String transport = settings.fabric().transport();
        Path logs = Files.createTempDirectory("dex-demo-killed-node-");
        try (NodeProcesses nodes = new NodeProcesses(logs, ProcessBench.jvmFlags())) {
            List<String> arguments = new ArrayList<>(List.of("compute-node", "--cache-size",
                    base.getBytes("dex.compute.cache-size") + "B", "--seed", seed));
            arguments.addAll(ProcessBench.nodeArguments(base, transport, settings.fabric().shmDirectory()));
            out.printf("starting a compute node in a process of its own, to kill it (its log: %s)...%n", logs);
            NodeProcesses.Node victim = nodes.start("compute-killed", arguments);
            String address;
            List<Integer> held;
            try {
                address = "pekko://" + DexNodes.SYSTEM + "@" + victim.awaitUp(NODE_START);
                List<ComputeNode.Status> spread = DemoCluster.awaitRebalance(client, clientSystem, table, table.count(), lastKey,
                        computeNodes + 1, NODE_START);
                held = spread.stream().filter(s -> s.address().equals(address)).findFirst()
                        .map(ComputeNode.Status::partitionsHeld).orElse(List.of());
            } catch (IllegalStateException notUp) {
                out.printf("the compute node process did not come up or take partitions (%s); its log: %s%n", notUp.getMessage(),
                        victim.log());
                return null;
            }
            if (held.isEmpty()) {
                out.printf("the compute node process %s holds no partition; its log: %s%n", address, victim.log());
                return null;
            }
            out.printf("killing compute node %s (pid %d) with SIGKILL under the mix; it holds partitions %s...%n", address,
                    victim.process().pid(), held);
            long killed = System.nanoTime();
            victim.process().destroyForcibly();
            double servedAgain = DemoCluster.awaitPartitionsServe(client, table, held, killed, NODE_START);
            out.printf("its %d partitions served again %.2f s after the kill (the memory node found the process gone by its"
                    + " hung-up fabric connections on tcp, or the failure detector and the split-brain resolver on shm, fenced and"
                    + " downed it; then the removal, and each new owner replays the partition's redo log: docs/durability.md)%n",
                    held.size(), servedAgain);
            Result result = new Result(held.size(), servedAgain, killed);
            DemoCluster.deleteFlatDirectory(logs); // the kill went as planned: nobody needs its log
            return result;
        }
    }
}
