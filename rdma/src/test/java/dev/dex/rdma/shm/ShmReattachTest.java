package dev.dex.rdma.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
 * A memory node's region on {@code shm} outlives the memory node: {@link ShmFabric#attach} reattaches to it with
 * its data, {@link ExportedRegion#detach()} keeps it, and only one exporter at a time may serve a server id.
 */
class ShmReattachTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long LENGTH = 16L * CHUNK;

    @TempDir(factory = ShmTempDirFactory.class)
    Path directory;

    @Test
    void aDetachedRegionIsReattachedWithItsData() throws Exception {
        try (ShmFabric first = new ShmFabric(directory)) {
            ExportedRegion region = first.attach(3, LENGTH, CHUNK);
            assertTrue(region.fresh(), "nothing to reattach to at first");
            region.region().putLongVolatile(CHUNK, 0xDA7AL);
            region.detach();
            assertTrue(Files.isRegularFile(first.regionFile(3)), "a detached region keeps its file");
        }
        try (ShmFabric second = new ShmFabric(directory)) {
            ExportedRegion again = second.attach(3, LENGTH, CHUNK);
            assertFalse(again.fresh(), "the second start reattaches");
            assertEquals(0xDA7AL, again.region().getLongVolatile(CHUNK), "with the data");
            assertEquals(PosixFilePermissions.fromString("rw-------"), Files.getPosixFilePermissions(second.lockFile(3)));
            again.close();
            assertFalse(Files.exists(second.regionFile(3)), "close (not detach) discards the region");
        }
    }

    @Test
    void aSecondExporterOfTheSameServerIdIsRefusedUntilTheFirstLetsGo() {
        try (ShmFabric first = new ShmFabric(directory); ShmFabric second = new ShmFabric(directory)) {
            ExportedRegion serving = first.attach(0, LENGTH, CHUNK);

            IllegalStateException refused = assertThrows(IllegalStateException.class, () -> second.attach(0, LENGTH, CHUNK));
            assertTrue(refused.getMessage().contains("served by another memory node"), refused.getMessage());
            assertTrue(second.attach(1, LENGTH, CHUNK).fresh(), "another server id is fine");

            serving.detach();
            assertFalse(second.attach(0, LENGTH, CHUNK).fresh(), "once the first let go, the region is reattached");
        }
    }

    @Test
    void aFormatOfAServedServerIdIsRefusedBeforeItTouchesTheRegionFile() {
        try (ShmFabric first = new ShmFabric(directory); ShmFabric second = new ShmFabric(directory)) {
            ExportedRegion serving = first.attach(0, LENGTH, CHUNK);
            serving.region().putLongVolatile(CHUNK, 0xDA7AL);

            IllegalStateException refused = assertThrows(IllegalStateException.class, () -> second.reformat(0, LENGTH, CHUNK));
            assertTrue(refused.getMessage().contains("served by another memory node"), refused.getMessage());
            try (dev.dex.rdma.RemoteMemory client = second.connect(0)) {
                assertEquals(0xDA7AL, client.readLong(dev.dex.rdma.GlobalAddress.of(0, CHUNK)),
                        "a client mapping the file now still finds the served region's data");
            }

            serving.detach();
            ExportedRegion formatted = second.reformat(0, LENGTH, CHUNK);
            assertTrue(formatted.fresh());
            assertEquals(0, formatted.region().getLongVolatile(CHUNK), "once the first let go, the format starts over");
            assertThrows(IllegalStateException.class, () -> first.attach(0, LENGTH, CHUNK), "and holds the lock meanwhile");
        }
    }

    @Test
    void aRegionOfOtherSizesIsRefusedNotReformatted() {
        try (ShmFabric fabric = new ShmFabric(directory)) {
            ExportedRegion region = fabric.attach(0, LENGTH, CHUNK);
            region.region().putLongVolatile(CHUNK, 42);
            region.detach();

            IllegalArgumentException larger = assertThrows(IllegalArgumentException.class, () -> fabric.attach(0, 2 * LENGTH, CHUNK));
            assertTrue(larger.getMessage().contains("format it"), larger.getMessage());
            assertThrows(IllegalArgumentException.class, () -> fabric.attach(0, LENGTH, 2 * CHUNK));

            ExportedRegion kept = fabric.attach(0, LENGTH, CHUNK);
            assertEquals(42, kept.region().getLongVolatile(CHUNK), "the refused starts left the data alone");
            kept.detach();
            ExportedRegion formatted = fabric.export(0, LENGTH, CHUNK);
            assertEquals(0, formatted.region().getLongVolatile(CHUNK), "an explicit export starts fresh");
        }
    }
}
