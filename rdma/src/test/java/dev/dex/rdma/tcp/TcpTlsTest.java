package dev.dex.rdma.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RegionHeaderDescriptor;
import dev.dex.rdma.RemoteMemory;

/**
 * The tcp fabric with mutual TLS: a node with a certificate of the cluster's CA reads and writes a TLS memory
 * server's region; a stranger (a certificate of another CA, whichever CA it trusts), a plain client, and a TLS
 * client of a plain server all fail with a clear {@link FabricException}, and the server keeps serving its own
 * clients. The key stores are fixtures made by {@code src/test/resources/tls/make-fixtures.sh}.
 */
class TcpTlsTest {
    private static final int CHUNK = RegionHeaderDescriptor.MIN_CHUNK_LENGTH;
    private static final char[] PASSWORD = "dex-test-fixture".toCharArray();
    private final List<AutoCloseable> opened = new ArrayList<>();

    static Path fixture(String name) {
        try {
            return Path.of(TcpTlsTest.class.getResource("/tls/" + name).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static TcpTls tls(String node, String trusted) {
        return TcpTls.fromStores(fixture(node + ".p12"), fixture("trust-" + trusted + ".p12"), PASSWORD);
    }

    private TcpFabric fabric(TcpTls tls) {
        TcpFabric fabric = new TcpFabric(TcpSettings.DEFAULTS.withVerbTimeout(java.time.Duration.ofSeconds(5)), 0, null, tls);
        opened.add(fabric);
        return fabric;
    }

    @AfterEach
    void close() throws Exception {
        for (int i = opened.size() - 1; i >= 0; i--) {
            opened.get(i).close();
        }
    }

    private static long roundTrip(TcpFabric client, String endpoint, long value) {
        try (RemoteMemory memory = client.connect(Map.of(0, endpoint))) {
            long address = GlobalAddress.of(0, CHUNK);
            memory.compareAndSwap(address, memory.fetchAndAdd(address, 0), value);
            return memory.fetchAndAdd(address, 0);
        }
    }

    @Test
    void onlyTheClustersOwnNodesReachATlsMemoryServer() {
        TcpFabric server = fabric(tls("a", "cluster"));
        ExportedRegion region = server.export(0, 16L * CHUNK, CHUNK);
        opened.add(region);
        String endpoint = region.endpoint();
        TcpFabric member = fabric(tls("b", "cluster"));
        assertEquals(7, roundTrip(member, endpoint, 7), "a node of the cluster's CA reads and writes");
        assertEquals(7, region.region().getLongVolatile(CHUNK));

        for (TcpFabric outsider : List.of(fabric(tls("stranger", "other")), fabric(tls("stranger", "cluster")), fabric(null))) {
            long start = System.nanoTime();
            // connect() fails naming the server (IllegalArgumentException, as for any server it cannot greet).
            IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> roundTrip(outsider, endpoint, 666));
            double seconds = (System.nanoTime() - start) / 1e9;
            assertTrue(refused.getMessage().contains("memory server 0 at " + endpoint), refused.getMessage());
            assertTrue(refused.getCause() instanceof FabricException, refused.toString());
            assertTrue(seconds < 4, "refused in " + seconds + " s, before the verb timeout: " + refused);
            assertEquals(7, region.region().getLongVolatile(CHUNK), "the outsider changed nothing");
        }
        assertEquals(8, roundTrip(member, endpoint, 8), "the server still serves its own");

        TcpFabric plainServer = fabric(null);
        ExportedRegion plainRegion = plainServer.export(0, 16L * CHUNK, CHUNK);
        opened.add(plainRegion);
        IllegalArgumentException plain = assertThrows(IllegalArgumentException.class, () -> roundTrip(member, plainRegion.endpoint(), 9),
                "a TLS client of a plain server");
        assertTrue(plain.getMessage().contains("memory server 0 at " + plainRegion.endpoint()), plain.getMessage());
    }
}
