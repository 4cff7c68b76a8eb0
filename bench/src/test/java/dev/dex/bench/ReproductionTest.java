package dev.dex.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;

import javax.imageio.ImageIO;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dex reproduce} on tiny data: two experiments (a bar chart and a line chart), their CSVs with one row per run
 * and values a run really measured, PNGs that decode, an index that shows them, and progress for every run.
 */
class ReproductionTest {
    private static final Reproduction.Scale TINY = new Reproduction.Scale("tiny", 20_000, 5_000, 2_000);

    @TempDir
    Path dir;

    @Test
    void writesACsvAPlotAndAReadingPerExperiment() throws Exception {
        StringWriter progress = new StringWriter();
        List<Path> written = new Reproduction(TINY, 16, new PrintWriter(progress, true)).run(dir, Set.of("verbs", "skew"));
        assertEquals(5, written.size(), "two CSVs, two PNGs and the index: " + written);

        List<String> verbs = Files.readAllLines(dir.resolve("verbs.csv"));
        assertEquals("series,x,throughput_ops_per_s,reads_per_op,writes_per_op,atomics_per_op,two_sided_per_op,hit_ratio,value",
                verbs.get(0));
        assertEquals(1 + 8, verbs.size(), "two workloads by four modes");
        double dexReads = -1;
        double baselineReads = -1;
        for (String row : verbs.subList(1, verbs.size())) {
            String[] f = row.split(",");
            assertTrue(Double.parseDouble(f[2]) > 0, "a throughput: " + row);
            assertEquals(Double.parseDouble(f[3]), Double.parseDouble(f[8]), 1e-9, "the plotted value is reads/op: " + row);
            if (f[0].equals("read-only") && f[1].equals("dex")) {
                dexReads = Double.parseDouble(f[3]);
            }
            if (f[0].equals("read-only") && f[1].equals("baseline")) {
                baselineReads = Double.parseDouble(f[3]);
            }
        }
        assertTrue(dexReads > 0 && dexReads < baselineReads, "the cache saves reads: dex " + dexReads + ", baseline " + baselineReads);
        assertEquals(1 + 8, Files.readAllLines(dir.resolve("skew.csv")).size(), "two modes by four thetas");

        for (String name : List.of("verbs", "skew")) {
            BufferedImage image = ImageIO.read(dir.resolve(name + ".png").toFile());
            assertNotNull(image, name + ".png decodes");
            assertEquals(800, image.getWidth());
            assertEquals(500, image.getHeight());
        }
        String index = Files.readString(dir.resolve("index.md"));
        assertTrue(index.contains("![Remote reads per operation (Table 2)](verbs.png)") && index.contains("(skew.csv)"), index);
        assertTrue(index.contains("DEX reads"), "a line of reading with the measured figures: " + index);
        assertEquals(16, progress.toString().lines().filter(l -> l.startsWith("[")).count(), "a progress line per run: " + progress);
        assertTrue(progress.toString().contains("[16/16] skew:"), progress.toString());
    }

    @Test
    void theLeafAdmissionReadingSetsAutoAgainstTheBestFixedValueOfEachWorkload() {
        java.util.Map<String, java.util.Map<String, Double>> points = new java.util.LinkedHashMap<>();
        points.put("read-only 1% cache", new java.util.LinkedHashMap<>(java.util.Map.of("0.01", 100.0, "0.05", 120.0, "0.1",
                110.0, "0.3", 90.0, "1", 80.0, "auto", 114.0)));
        points.put("write-intensive 8% cache", new java.util.LinkedHashMap<>(java.util.Map.of("0.01", 50.0, "0.05", 40.0,
                "0.1", 30.0, "0.3", 20.0, "1", 60.0, "auto", 66.0)));
        String reading = Reproduction.admissionReading(points);
        assertTrue(reading.contains("read-only 1% cache 0.95x (best fixed 0.05)"), reading);
        assertTrue(reading.contains("write-intensive 8% cache 1.10x (best fixed 1)"), reading);
    }

