package dev.dex.cluster;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Cluster nodes in JVMs of their own, started and stopped by {@code dex bench --cluster --processes}: each runs
 * {@code DexCli memory-node|compute-node ...} with this JVM's class path and Java, logs to {@code <name>.log} in a
 * directory of the run, and is known to be up from the line it prints then ("... up at host:port;"): every node takes
 * a port the kernel chose, so none is picked and then raced for.
 *
 * <p>{@link #close} stops every node it started (SIGTERM, a graceful leave; SIGKILL for what has not ended within
 * {@link #STOP_WAIT}), and so does a shutdown hook if this JVM is interrupted first (Ctrl-C): no node outlives the
 * bench. The logs stay, and are named when a node fails to come up.
 *
 * <p>Concurrency: used by one thread; the shutdown hook and {@link #close} may race, and both only stop processes
 * (destroying a process twice is harmless), from a copy of the list taken under the object's lock.
 */
final class NodeProcesses implements AutoCloseable {
    private static final Pattern UP_AT = Pattern.compile(" up at ([^:\\s]+):(\\d+);");
    static final Duration STOP_WAIT = Duration.ofSeconds(15);

    /** One node's process and its log. */
    record Node(String name, Process process, Path log) {
        /** The node's "host:port", once its log says it is up; fails with the log's tail when it ends first. */
        String awaitUp(Duration max) throws InterruptedException {
            long deadline = System.nanoTime() + max.toNanos();
            while (System.nanoTime() < deadline) {
                Matcher up = UP_AT.matcher(text());
                if (up.find()) {
                    return up.group(1) + ":" + up.group(2);
                }
                if (!process.isAlive()) {
                    throw new IllegalStateException(name + " ended (exit " + process.exitValue() + ") before it was up; its log "
                            + log + " ends:\n" + tail());
                }
                Thread.sleep(50);
            }
            throw new IllegalStateException(name + " was not up within " + max.toSeconds() + " s; its log " + log + " ends:\n" + tail());
        }

        String text() {
            try {
                return Files.exists(log) ? Files.readString(log, StandardCharsets.UTF_8) : "";
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        private String tail() {
            String[] lines = text().split("\n");
            return String.join("\n", java.util.Arrays.asList(lines).subList(Math.max(0, lines.length - 15), lines.length));
        }
    }

    private final Path logDirectory;
    private final List<String> jvmFlags;
    /** The nodes' shared-memory directory, deleted once they have stopped; null: none. */
    private final Path shmDirectory;
    private final List<Node> nodes = new ArrayList<>();
    /** Set when the nodes are being stopped: no node starts after that (a start racing the shutdown hook would outlive it). */
    private boolean stopping;
    private final Thread hook = new Thread(this::stopAll, "dex-bench-stop-nodes");

    /** Nodes logging into {@code logDirectory}, each JVM started with {@code jvmFlags} besides the class path. */
    NodeProcesses(Path logDirectory, List<String> jvmFlags) throws IOException {
        this(logDirectory, jvmFlags, null);
    }

    /** As {@link #NodeProcesses(Path, List)}, deleting {@code shmDirectory} (the nodes' regions) once they have stopped. */
    NodeProcesses(Path logDirectory, List<String> jvmFlags, Path shmDirectory) throws IOException {
        this.logDirectory = Files.createDirectories(logDirectory);
        this.jvmFlags = List.copyOf(jvmFlags);
        this.shmDirectory = shmDirectory;
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /** Starts {@code DexCli} with {@code arguments} as {@code name}; refused once the nodes are being stopped. */
    synchronized Node start(String name, List<String> arguments) throws IOException {
        if (stopping) {
            throw new IllegalStateException("the bench is stopping its nodes; " + name + " is not started");
        }
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(jvmFlags);
        command.addAll(classArchiveFlags());
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), DexCli.class.getName()));
        command.addAll(arguments);
        Path log = logDirectory.resolve(name + ".log");
        Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        Node node = new Node(name, process, log);
        nodes.add(node);
        return node;
    }

    Path logDirectory() {
        return logDirectory;
    }

    /** The system property through which bin/dex names the node JVMs' class-data archive ({@link ClassArchiveTraining}). */
    static final String CLASS_ARCHIVE = "dex.node-class-archive";

    /**
     * The flags that map the node JVMs' class-data archive that {@link #CLASS_ARCHIVE} names, if it names a file: bin/dex
     * made it with this JVM's class path, which the nodes get too; none otherwise. A JVM that cannot map it starts
     * without it.
     */
    static List<String> classArchiveFlags() {
        String archive = System.getProperty(CLASS_ARCHIVE, "");
        if (archive.isEmpty() || !Files.isRegularFile(Path.of(archive))) {
            return List.of();
        }
        return List.of("-XX:SharedArchiveFile=" + archive, "-Xlog:cds=off", "-Xlog:cds+dynamic=off");
    }

    /** Stops every node: SIGTERM, then SIGKILL for those still running after {@link #STOP_WAIT}. */
    @Override
    public void close() {
        stopAll();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            // the hook runs or ran: it stops the same nodes
        }
    }

    private void stopAll() {
        List<Node> started;
        synchronized (this) {
            stopping = true;
            started = List.copyOf(nodes);
        }
        // The nodes started later (compute nodes) first, all at once: their graceful leave may still write back to the
        // node started first (the memory node), which is stopped once they have ended.
        if (!started.isEmpty()) {
            stop(started.subList(1, started.size()));
            stop(started.subList(0, 1));
        }
        if (shmDirectory != null) {
            try {
                DemoCluster.deleteFlatDirectory(shmDirectory);
            } catch (IOException e) {
                System.err.println("could not delete " + shmDirectory + ": " + e);
            }
        }
    }

    private static void stop(List<Node> group) {
        for (Node node : group) {
            node.process().destroy();
        }
        long deadline = System.nanoTime() + STOP_WAIT.toNanos();
        for (Node node : group) {
            try {
                if (!node.process().waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                    node.process().destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                node.process().destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
