package dev.dex.rdma.shm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.RemoteMemoryContractTest;

class ShmRemoteMemoryTest extends RemoteMemoryContractTest {

    @TempDir(factory = ShmTempDirFactory.class)
    Path directory;

    @Override
    protected Fabric newFabric(long latencyNs) {
        return new ShmFabric(directory, latencyNs);
    }

    private ShmFabric shmFabric() {
        return (ShmFabric) fabric();
    }

    @Test
    void transportIsNamedShm() {
        assertEquals("shm", fabric().transport());
    }

    @Test
    void exportCreatesOneSparseRegionFileNamedForTheServer() throws IOException {
        ShmFabric fabric = shmFabric();

        export(fabric, 5);

        Path file = directory.resolve("region-5.dex");
        assertEquals(file, fabric.regionFile(5));
        assertEquals(List.of(file), filesIn(directory), "no temporary file is left behind");
        assertEquals(REGION_LENGTH, Files.size(file));
    }

    @Test
    void exportCreatesTheDirectory() throws IOException {
        Path nested = directory.resolve("pool").resolve("a");
        try (ShmFabric fabric = new ShmFabric(nested)) {
            fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);

            assertTrue(Files.isRegularFile(nested.resolve("region-0.dex")));
        }
    }

    @Test
    void closingAnExportDeletesItsFileAndOnlyItsFile() throws IOException {
        ShmFabric fabric = shmFabric();
        export(fabric, 1);
        ExportedRegion closed = fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);

        closed.close();
        closed.close();

        assertEquals(List.of(directory.resolve("region-1.dex")), filesIn(directory));
    }

    @Test
    void closingTheFabricDeletesEveryFileItExported() throws IOException {
        ShmFabric fabric = shmFabric();
        fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);
        fabric.export(1, REGION_LENGTH, CHUNK_LENGTH);

        fabric.close();

        assertEquals(List.of(), filesIn(directory));
    }

    @Test
    void exportReplacesAStaleFileWithAZeroedRegion() throws IOException {
        Path stale = directory.resolve("region-0.dex");
        byte[] garbage = new byte[3 * CHUNK_LENGTH + 5];
        Arrays.fill(garbage, (byte) 0x55);
        Files.write(stale, garbage);
        ShmFabric fabric = shmFabric();

        export(fabric, 0);
        RemoteMemory memory = connect(fabric, 0);

        assertEquals(REGION_LENGTH, Files.size(stale));
        assertEquals(RegionHeaderDescriptor.MAGIC, readLong(memory, GlobalAddress.of(0, RegionHeaderDescriptor.MAGIC_OFFSET)));
        assertArrayEquals(new byte[(int) REGION_LENGTH - CHUNK_LENGTH], readBytes(memory, 0, CHUNK_LENGTH, (int) REGION_LENGTH - CHUNK_LENGTH));
    }

    @Test
    void aClientMapsARegionExportedByAnotherFabricObject() throws IOException {
        ShmFabric exporter = shmFabric();
        ExportedRegion exported = export(exporter, 0);
        ShmFabric computeSide = closeAfterTest(new ShmFabric(directory));

        RemoteMemory memory = connect(computeSide, 0);
        writeLong(memory, GlobalAddress.of(0, CHUNK_LENGTH), 1234);
        computeSide.close();

        assertEquals(1234, exported.region().getLongVolatile(CHUNK_LENGTH), "the exporter sees the client's write");
        assertEquals(List.of(directory.resolve("region-0.dex")), filesIn(directory),
                "a fabric that only connected deletes nothing when it closes");
    }

    @Test
    void aConnectedClientKeepsItsMemoryAfterTheExportCloses() {
        ShmFabric fabric = shmFabric();
        ExportedRegion exported = fabric.export(0, REGION_LENGTH, CHUNK_LENGTH);
        RemoteMemory memory = connect(fabric, 0);
        long word = GlobalAddress.of(0, CHUNK_LENGTH);
        writeLong(memory, word, 9);

        exported.close();

        assertEquals(9, memory.compareAndSwap(word, 9, 10));
        assertEquals(10, readLong(memory, word));
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(0)));
    }

    @Test
    void closingAStaleExportLeavesTheFileOfANewerExportAlone() {
        ShmFabric older = shmFabric();
        ExportedRegion stale = older.export(0, REGION_LENGTH, CHUNK_LENGTH);
        ShmFabric newer = closeAfterTest(new ShmFabric(directory));
        export(newer, 0);
        writeLong(connect(newer, 0), GlobalAddress.of(0, CHUNK_LENGTH), 55);

        stale.close();

        assertEquals(55, readLong(connect(newer, 0), GlobalAddress.of(0, CHUNK_LENGTH)));
    }

    @Test
    void connectToAMissingRegionNamesTheFile() {
        ShmFabric fabric = shmFabric();
        export(fabric, 0);

        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(0, 4)));

        assertTrue(e.getMessage().contains(directory.resolve("region-4.dex").toString()), e.getMessage());
    }

    @Test
    void connectToAFileWithoutARegionHeaderFails() throws IOException {
        Files.write(directory.resolve("region-2.dex"), new byte[2 * CHUNK_LENGTH]);
        Files.write(directory.resolve("region-3.dex"), new byte[0]);
        ShmFabric fabric = shmFabric();

        IllegalArgumentException unformatted = assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(2)));
        IllegalArgumentException empty = assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(3)));

        assertTrue(unformatted.getMessage().contains("no formatted DEX region"), unformatted.getMessage());
        assertTrue(empty.getMessage().contains("no formatted DEX region"), empty.getMessage());
    }

    @Test
    void exportRefusesARegionLargerThanTheFreeSpaceAndLeavesNoFile() throws IOException {
        ShmFabric fabric = shmFabric();
        long huge = 1L << 47;
        assertTrue(huge > Files.getFileStore(directory).getUsableSpace(), "the test assumes less than 128 TiB free");

        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> closeAfterTest(fabric.export(0, huge, CHUNK_LENGTH)));

        assertTrue(e.getMessage().contains("does not fit"), e.getMessage());
        assertEquals(List.of(), filesIn(directory));
    }

    @Test
    void regionFilesAreSharedByTheirOwnerOnly() throws IOException {
        ShmFabric fabric = shmFabric();
        export(fabric, 0);

        assertEquals(PosixFilePermissions.fromString("rw-------"), Files.getPosixFilePermissions(fabric.regionFile(0)));
    }

    private static List<Path> filesIn(Path directory) throws IOException {
        try (Stream<Path> files = Files.list(directory)) {
            return files.sorted().toList();
        }
    }
}