    /**
     * The scale page from its test bed's --json files: a stand-in bed writes, per size, figures that grow with the
     * size (a real bed runs clusters: DemoRunsTest and docs/benchmarks.md), and the page must carry each into its CSV
     * row, its plots and its reading.
     */
    @Test
    void theScalePageRunsEverySizeAndPlotsItsFigures() throws Exception {
        List<Integer> asked = new java.util.ArrayList<>();
        Reproduction.ScaleBed bed = (nodes, partitions, scale, json) -> {
            asked.add(nodes);
            assertEquals(ScalePage.PARTITIONS, partitions);
            Files.writeString(json, String.format(java.util.Locale.ROOT, """
                    {"join": {"settledSeconds": %d.5, "rebalanceRounds": %d, "partitionsMoved": %d, "lowestShare": 0.%02d,
                              "longestOpSeconds": 1.25, "usualOpsPerSec": %d},
                     "leave": {"settledSeconds": %d.0, "rebalanceRounds": 3, "partitionsMoved": %d, "lowestShare": 0.5,
                               "longestOpSeconds": 0.5, "usualOpsPerSec": %d},
                     "coordinatorKill": {"newCoordinatorSeconds": %d.25, "servedAgainSeconds": %d.75, "partitions": %d}}
                    """, nodes, nodes + 1, 1024 / (nodes + 1), 90 - nodes, 1000 * nodes, nodes, 1024 / (nodes + 1), 1000 * nodes,
                    nodes, nodes + 1, 1024 / nodes));
        };
        StringWriter progress = new StringWriter();
        List<Path> written = new Reproduction(TINY, 16, new PrintWriter(progress, true)).withScaleBed(bed).run(dir, Set.of("scale"));
        assertEquals(ScalePage.sizes(TINY), asked, "every size, smallest first");
        assertEquals(List.of(2, 4, 8), asked, "a scale other than full runs 2 to 8 compute nodes");

        List<String> csv = Files.readAllLines(dir.resolve("scale.csv"));
        assertEquals(1 + 3, csv.size(), "a row per size: " + csv);
        assertTrue(csv.get(0).startsWith("compute_nodes,partitions,usual_ops_per_s,join_settled_s,join_rounds,"), csv.get(0));
        assertEquals("4,1024,4000,4.50,5,204,0.860,1.250,4.00,3,204,0.500,0.500,4.25,5.75,256", csv.get(2));
        for (String name : List.of("scale-seconds", "scale-rounds", "scale-lowest")) {
            BufferedImage image = ImageIO.read(dir.resolve(name + ".png").toFile());
            assertNotNull(image, name + ".png decodes");
            assertTrue(written.contains(dir.resolve(name + ".png")), name + " is listed: " + written);
        }
        String index = Files.readString(dir.resolve("index.md"));
        assertTrue(index.contains("![Seconds](scale-seconds.png)") && index.contains("(scale.csv)"), index);
        assertTrue(index.contains("Cluster runs only; one JVM, this machine. Made by `bin/dex reproduce --only scale`."), index);
        assertTrue(index.contains("- 8 compute nodes (usual 8,000 ops/s): join settled in 8.5 s, 9 rounds, 113 moved, lowest"
                + " second 82%; leave 8.0 s, 3 rounds, 113 moved, lowest 50%; the coordinator's node killed: a new coordinator"
                + " after 8.3 s, its 128 partitions served again after 9.8 s."), index);
        assertTrue(progress.toString().contains("[scale 3/3] 8 compute nodes, 1024 partitions"), progress.toString());
    }

    @Test
    void theScalePageIsLeftOutWithoutItsBedAndSaysSo() throws Exception {
        new Reproduction(TINY, 16, new PrintWriter(new StringWriter())).run(dir, Set.of("scale"));
        assertTrue(Files.readString(dir.resolve("index.md")).contains("Not run here: the scale page"));
        assertTrue(!Files.exists(dir.resolve("scale.csv")));
    }

    @Test
    void anUnknownExperimentIsAClearError() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new Reproduction(TINY, 16, new PrintWriter(new StringWriter())).run(dir, Set.of("latency")));
        assertTrue(e.getMessage().contains("no experiment 'latency'") && e.getMessage().contains("leaf-admission"), e.getMessage());
    }
}
