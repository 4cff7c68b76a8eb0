package dev.dex.ycsb;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Vector;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.htrace.core.HTraceConfiguration;
import org.apache.htrace.core.Tracer;
import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

import dev.dex.cluster.DexNodes;
import dev.dex.cluster.DexSettings;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.DBWrapper;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;
import site.ycsb.measurements.Measurements;
import site.ycsb.measurements.exporter.TextMeasurementsExporter;
import site.ycsb.workloads.CoreWorkload;

/**
 * The YCSB binding against a cluster in this JVM (a memory node and a compute node on the local fabric): the core
 * workloads A (reads and updates) and E (scans and inserts) load and run with {@code dataintegrity=true}, so every
 * value read is checked against the one written, with no error and no failed check; plus the key and value mapping.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DexYcsbClientTest {
    private final List<ActorSystem<?>> systems = new ArrayList<>();
    private String seed;

    private static Config config(String role, String fabric, List<String> seeds) {
        Config overrides = ConfigFactory.parseString("""
                dex.fabric.transport = local
                dex.fabric.local-name = "%s"
                dex.memory.region-size = 64MiB
                dex.tree.partitions = 4
                dex.compute.cache-size = 8MiB
                dex.management.enabled = off
                """.formatted(fabric));
        return DexNodes.nodeConfig(DexNodes.config(overrides), role, "127.0.0.1", 0, seeds);
    }

    @BeforeAll
    void startACluster() {
        String fabric = "ycsb-" + UUID.randomUUID();
        Config memory = config("memory", fabric, List.of());
        ActorSystem<Void> memorySystem = DexNodes.memoryNode(memory, DexSettings.from(memory));
        systems.add(memorySystem);
        seed = DexNodes.hostPort(memorySystem);
        Config compute = config("compute", fabric, List.of(seed));
        systems.add(DexNodes.computeNode(compute, DexSettings.from(compute)));
    }

    @AfterAll
    void stop() throws Exception {
        for (ActorSystem<?> system : systems) {
            system.terminate();
        }
        for (ActorSystem<?> system : systems) {
            system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }

    /** Loads and runs {@code workload} (a file of ycsb/workloads) on a small record count; returns YCSB's report. */
    private String loadAndRun(String workload, int records, int operations) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(Path.of("workloads", workload).toFile())) {
            p.load(in);
        }
        p.setProperty("recordcount", Integer.toString(records));
        p.setProperty("operationcount", Integer.toString(operations));
        p.setProperty("dataintegrity", "true");
        p.setProperty("dex.seed", seed);
        p.setProperty("dex.config", writeClientConfig().toString());
        Measurements.setProperties(p);
        CoreWorkload core = new CoreWorkload();
        core.init(p);
        DexYcsbClient binding = new DexYcsbClient();
        binding.setProperties(p);
        binding.init();
        Tracer tracer = new Tracer.Builder("ycsb-test").conf(HTraceConfiguration.EMPTY).build();
        DB db = new DBWrapper(binding, tracer);
        try {
            Object state = core.initThread(p, 0, 1);
            for (int i = 0; i < records; i++) {
                assertTrue(core.doInsert(db, state), "insert " + i);
            }
            for (int i = 0; i < operations; i++) {
                assertTrue(core.doTransaction(db, state), "operation " + i);
            }
        } finally {
            binding.cleanup();
        }
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        try (TextMeasurementsExporter exporter = new TextMeasurementsExporter(report)) {
            Measurements.getMeasurements().exportMeasurements(exporter);
        }
        return report.toString(StandardCharsets.UTF_8);
    }

    /** A client config file for the binding: the cluster's local fabric, no operator endpoint. */
    private Path writeClientConfig() throws Exception {
        Path file = java.nio.file.Files.createTempFile("dex-ycsb", ".conf");
        file.toFile().deleteOnExit();
        java.nio.file.Files.writeString(file, "dex.management.enabled = off\n");
        return file;
    }

    /** The count YCSB reports for {@code [OPERATION], Return=STATUS}, or 0. */
    private static long count(String report, String operation, String status) {
        Matcher m = Pattern.compile("\\[" + Pattern.quote(operation) + "], Return=" + status + ", (\\d+)").matcher(report);
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }

    private static void assertNoErrors(String report) {
        for (String line : report.lines().toList()) {
            if (line.contains("Return=") && !line.contains("Return=OK")) {
                throw new AssertionError("YCSB reported a failure: " + line + "\n" + report);
            }
        }
    }

    @Test
    void workloadsAAndEPassWithDataIntegrity() throws Exception {
        String a = loadAndRun("workloada", 1_000, 2_000);
        assertNoErrors(a);
        assertEquals(1_000, count(a, "INSERT", "OK"), a);
        assertTrue(count(a, "READ", "OK") > 500 && count(a, "UPDATE", "OK") > 500, a);
        assertEquals(count(a, "READ", "OK"), count(a, "VERIFY", "OK"), "every read was checked: " + a);

        String e = loadAndRun("workloade", 1_000, 1_000);
        assertNoErrors(e);
        assertTrue(count(e, "SCAN", "OK") > 800, e);
        assertTrue(count(e, "INSERT", "OK") > 2_000, "E inserts besides its load (YCSB counts A's load too): " + e);
    }

    /** What YCSB does not check itself: a scan's records and their order, a delete, and a value too long. */
    @Test
    void scansFollowTheKeysNumbersAndWhatDoesNotFitIsRefused() throws Exception {
        Properties p = new Properties();
        p.setProperty("fieldcount", "1");
        p.setProperty("fieldlength", "7");
        p.setProperty("dex.seed", seed);
        DexYcsbClient binding = new DexYcsbClient();
        binding.setProperties(p);
        binding.init();
        try {
            for (String[] record : new String[][] {{"user900005", "five"}, {"user900007", "seven"}, {"user900009", "nine"}}) {
                assertEquals(Status.OK, binding.insert("usertable", record[0],
                        Map.of("field0", new StringByteIterator(record[1]))));
            }
            Vector<HashMap<String, ByteIterator>> scanned = new Vector<>();
            assertEquals(Status.OK, binding.scan("usertable", "user900006", 2, null, scanned));
            assertEquals(List.of("seven", "nine"), scanned.stream().map(r -> r.get("field0").toString()).toList());
            Map<String, ByteIterator> read = new HashMap<>();
            assertEquals(Status.OK, binding.read("usertable", "user900007", null, read));
            assertEquals("seven", read.get("field0").toString());
            assertEquals(Status.OK, binding.delete("usertable", "user900007"));
            assertEquals(Status.NOT_FOUND, binding.read("usertable", "user900007", null, new HashMap<>()));
            assertEquals(Status.NOT_FOUND, binding.delete("usertable", "user900007"));
            assertEquals(Status.BAD_REQUEST, binding.update("usertable", "user900005",
                    Map.of("field0", new StringByteIterator("eightbyt"))), "8 bytes do not fit");
            assertEquals(Status.BAD_REQUEST, binding.read("usertable", "nonumber", null, new HashMap<>()));
            read.clear();
            assertEquals(Status.OK, binding.read("usertable", "user900005", null, read));
            assertEquals("five", read.get("field0").toString(), "the refused update changed nothing");
        } finally {
            binding.cleanup();
            binding.cleanup();
        }
    }

    @Test
    void keysAreTheirNumbersAndValuesKeepUpToSevenBytes() {
        assertEquals(6284781860667377211L, DexYcsbClient.indexKey("user6284781860667377211"));
        assertEquals(42, DexYcsbClient.indexKey("user42"));
        assertThrows(IllegalArgumentException.class, () -> DexYcsbClient.indexKey("user"));
        assertThrows(IllegalArgumentException.class, () -> DexYcsbClient.indexKey("user99999999999999999999"));
        for (String value : new String[] {"", "a", "%abc,12", "\u00ff\u0000x"}) {
            byte[] bytes = value.getBytes(StandardCharsets.ISO_8859_1);
            assertArrayEquals(bytes, DexYcsbClient.decode(DexYcsbClient.encode(bytes)), value);
        }
        assertThrows(IllegalArgumentException.class, () -> DexYcsbClient.encode(new byte[8]));
    }

    @Test
    void recordsTheIndexCannotHoldAreRefusedAtInit() {
        DexYcsbClient binding = new DexYcsbClient();
        Properties p = new Properties();
        p.setProperty("fieldcount", "10");
        p.setProperty("fieldlength", "100");
        binding.setProperties(p);
        DBException e = assertThrows(DBException.class, binding::init);
        assertTrue(e.getMessage().contains("fieldcount=1"), e.getMessage());
        DexYcsbClient noSeed = new DexYcsbClient();
        Properties q = new Properties();
        q.setProperty("fieldcount", "1");
        q.setProperty("fieldlength", "7");
        noSeed.setProperties(q);
        assertTrue(assertThrows(DBException.class, noSeed::init).getMessage().contains("dex.seed"));
    }
}
