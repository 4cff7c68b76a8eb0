package dev.dex.multijvm;

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
 * One cluster node running in a JVM of its own: {@code dev.dex.cluster.DexCli memory-node|compute-node ...}
 * with the test JVM's class path. Standard output and error both go to {@code <name>.log}; the node's port
 * is read from the line the CLI prints once the actor system is up ("... up at host:port"), so every node
 * listens on a port the kernel chose and no port is ever picked and then raced for.
 */
final class NodeProcess {
    private static final Pattern UP_AT = Pattern.compile(" up at [^:\\s]+:(\\d+);");

    /**
     * Flags of every node JVM: a small heap, a common pool that does not start a thread per async step, and the client
     * compiler only: a test starts 3 to 5 JVMs on a 2-core machine, where the server compiler's threads competed with
     * start-up and joins (FormationIT, CrashTcpIT and ScaleOutIT took 20-25% less time with it); no test measures
     * a node's throughput.
     */
    static final List<String> JVM_FLAGS = List.of("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.util.concurrent.ForkJoinPool.common.parallelism=2", "-Dlogback.configurationFile=dex-it-node-logback.xml");

    private final String name;
    private final Path log;
    private final Process process;
    private final List<String> arguments;
    private final List<String> prefix;
    private final String host;
    private int port;

    private NodeProcess(String name, Path log, Process process, List<String> arguments, List<String> prefix, String host) {
        this.name = name;
        this.log = log;
        this.process = process;
        this.arguments = List.copyOf(arguments);
        this.prefix = List.copyOf(prefix);
        this.host = host;
    }

    /** Starts {@code DexCli} with {@code arguments}, logging to {@code logDirectory/<name>.log}. */
    static NodeProcess start(String name, Path logDirectory, List<String> arguments) {
        return start(name, logDirectory, arguments, List.of(), "127.0.0.1");
    }

    /**
     * Starts {@code DexCli} with {@code arguments} under the command {@code prefix} ({@code ip netns exec NS}: in a
     * network namespace of {@link NetworkNamespaces}), listening at {@code host}.
     */
    static NodeProcess start(String name, Path logDirectory, List<String> arguments, List<String> prefix, String host) {
        List<String> command = new ArrayList<>(prefix);
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(JVM_FLAGS);
        command.addAll(ClassArchive.flags());
        command.add("-cp");
        command.add(ClassArchive.classPath());
        command.add("dev.dex.cluster.DexCli");
        command.addAll(arguments);
        Path log = logDirectory.resolve(name + ".log");
        try {
            Files.createDirectories(logDirectory);
            Process process = new ProcessBuilder(command).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.to(log.toFile())).start();
            return new NodeProcess(name, log, process, arguments, prefix, host);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start node " + name, e);
        }
    }

    String name() {
        return name;
    }

    /** The arguments the node was started with, to start it again the same way. */
    List<String> arguments() {
        return arguments;
    }

    /** The command prefix the node runs under (empty, or a network namespace's). */
    List<String> prefix() {
        return prefix;
    }

    /** The address the node listens at. */
    String host() {
        return host;
    }

    /** The JVM's process id (to pause it with SIGSTOP, say). */
    long pid() {
        return process.pid();
    }

    boolean isAlive() {
        return process.isAlive();
    }

    /** Waits until the node printed the port it listens on; fails early if the JVM exits first. */
    int awaitPort(Duration max) throws InterruptedException {
        if (port > 0) {
            return port;
        }
        long deadline = System.nanoTime() + max.toNanos();
        while (true) {
            Matcher up = UP_AT.matcher(logText());
            if (up.find()) {
                port = Integer.parseInt(up.group(1));
                return port;
            }
            if (!process.isAlive()) {
                throw new IllegalStateException("node " + name + " exited with " + process.exitValue() + " before it was up; see " + log);
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("node " + name + " did not come up within " + max.toSeconds() + " s; see " + log);
            }
            Thread.sleep(50);
        }
    }

    /** The port the node listens on, once {@link #awaitPort} returned. */
    int port() {
        if (port == 0) {
            throw new IllegalStateException("node " + name + " has not reported its port yet");
        }
        return port;
    }

    /** "host:port", to give other nodes as a seed. */
    String seed() {
        return host + ":" + port();
    }

    /** The last 4,000 characters the node logged, for an assertion's message. */
    String logTail() {
        String log = logText();
        return log.length() <= 4000 ? log : log.substring(log.length() - 4000);
    }

    /** Waits until the node's log contains {@code text}; fails with the log's tail after {@code max}. */
    void awaitLog(String text, Duration max) throws InterruptedException {
        long deadline = System.nanoTime() + max.toNanos();
        while (!logText().contains(text)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(this + " did not log '" + text + "' within " + max.toSeconds() + " s; its log ends:\n"
                        + logTail());
            }
            Thread.sleep(100);
        }
    }

    /** Everything the node logged so far. */
    String logText() {
        try {
            return Files.readString(log, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + log, e);
        }
    }

    /**
     * SIGTERM: the JVM runs Pekko's coordinated shutdown, a graceful leave (a compute node hands its
     * partitions off first). Returns whether the JVM exited within {@code max}.
     */
    boolean stopGracefully(Duration max) throws InterruptedException {
        signalStop();
        return awaitExit(max);
    }

    /** SIGKILL, as a crash: nothing of the node runs any more, its cache is gone. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }

    /** Sends {@code kill -<signal>} to the node's JVM (STOP pauses it, CONT resumes it) and fails if kill does. */
    void signal(String signal) throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid())).inheritIO().start();
        if (kill.waitFor() != 0) {
            throw new IllegalStateException("kill -" + signal + " " + pid() + " exited with " + kill.exitValue());
        }
    }

    /** Sends SIGTERM without waiting (so several nodes stop at once). */
    void signalStop() {
        process.destroy();
    }

    /** Waits up to {@code max} for the JVM to exit; true if it did. */
    boolean awaitExit(Duration max) throws InterruptedException {
        return process.waitFor(max.toMillis(), TimeUnit.MILLISECONDS);
    }

    @Override
    public String toString() {
        return name + (port > 0 ? "@" + port : "");
    }
}
