package dev.dex.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The class-data archive's training run (bin/dex runs it with {@code -XX:ArchiveClassesAtExit} before the first node of a
 * build; the multi-JVM tests' {@code ClassArchive} checks that node JVMs map what it loaded): it must serve a put and a
 * get through a memory node, a compute node and a client, and stop them all.
 */
class ClassArchiveTrainingTest {
    @Test
    void theTrainingServesAPutAndAGetAndStopsItsNodes() {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int exit = ClassArchiveTraining.run(new PrintWriter(out), new PrintWriter(err));
        assertEquals(0, exit, err.toString());
        assertTrue(out.toString().contains("served a put and a get"), out.toString());
        assertEquals("", err.toString(), "no system failed to stop");
    }

    @Test
    void nodeProcessesMapTheArchiveBinDexNamesOnlyWhenItExists(@TempDir Path dir) throws Exception {
        Path archive = dir.resolve("dex-node.jsa");
        try {
            assertEquals(List.of(), NodeProcesses.classArchiveFlags(), "no property: no archive");
            System.setProperty(NodeProcesses.CLASS_ARCHIVE, archive.toString());
            assertEquals(List.of(), NodeProcesses.classArchiveFlags(), "a named archive that is not there: none");
            Files.write(archive, new byte[] {1});
            assertEquals(List.of("-XX:SharedArchiveFile=" + archive, "-Xlog:cds=off", "-Xlog:cds+dynamic=off"),
                    NodeProcesses.classArchiveFlags());
        } finally {
            System.clearProperty(NodeProcesses.CLASS_ARCHIVE);
        }
    }
}
