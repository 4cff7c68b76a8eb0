package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.function.Supplier;

import org.junit.jupiter.api.Test;

class DisniSettingsTest {
    private static final DisniSettings D = DisniSettings.DEFAULTS;

    @Test
    void defaultsAreLoopbackAFreePortAndModestSizes() {
        assertEquals("127.0.0.1", D.host());
        assertEquals(0, D.port());
        assertEquals(Duration.ofSeconds(10), D.verbTimeout());
        assertEquals(Duration.ofSeconds(5), D.connectTimeout());
        assertEquals(256 * 1024, D.maxTransfer());
        assertEquals(64, D.queueDepth());
    }

    @Test
    void withersChangeOneValueEach() {
        DisniSettings changed = D.withHost("10.0.0.5").withPort(7471).withVerbTimeout(Duration.ofMillis(250))
                .withConnectTimeout(Duration.ofSeconds(1)).withMaxTransfer(8192).withQueueDepth(16);

        assertEquals(new DisniSettings("10.0.0.5", 7471, Duration.ofMillis(250), Duration.ofSeconds(1), 8192, 16), changed);
    }

    @Test
    void eachBadValueIsRejectedNamingItsKey() {
        Map<String, Supplier<DisniSettings>> bad = Map.ofEntries(
                Map.entry("dex.fabric.disni.host", () -> D.withHost(" ")),
                Map.entry("dex.fabric.disni.host must name the address of an RDMA interface, not a wildcard", () -> D.withHost("0.0.0.0")),
                Map.entry("dex.fabric.disni.host must name the address of an RDMA interface, not a wildcard address, because", () -> D.withHost("[::]")),
                Map.entry("dex.fabric.disni.port must be in [0, 65535]: -1", () -> D.withPort(-1)),
                Map.entry("dex.fabric.disni.port must be in [0, 65535]: 65536", () -> D.withPort(65536)),
                Map.entry("dex.fabric.disni.verb-timeout must be > 0: PT0S", () -> D.withVerbTimeout(Duration.ZERO)),
                Map.entry("dex.fabric.disni.verb-timeout must be > 0: PT-1S", () -> D.withVerbTimeout(Duration.ofSeconds(-1))),
                Map.entry("dex.fabric.disni.verb-timeout must be below", () -> D.withVerbTimeout(Duration.ofDays(30))),
                Map.entry("dex.fabric.disni.connect-timeout must be > 0: null", () -> D.withConnectTimeout(null)),
                Map.entry("dex.fabric.disni.max-transfer must be a power of two in [4096, 67108864]: 2048", () -> D.withMaxTransfer(2048)),
                Map.entry("dex.fabric.disni.max-transfer must be a power of two in [4096, 67108864]: 12288", () -> D.withMaxTransfer(12288)),
                Map.entry("dex.fabric.disni.max-transfer must be a power of two in [4096, 67108864]: 134217728", () -> D.withMaxTransfer(128 << 20)),
                Map.entry("dex.fabric.disni.queue-depth must be in [1, 4096]: 0", () -> D.withQueueDepth(0)));

        bad.forEach((message, settings) -> {
            IllegalArgumentException failure = assertThrows(IllegalArgumentException.class, settings::get, message);
            assertTrue(failure.getMessage().startsWith(message), "'" + failure.getMessage() + "' should start with '" + message + "'");
        });
        assertEquals("dex.fabric.disni.host", assertThrows(NullPointerException.class, () -> D.withHost(null)).getMessage());
    }
}
