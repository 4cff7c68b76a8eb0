package dev.dex.multijvm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;

/**
 * A dynamic class-data archive (CDS) of what a node JVM loads, made once per test JVM and mapped by every node JVM
 * the harness starts after it.
 *
 * <p>Why: a node JVM spends most of its start loading and verifying Pekko's, Scala's and the project's classes. With
 * the archive a memory node was up in 2.0 s instead of 4.0 s on this project's two-core machine, and the multi-JVM
 * tests start dozens of node JVMs one after another. The archive changes no behaviour: a JVM that cannot map it (a
 * changed class path, an old JDK) starts as it would without it ({@code -Xshare:auto}, the default).
 *
 * <p>How: a training JVM with the node JVMs' flags and class path runs {@code DexCli class-archive-training} (the
 * product's, which bin/dex runs too: a memory node, a compute node and a client in one actor system each, over the tcp
 * fabric, a put and a get), exits, and writes the classes it loaded ({@code -XX:ArchiveClassesAtExit}) to
 * {@code target/it-cds/nodes.jsa}. A JVM with {@code -Xshare:on} then checks that the nodes' class path maps it. If
 * either fails, the nodes start without the archive and the reason is printed; {@code ClassArchiveIT} fails then.
 *
 * <p>The class path. The JVM archives nothing from a class path with a directory that is not empty, and this test
 * JVM's starts with {@code target/test-classes}. So node JVMs get {@link #classPath}: this JVM's, less this module's
 * directories, then {@code target/it-cds/it-node.jar}, which holds what they need of the test classes: the nodes'
 * logback file.
 *
 * <p>Concurrency: {@link #flags} and {@link #classPath} are synchronized; the first caller trains, the others wait.
 */
final class ClassArchive {
    private static final Duration TRAINING_TIMEOUT = Duration.ofSeconds(120);
    /** What node JVMs need of the test classes, in {@link #NODE_JAR}. */
    private static final List<String> NODE_FILES = List.of("dex-it-node-logback.xml");
    private static final String NODE_JAR = "it-node.jar";
    private static List<String> flags;
    private static String classPath;

    private ClassArchive() {
    }

    /** The node JVMs' flags that map the archive, made by the first call; empty if it could not be made. */
    static synchronized List<String> flags() {
        if (flags == null) {
            flags = make();
        }
        return flags;
    }

    /**
     * The node JVMs' class path: this JVM's, less its directories, plus a jar of {@link #NODE_FILES}; this JVM's own
     * if that jar cannot be made.
     */
    static synchronized String classPath() {
        if (classPath == null) {
            classPath = System.getProperty("java.class.path");
            try {
                Path jar = directory().resolve(NODE_JAR);
                Files.createDirectories(jar.getParent());
                try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar))) {
                    for (String name : NODE_FILES) {
                        try (var in = ClassArchive.class.getClassLoader().getResourceAsStream(name)) {
                            if (in == null) {
                                throw new IOException("no " + name + " on the class path");
                            }
                            out.putNextEntry(new JarEntry(name));
                            in.transferTo(out);
                            out.closeEntry();
                        }
                    }
                }
                // This module's directories (target/classes, target/test-classes); another module's would stay, and
                // then the training fails and the nodes start without an archive, as they did before it.
                Path module = Path.of(System.getProperty("basedir", ".")).toAbsolutePath().normalize();
                List<String> entries = new ArrayList<>();
                for (String entry : classPath.split(java.io.File.pathSeparator)) {
                    Path file = Path.of(entry).toAbsolutePath().normalize();
                    if (!entry.isEmpty() && !(Files.isDirectory(file) && file.startsWith(module))) {
                        entries.add(entry);
                    }
                }
                entries.add(jar.toString());
                classPath = String.join(java.io.File.pathSeparator, entries);
            } catch (IOException e) {
                System.out.println("[ClassArchive] node JVMs get this JVM's class path (no class-data archive): " + e);
                flags = List.of();
            }
        }
        return classPath;
    }

    private static Path directory() {
        return Path.of(System.getProperty("basedir", "."), "target", "it-cds");
    }

    private static List<String> make() {
        String path = classPath();
        if (flags != null) {
            return flags;
        }
        Path directory = directory();
        Path archive = directory.resolve("nodes.jsa");
        Path log = directory.resolve("training.log");
        long started = System.nanoTime();
        try {
            Files.createDirectories(directory);
            Files.deleteIfExists(archive);
            List<String> command = new ArrayList<>();
            command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            command.addAll(NodeProcess.JVM_FLAGS);
            command.addAll(List.of("-XX:ArchiveClassesAtExit=" + archive, "-Xlog:cds=off", "-Xlog:cds+dynamic=off"));
            command.addAll(List.of("-cp", path, "dev.dex.cluster.DexCli", "class-archive-training"));
            if (!runs(command, log, TRAINING_TIMEOUT)) {
                return without("its training JVM failed or did not exit within " + TRAINING_TIMEOUT.toSeconds() + " s; see " + log);
            }
            if (!Files.isRegularFile(archive) || Files.size(archive) == 0) {
                return without("its training JVM wrote no archive; see " + log);
            }
            List<String> flags = List.of("-XX:SharedArchiveFile=" + archive, "-Xlog:cds=off", "-Xlog:cds+dynamic=off");
            // -Xshare:on, with the nodes' own flags: a JVM that cannot map the archive exits instead of going on without.
            List<String> check = new ArrayList<>();
            check.add(command.get(0));
            check.addAll(NodeProcess.JVM_FLAGS);
            check.addAll(flags);
            check.addAll(List.of("-Xshare:on", "-cp", path, "dev.dex.cluster.DexCli", "--help"));
            Path checkLog = directory.resolve("check.log");
            if (!runs(check, checkLog, Duration.ofSeconds(60))) {
                return without("a JVM with -Xshare:on could not map it; see " + checkLog);
            }
            System.out.printf("[ClassArchive] node JVMs map %s (%d MiB), made in %.1f s%n", archive,
                    Files.size(archive) >> 20, (System.nanoTime() - started) / 1e9);
            return flags;
        } catch (IOException e) {
            return without(e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return without("interrupted");
        }
    }

    /** Runs {@code command}, its output to {@code log}; true if it exited with 0 within {@code max}. Never leaves it running. */
    private static boolean runs(List<String> command, Path log, Duration max) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        try {
            return process.waitFor(max.toMillis(), TimeUnit.MILLISECONDS) && process.exitValue() == 0;
        } finally {
            if (process.isAlive()) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }

    private static List<String> without(String why) {
        System.out.println("[ClassArchive] node JVMs start without a class-data archive: " + why);
        return List.of();
    }
}
