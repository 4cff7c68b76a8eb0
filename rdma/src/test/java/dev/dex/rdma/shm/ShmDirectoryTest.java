package dev.dex.rdma.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.RegionHeaderDescriptor;

/**
 * The shm directory is made owner-only, and one others may write is refused by every path that uses it (export,
 * attach, connect): whoever can write the directory can put a region file of their own in place of a memory
 * node's. Region files are owner-only too.
 */
class ShmDirectoryTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long LENGTH = 16L * CHUNK;

    @TempDir(factory = ShmTempDirFactory.class)
    Path parent;

    @Test
    void aNewDirectoryIsOwnerOnlyAndSoAreItsRegionFiles() throws Exception {
        Path directory = parent.resolve("a/dex");
        try (ShmFabric fabric = new ShmFabric(directory)) {
            fabric.export(0, LENGTH, CHUNK);
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(directory)));
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(fabric.regionFile(0))));
        }
    }

    @Test
    void aDirectoryOthersMayWriteIsRefusedEverywhere() throws Exception {
        Path directory = parent.resolve("dex");
        try (ShmFabric fabric = new ShmFabric(directory)) {
            fabric.export(0, LENGTH, CHUNK);
            Files.setPosixFilePermissions(directory, PosixFilePermissions.fromString("rwxrwxrwx"));
            for (Runnable use : new Runnable[] {() -> fabric.export(1, LENGTH, CHUNK), () -> fabric.attach(2, LENGTH, CHUNK),
                    () -> new ShmFabric(directory).connect(0)}) {
                IllegalStateException refused = assertThrows(IllegalStateException.class, use::run);
                assertTrue(refused.getMessage().contains("may be written by others (mode rwxrwxrwx)")
                        && refused.getMessage().contains("chmod 700"), refused.getMessage());
            }
            Files.setPosixFilePermissions(directory, PosixFilePermissions.fromString("rwxr-xr-x"));
            ExportedRegion region = fabric.export(1, LENGTH, CHUNK);
            assertTrue(region.fresh(), "a directory only its owner may write (0755, as earlier versions made it) is used");
            new ShmFabric(directory).connect(0, 1).close();
        }
    }
}
