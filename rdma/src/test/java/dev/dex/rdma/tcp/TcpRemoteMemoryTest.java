package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.RemoteMemoryContractTest;

/** The fabric contract over TCP on loopback, plus what only a networked transport has: endpoints. */
class TcpRemoteMemoryTest extends RemoteMemoryContractTest {

    @Override
    protected Fabric newFabric(long latencyNs) {
        return new TcpFabric(TcpSettings.DEFAULTS, latencyNs);
    }

    @Test
    void transportIsNamedTcp() {
        assertEquals("tcp", fabric().transport());
    }

    @Test
    void anotherFabricObjectReachesARegionThroughItsEndpoint() {
        ExportedRegion exported = export(fabric(), 3);
        Fabric elsewhere = fabric();
        assertTrue(exported.endpoint().startsWith("127.0.0.1:"), exported.endpoint());

        RemoteMemory memory = closeAfterTest(elsewhere.connect(Map.of(3, exported.endpoint())));
        writeLong(memory, GlobalAddress.of(3, CHUNK_LENGTH), 4242);

        assertEquals(4242, exported.region().getLongVolatile(CHUNK_LENGTH));
        assertEquals(GlobalAddress.of(3, CHUNK_LENGTH), memory.chunkAllocator().allocateChunk(3));
    }

    @Test
    void transfersLongerThanOneFrameAreSplitAndArriveWhole() {
        Fabric fabric = closeAfterTest(new TcpFabric(TcpSettings.DEFAULTS, 0));
        int length = TcpSettings.DEFAULTS.maxTransfer() * 2 + 100;
        ExportedRegion exported = closeAfterTest(fabric.export(0, 64L * CHUNK_LENGTH * 16, CHUNK_LENGTH));
        RemoteMemory memory = connect(fabric, 0);
        byte[] bytes = pattern(length, 21);

        memory.write(GlobalAddress.of(0, CHUNK_LENGTH + 3), new UnsafeBuffer(bytes), 0, length);

        byte[] back = readBytes(memory, 0, CHUNK_LENGTH + 3, length);
        assertEquals(java.util.Arrays.hashCode(bytes), java.util.Arrays.hashCode(back));
        assertEquals(bytes[length - 1], exported.region().segment(0).getByte(CHUNK_LENGTH + 3 + length - 1));
        assertEquals(1, memory.counters().snapshot().reads(), "a split read is still one verb");
    }

    @Test
    void malformedOrUnreachableEndpointsAreRejectedWithTheirServer() {
        Fabric fabric = fabric();
        IllegalArgumentException noPort = assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(Map.of(4, "localhost"))));
        assertTrue(noPort.getMessage().contains("memory server 4"), noPort.getMessage());
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(Map.of(4, "localhost:http"))));
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(Map.of(4, ""))));
        assertThrows(IllegalArgumentException.class, () -> closeAfterTest(fabric.connect(Map.of(4, "127.0.0.1:70000"))));

        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> closeAfterTest(fabric.connect(Map.of(4, "127.0.0.1:" + TcpTestPorts.unused()))));
        assertTrue(refused.getMessage().contains("memory server 4"), refused.getMessage());
    }

    @Test
    void anEndpointOfAnotherServerIsRefusedAtConnect() {
        ExportedRegion server1 = export(fabric(), 1);

        IllegalArgumentException wrong = assertThrows(IllegalArgumentException.class,
                () -> closeAfterTest(fabric().connect(Map.of(2, server1.endpoint()))));

        assertTrue(wrong.getMessage().contains("serves memory server 1, not 2"), wrong.getMessage());
    }

    @Test
    void badSettingsNameTheirKey() {
        IllegalArgumentException window = assertThrows(IllegalArgumentException.class, () -> new TcpSettings("127.0.0.1", 0, 2, 0,
                TcpSettings.DEFAULTS.verbTimeout(), TcpSettings.DEFAULTS.connectTimeout(), 1, 0, 1 << 16));
        assertTrue(window.getMessage().contains("dex.fabric.tcp.window"), window.getMessage());
        IllegalArgumentException port = assertThrows(IllegalArgumentException.class, () -> TcpSettings.DEFAULTS.withPort(65536));
        assertTrue(port.getMessage().contains("dex.fabric.tcp.port"), port.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TcpSettings.DEFAULTS.withHost(" "));
        assertThrows(IllegalArgumentException.class, () -> TcpSettings.DEFAULTS.withVerbTimeout(java.time.Duration.ZERO));
    }

    static void writeWord(RemoteMemory memory, long address, long value) {
        writeLong(memory, address, value);
    }

    static long readWord(RemoteMemory memory, long address) {
        return readLong(memory, address);
    }
}
