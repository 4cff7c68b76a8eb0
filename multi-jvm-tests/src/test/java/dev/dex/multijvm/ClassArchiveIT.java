package dev.dex.multijvm;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The node JVMs of every scenario map a class-data archive ({@link ClassArchive}): made by the product's training run
 * with their class path and checked by a JVM with {@code -Xshare:on}. Fails when either failed, so that a change that
 * stops the archive from mapping (a class path the JVM refuses, a training that fails) shows instead of slowing every
 * scenario quietly.
 */
class ClassArchiveIT {
    @Test
    void nodeJvmsMapTheArchive() {
        assertTrue(ClassArchive.flags().stream().anyMatch(flag -> flag.startsWith("-XX:SharedArchiveFile=")),
                "the node JVMs start without a class-data archive; the console's [ClassArchive] line says why");
    }
}
