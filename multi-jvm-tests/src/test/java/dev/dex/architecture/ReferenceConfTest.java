package dev.dex.architecture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValue;

import dev.dex.cluster.DexSettings;

/**
 * Every {@code dex.*} setting has one home: an entry with a comment in the {@code reference.conf} of the module
 * that reads it (rdma: the fabric; index-core: the engine; actors and cluster-config: the rest). The code never
 * reads a path that has none, so no default hides in the code.
 */
class ReferenceConfTest {
    /** Every reference.conf on the class path, merged, without the system properties defaultReference() adds. */
    private static final Config REFERENCE = ConfigFactory.parseResources("reference.conf").resolve();
    private static final Path ROOT = Path.of(System.getProperty("basedir", ".")).toAbsolutePath().normalize().getParent();
    /** A {@code dex.*} path in a string literal. */
    private static final Pattern PATH_LITERAL = Pattern.compile("\"(dex(?:\\.[a-z0-9-]+)+)\"");

    @Test
    void everyEntryOfTheDexNamespaceHasAComment() {
        SortedSet<String> uncommented = new TreeSet<>();
        for (Map.Entry<String, ConfigValue> entry : REFERENCE.getConfig("dex").entrySet()) {
            if (entry.getValue().origin().comments().stream().allMatch(String::isBlank)) {
                uncommented.add("dex." + entry.getKey());
            }
        }
        assertEquals(Set.of(), uncommented, "reference.conf entries without a comment");
    }

    @Test
    void everyPathTheSettingsReadHasAnEntry() {
        SortedSet<String> read = new TreeSet<>();
        DexSettings.from(recording(REFERENCE, "", read));
        assertTrue(read.size() > 40, "the settings read the dex namespace: " + read);
        SortedSet<String> missing = new TreeSet<>();
        for (String path : read) {
            if (path.startsWith("dex.") && !REFERENCE.hasPath(path)) {
                missing.add(path);
            }
        }
        assertEquals(Set.of(), missing, "paths the settings read that no reference.conf holds");
    }

    @Test
    void everyPathNamedInTheCodeHasAnEntry() throws IOException {
        Map<String, String> missing = new TreeMap<>();
        for (String module : List.of("rdma", "index-core", "actors", "bench", "cluster-config")) {
            try (Stream<Path> files = Files.walk(ROOT.resolve(module).resolve("src/main/java"))) {
                for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                    String source = Files.readString(file);
                    if (!source.contains("com.typesafe.config")) {
                        continue;
                    }
                    Matcher literal = PATH_LITERAL.matcher(source);
                    while (literal.find()) {
                        if (!REFERENCE.hasPathOrNull(literal.group(1))) {
                            missing.put(literal.group(1), ROOT.relativize(file).toString());
                        }
                    }
                }
            }
        }
        assertEquals(Map.of(), missing, "dex paths in the code that no reference.conf holds");
    }

    @Test
    void theRecordingSeesWhatIsRead() {
        SortedSet<String> read = new TreeSet<>();
        Config config = recording(ConfigFactory.parseString("a { b = 1, c { d = x } }"), "", read);
        config.getConfig("a").getInt("b");
        config.getConfig("a").getConfig("c").getString("d");
        config.hasPath("a.e");
        assertEquals(new TreeSet<>(List.of("a", "a.b", "a.c", "a.c.d", "a.e")), read);
    }

    /** {@code config}, recording the absolute path of every value and section read through it. */
    private static Config recording(Config config, String prefix, Set<String> read) {
        return (Config) Proxy.newProxyInstance(Config.class.getClassLoader(), new Class<?>[] {Config.class}, (proxy, method, args) -> {
            if (args != null && args.length >= 1 && args[0] instanceof String path) {
                read.add(prefix + path);
            }
            Object result;
            try {
                result = method.invoke(config, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
            if (result instanceof Config section && method.getName().equals("getConfig")) {
                return recording(section, prefix + args[0] + ".", read);
            }
            return result;
        });
    }
}
