package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import javax.imageio.ImageIO;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.dex.bench.Reproduction;

/**
 * {@code dex reproduce}'s repartitioning timeline on the smallest cluster run (100,000 keys): the throughput of every
 * 100 ms while a compute node joins and leaves, as a CSV, a plot that decodes, and a line of reading.
 */
class ReproduceTimelineTest {
    @TempDir
    Path dir;

    @Test
    void theTimelineIsACsvAPlotAndAReading() throws Exception {
        String section = DexCli.timeline(dir, new Reproduction.Scale("tiny", 100_000, 10_000, 1_000));
        assertTrue(section.contains("![Repartitioning timeline](timeline.png)") && section.contains("one more joins at"), section);

        List<String> rows = Files.readAllLines(dir.resolve("timeline.csv"));
        assertEquals("t_seconds,ops_per_second", rows.get(0));
        assertTrue(rows.size() > 50, "at least 5 s of 100 ms ticks: " + rows.size());
        long busy = rows.stream().skip(1).mapToDouble(r -> Double.parseDouble(r.split(",")[1])).filter(v -> v > 0).count();
        assertTrue(busy > rows.size() / 2, "operations completed in most ticks: " + busy + " of " + (rows.size() - 1));

        BufferedImage image = ImageIO.read(dir.resolve("timeline.png").toFile());
        assertNotNull(image, "timeline.png decodes");
        assertEquals(800, image.getWidth());
    }
}
