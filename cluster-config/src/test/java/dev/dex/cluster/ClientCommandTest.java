package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

/**
 * {@code dex client} against a running cluster (a memory node and a compute node in this JVM): long keys and byte-string
 * keys ({@code --keys bytes}) written, read, scanned in unsigned byte order and deleted, each a separate client run
 * that joins, does its one operation and leaves.
 */
class ClientCommandTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private final List<ActorSystem<?>> systems = new ArrayList<>();

    @AfterEach
    void stop() throws Exception {
        for (ActorSystem<?> system : systems) {
            system.terminate();
        }
        for (ActorSystem<?> system : systems) {
            system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }

    private static Config config(String role, String fabric, List<String> seeds, int keyBytes) {
        Config overrides = ConfigFactory.parseString("""
                dex.fabric.transport = local
                dex.fabric.local-name = "%s"
                dex.memory.region-size = 64MiB
                dex.tree.partitions = 4
                dex.tree.key-bytes = %d
                dex.compute.cache-size = 8MiB
                """.formatted(fabric, keyBytes));
        return DexNodes.withoutEndpoint(DexNodes.nodeConfig(DexNodes.config(overrides), role, "127.0.0.1", 0, seeds));
    }

    /** A memory node formatting a tree of {@code keyBytes}-byte keys and a compute node, in this JVM; the seed. */
    private String startCluster(int keyBytes) {
        String fabric = "client-command-" + UUID.randomUUID();
        Config memory = config("memory", fabric, List.of(), keyBytes);
        ActorSystem<Void> memorySystem = DexNodes.memoryNode(memory, DexSettings.from(memory));
        systems.add(memorySystem);
        String seed = DexNodes.hostPort(memorySystem);
        Config compute = config("compute", fabric, List.of(seed), keyBytes);
        systems.add(DexNodes.computeNode(compute, DexSettings.from(compute)));
        return seed;
    }

    private String client(String seed, String... args) {
        List<String> all = new ArrayList<>(List.of("client", "--seed", seed, "--set", "dex.tree.partitions=4"));
        all.addAll(List.of(args));
        DexCliTest.Run run = DexCliTest.run(all.toArray(String[]::new));
        assertEquals(0, run.exit(), String.join(" ", args) + ": " + run.err());
        // Standard output is the JVM's: the other nodes' log lines (a system of the previous test shutting down) may
        // land in it too; the command's own lines are the rest.
        return run.out().lines().filter(line -> !LOG_LINE.matcher(line).find()).collect(java.util.stream.Collectors.joining("\n")).strip();
    }

    /** A line of Pekko's standard-output logger or of logback: {@code [WARN] [...} or {@code 11:58:58.549 WARN ...}. */
    private static final java.util.regex.Pattern LOG_LINE = java.util.regex.Pattern.compile(
            "^(\\[(ERROR|WARN|INFO|DEBUG)\\]|\\d\\d:\\d\\d:\\d\\d\\.\\d+ )");

    @Test
    void stringAndLongKeysFromTheCommandLine() throws Exception {
        String seed = startCluster(8);

        assertEquals("inserted", client(seed, "--keys", "bytes", "put", "user:42", "7"));
        assertEquals("inserted", client(seed, "--keys", "bytes", "put", "user:5", "8"));
        assertEquals("inserted", client(seed, "--keys", "bytes", "put", "0x00ff", "9"));
        assertEquals("replaced", client(seed, "--keys", "bytes", "put", "user:42", "70"));
        assertEquals("70", client(seed, "--keys", "bytes", "get", "user:42"));
        assertEquals("(not found)", client(seed, "--keys", "bytes", "get", "user:4"));
        assertEquals("inserted", client(seed, "put", "12", "3"));
        assertEquals(String.join("\n", "0x00ff\t9", "user:42\t70", "user:5\t8", "0x800000000000000c\t3"),
                client(seed, "--keys", "bytes", "scan", "0x", "10"));
        assertEquals("12\t3", client(seed, "scan", "1", "10"), "keys from 1 up as longs: 0x8000000000000001 and above");
        assertEquals("deleted", client(seed, "--keys", "bytes", "delete", "user:5"));
        assertEquals("user:42\t70", client(seed, "--keys", "bytes", "scan", "user:", "2").lines().findFirst().orElseThrow());
    }

    @Test
    void stringKeysOfAClusterFormattedWithSixteenByteKeys() throws Exception {
        String seed = startCluster(16);

        assertEquals("inserted", client(seed, "--key-bytes", "16", "put", "user:1234567890", "7"));
        assertEquals("inserted", client(seed, "--key-bytes", "16", "put", "user:1234567891", "8"));
        assertEquals("inserted", client(seed, "--key-bytes", "16", "put", "user:42", "9"));
        assertEquals("replaced", client(seed, "--key-bytes", "16", "put", "user:1234567890", "70"));
        assertEquals("70", client(seed, "--key-bytes", "16", "get", "user:1234567890"));
        assertEquals("(not found)", client(seed, "--key-bytes", "16", "get", "user:123456789"));
        assertEquals(String.join("\n", "user:1234567890\t70", "user:1234567891\t8", "user:42\t9"),
                client(seed, "--key-bytes", "16", "scan", "user:", "10"), "unsigned byte order, past the first 8 bytes");
        assertEquals("deleted", client(seed, "--key-bytes", "16", "delete", "user:1234567891"));
        assertEquals("user:42\t9", client(seed, "--key-bytes", "16", "scan", "user:1234567891", "5"));
        DexCliTest.Run wrongWidth = DexCliTest.run("client", "--seed", seed, "--set", "dex.tree.partitions=4", "--key-bytes", "8",
                "--keys", "bytes", "get", "user:42");
        assertEquals(2, wrongWidth.exit(), wrongWidth.out());
        assertTrue(wrongWidth.err().contains("this index's keys are 16 bytes"), wrongWidth.err());
    }
}
