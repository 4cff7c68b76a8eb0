package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;

import org.junit.jupiter.api.Test;

/**
 * The module's packages depend on each other in one direction only (each package's {@code package-info.java} says
 * which): client on node and partition, node on partition, all three on {@code dev.dex.actors}, which depends on none
 * of them. Read from the compiled classes with {@code jdeps}, so that a dependency hidden in a fully qualified name
 * counts as much as an import; a use of a compile-time constant alone is inlined by the compiler and escapes it. Two
 * class-level cycles that were broken on purpose stay broken.
 */
class PackageDependenciesTest {
    private static final String ROOT = "dev.dex.actors";
    private static final Map<String, Set<String>> ALLOWED = Map.of(
            ROOT, Set.of(),
            ROOT + ".partition", Set.of(ROOT),
            ROOT + ".node", Set.of(ROOT, ROOT + ".partition"),
            ROOT + ".client", Set.of(ROOT, ROOT + ".partition", ROOT + ".node"));
    /** Class edges that once closed a cycle: MemoryNode and ComputeNode, PartitionRouter and its codec. */
    private static final List<String> FORBIDDEN = List.of(
            ROOT + ".node.MemoryNode -> " + ROOT + ".node.ComputeNode",
            ROOT + ".partition.PartitionRouter -> " + ROOT + ".partition.BatchSerializer");

    private static final Pattern EDGE = Pattern.compile("^\\s+(dev\\.dex\\.actors[\\w.$]*)\\s+->\\s+(dev\\.dex\\.actors[\\w.$]*)\\s");

    @Test
    void packagesDependOnEachOtherInOneDirectionOnly() throws Exception {
        Set<String> packages = new TreeSet<>();
        Set<String> wrong = new TreeSet<>();
        for (String[] edge : edges("package")) {
            packages.add(edge[0]);
            if (!edge[0].equals(edge[1]) && !ALLOWED.getOrDefault(edge[0], Set.of()).contains(edge[1])) {
                wrong.add(edge[0] + " -> " + edge[1]);
            }
        }
        assertEquals(new TreeSet<>(ALLOWED.keySet()), packages,
                "the module's packages; a new one needs its place in ALLOWED and a package-info.java");
        assertEquals(Set.of(), wrong, "dependencies against the direction client -> node -> partition -> " + ROOT);
    }

    @Test
    void brokenClassCyclesStayBroken() throws Exception {
        Set<String> found = new TreeSet<>();
        for (String[] edge : edges("class")) {
            String outer = edge[0].replaceAll("\\$.*", "") + " -> " + edge[1].replaceAll("\\$.*", "");
            if (FORBIDDEN.contains(outer)) {
                found.add(edge[0] + " -> " + edge[1]);
            }
        }
        assertEquals(Set.of(), found);
    }

    /** The dependencies jdeps reports between the module's main classes, at {@code level} (package or class). */
    private static List<String[]> edges(String level) throws Exception {
        Optional<ToolProvider> jdeps = ToolProvider.findFirst("jdeps");
        assumeTrue(jdeps.isPresent(), "jdeps is part of the JDK; this JVM has none");
        Path classes = Path.of(CborSerializable.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = jdeps.get().run(new PrintWriter(out), new PrintWriter(err), "-verbose:" + level, "-filter:none",
                "-e", "dev\\.dex\\.actors.*", classes.toString());
        assertEquals(0, status, "jdeps failed: " + err);
        List<String[]> edges = new ArrayList<>();
        for (String line : out.toString().split("\\R")) {
            Matcher m = EDGE.matcher(line);
            if (m.find()) {
                edges.add(new String[] {m.group(1), m.group(2)});
            }
        }
        assertFalse(edges.isEmpty(), "no dependencies read from jdeps' output:\n" + out);
        return edges;
    }
}
