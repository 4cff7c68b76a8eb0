package dev.dex.cluster;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;

/**
 * The training run of the node JVMs' class-data archive ({@code DexCli class-archive-training}, which {@code bin/dex}
 * runs once per build before it starts a memory or compute node, and the multi-JVM tests once per run): a memory
 * node, a compute node and a client, each an actor system of this JVM, over the tcp fabric on loopback; a put and a
 * get through the client; then every system stops. The JVM that runs it with {@code -XX:ArchiveClassesAtExit=FILE}
 * writes the classes it loaded to FILE, and a node JVM started with {@code -XX:SharedArchiveFile=FILE} maps them
 * instead of loading and verifying them again: a memory node was up in 2.0 s instead of 4.0 s on a two-core machine.
 * A JVM that cannot map the archive (another class path, another JDK) starts as it would without it.
 *
 * <p>The training binds ports the kernel picks on 127.0.0.1 and talks to nothing else. It takes 5-15 s, most of it
 * the JVM writing the archive at exit.
 */
final class ClassArchiveTraining {
    static final String COMMAND = "class-archive-training";
    private static final Duration WAIT = Duration.ofSeconds(60);

    private ClassArchiveTraining() {
    }

    /** Runs the training; 0 when the put and get went through, else 1 with the reason on {@code err}. */
    static int run(PrintWriter out, PrintWriter err) {
        Config base = DexNodes.config(ConfigFactory.parseString("""
                dex.fabric.transport = tcp
                dex.memory.region-size = 64MiB
                dex.tree.partitions = 4
                dex.compute.cache-size = 8MiB
                dex.management.enabled = off
                """));
        List<ActorSystem<?>> systems = new ArrayList<>();
        try {
            Config memory = DexNodes.nodeConfig(base, "memory", "127.0.0.1", 0, List.of());
            ActorSystem<Void> memorySystem = DexNodes.memoryNode(memory, DexSettings.from(memory));
            systems.add(memorySystem);
            List<String> seed = List.of(DexNodes.hostPort(memorySystem));
            Config compute = DexNodes.nodeConfig(base, "compute", "127.0.0.1", 0, seed);
            systems.add(DexNodes.computeNode(compute, DexSettings.from(compute)));
            Config clientConfig = DexNodes.nodeConfig(base, "client", "127.0.0.1", 0, seed);
            ActorSystem<DexClient.Command> clientSystem = DexNodes.client(clientConfig, DexSettings.from(clientConfig));
            systems.add(clientSystem);
            ClusterMember.awaitSelfUp(clientSystem, WAIT);
            DexClientApi client = new DexClientApi(clientSystem, clientSystem, Duration.ofSeconds(30));
            client.put(42, 4200).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            OptionalLong read = client.get(42).toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            if (read.orElse(-1) != 4200) {
                throw new IllegalStateException("read " + read + " back after a put of 4200");
            }
            out.println("class-archive training: a memory node, a compute node and a client served a put and a get");
            return 0;
        } catch (Exception e) {
            err.println("class-archive training failed: " + e);
            return 1;
        } finally {
            // The client, then the compute node, then the memory node: a compute node whose memory node left first
            // would report its memory server lost.
            java.util.Collections.reverse(systems);
            for (ActorSystem<?> system : systems) {
                system.terminate();
                try {
                    system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
                } catch (Exception e) {
                    err.println("class-archive training: " + system.name() + " did not stop: " + e);
                }
            }
            out.flush();
            err.flush();
        }
    }
}
