package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * A tcp memory node with a region directory keeps its region in a memory-mapped file: after a restart at the
 * same endpoint it serves the same region (same incarnation, same data), so a compute node that stayed up
 * reconnects and goes on; a second memory node of that server id in the directory is refused.
 */
class TcpRegionFileTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final long LENGTH = 16L * CHUNK;

    @TempDir
    Path directory;

    @Test
    void aRestartedMemoryNodeServesItsRegionFileAndAConnectedClientGoesOn() {
        TcpSettings fixed = TcpSettings.DEFAULTS.withPort(TcpTestPorts.unused());
        UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
        try (TcpFabric client = new TcpFabric()) {
            TcpFabric first = new TcpFabric(fixed, 0, directory);
            ExportedRegion region = first.attach(0, LENGTH, CHUNK);
            assertTrue(region.fresh());
            RemoteMemory memory = client.connect(Map.of(0, region.endpoint()), 0x11L);
            word.putLong(0, 4242);
            memory.write(GlobalAddress.of(0, CHUNK), word, 0, 8);
            region.detach();
            first.close();
            assertTrue(Files.isRegularFile(directory.resolve("region-0.dex")), "the region file outlives the memory node");

            try (TcpFabric restarted = new TcpFabric(fixed, 0, directory)) {
                ExportedRegion again = restarted.attach(0, LENGTH, CHUNK);
                assertFalse(again.fresh(), "the restarted memory node reattached");
                try (TcpFabric other = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
                    assertThrows(IllegalStateException.class, () -> other.attach(0, LENGTH, CHUNK),
                            "a second memory node of that server id on the directory is refused");
                }
                word.putLong(0, 0);
                long value = -1;
                for (int attempt = 0; attempt < 3 && value != 4242; attempt++) {
                    try {
                        memory.read(GlobalAddress.of(0, CHUNK), word, 0, 8); // the first may find the old connection closed
                        value = word.getLong(0);
                    } catch (dev.dex.rdma.FabricException lostConnection) {
                        assertFalse(lostConnection.getMessage().contains("another region"), lostConnection.getMessage());
                    }
                }
                assertEquals(4242, value, "the client that stayed up reconnected to the same region and reads its data");
                again.detach();
            }
            memory.close();
        }
    }

    /**
     * A memory node restarted on its region file with port 0 answers at another port: told the new endpoint, a client
     * that stayed up reaches the same region there; a region formatted since (another incarnation) is refused.
     */
    @Test
    void aClientToldTheNewEndpointOfARestartedMemoryNodeReachesTheSameRegionThere() {
        UnsafeBuffer word = new UnsafeBuffer(new byte[8]);
        try (TcpFabric client = new TcpFabric()) {
            TcpFabric first = new TcpFabric(TcpSettings.DEFAULTS, 0, directory);
            ExportedRegion region = first.attach(0, LENGTH, CHUNK);
            RemoteMemory memory = client.connect(Map.of(0, region.endpoint()), 0x12L);
            assertThrows(IllegalArgumentException.class, () -> memory.relocate(1, region.endpoint()), "server 1 is not connected");
            assertThrows(IllegalArgumentException.class, () -> memory.relocate(0, "no-port"), "a malformed endpoint");
            assertFalse(memory.relocate(0, region.endpoint()), "the endpoint in use is no move");
            word.putLong(0, 5151);
            memory.write(GlobalAddress.of(0, CHUNK), word, 0, 8);
            region.detach();
            first.close();
            assertThrows(dev.dex.rdma.FabricException.class, () -> memory.read(GlobalAddress.of(0, CHUNK), word, 0, 8),
                    "nothing answers at the old endpoint");

            try (TcpFabric restarted = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
                ExportedRegion again = restarted.attach(0, LENGTH, CHUNK);
                assertFalse(again.endpoint().equals(region.endpoint()), "a port of its own: " + again.endpoint());
                assertTrue(memory.relocate(0, again.endpoint()));
                word.putLong(0, 0);
                memory.read(GlobalAddress.of(0, CHUNK), word, 0, 8);
                assertEquals(5151, word.getLong(0), "the same region, found at the new endpoint");
                again.detach();
            }
            try (TcpFabric formatting = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
                ExportedRegion formatted = formatting.reformat(0, LENGTH, CHUNK);
                assertTrue(memory.relocate(0, formatted.endpoint()));
                dev.dex.rdma.FabricException other = assertThrows(dev.dex.rdma.FabricException.class,
                        () -> memory.read(GlobalAddress.of(0, CHUNK), word, 0, 8));
                assertTrue(other.getMessage().contains("another region"), other.getMessage());
                formatted.detach();
            }
            memory.close();
        }
    }

    /**
     * A client the memory server fenced stays fenced after the memory node restarts on its region file (a compute node
     * the cluster downed but that still runs must not write to the restarted node); a format starts a new list.
     */
    @Test
    void aFencedClientStaysFencedAcrossARestartUntilAFormat() {
        try (TcpFabric client = new TcpFabric()) {
            TcpFabric first = new TcpFabric(TcpSettings.DEFAULTS, 0, directory);
            ExportedRegion region = first.attach(0, LENGTH, CHUNK);
            assertTrue(first.fence(0, 0x21L));
            region.detach();
            first.close();
            assertTrue(Files.isRegularFile(directory.resolve("fenced-0.txt")), "the fence is kept beside the region");

            try (TcpFabric restarted = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
                ExportedRegion again = restarted.attach(0, LENGTH, CHUNK);
                assertThrows(dev.dex.rdma.FencedException.class, () -> client.connect(Map.of(0, again.endpoint()), 0x21L),
                        "the fenced client is refused by the restarted memory node");
                client.connect(Map.of(0, again.endpoint()), 0x22L).close();
                again.detach();
            }
            try (TcpFabric formatting = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
                ExportedRegion formatted = formatting.reformat(0, LENGTH, CHUNK);
                client.connect(Map.of(0, formatted.endpoint()), 0x21L).close();
                formatted.detach();
            }
        }
    }

    @Test
    void aFormatReplacesTheRegionFileUnderItsLockSoTheNextStartKeepsTheFormat() {
        try (TcpFabric first = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
            ExportedRegion region = first.attach(0, LENGTH, CHUNK);
            region.region().putLongVolatile(CHUNK, 4242);
            try (TcpFabric other = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
                assertThrows(IllegalStateException.class, () -> other.reformat(0, LENGTH, CHUNK),
                        "a format of a server id another memory node serves from the directory is refused");
            }
            assertEquals(4242, region.region().getLongVolatile(CHUNK));
            region.detach();
        }
        try (TcpFabric formatting = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
            ExportedRegion formatted = formatting.reformat(0, LENGTH, CHUNK);
            assertTrue(formatted.fresh());
            assertEquals(0, formatted.region().getLongVolatile(CHUNK), "the format discards the data");
            formatted.region().putLongVolatile(CHUNK, 77);
            formatted.detach();
        }
        try (TcpFabric restarted = new TcpFabric(TcpSettings.DEFAULTS, 0, directory)) {
            ExportedRegion again = restarted.attach(0, LENGTH, CHUNK);
            assertFalse(again.fresh());
            assertEquals(77, again.region().getLongVolatile(CHUNK), "the next start finds the formatted region, not the old one");
            again.detach();
        }
    }
}
