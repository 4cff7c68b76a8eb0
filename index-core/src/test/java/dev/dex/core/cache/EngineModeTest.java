package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.dex.core.offload.OffloadSettings;

/** The one list of engine modes: each label names its mode, and a config takes its mode's offloading policy. */
class EngineModeTest {

    @Test
    void everyLabelNamesItsModeAndAConfigTakesItsPolicy() {
        for (EngineMode mode : EngineMode.values()) {
            assertEquals(mode, EngineMode.of(mode.label()));
            DexEngineSettings config = DexEngineSettings.withCache(mode.label(), 1 << 20);
            assertEquals(mode, config.mode());
            assertEquals(mode.policy(), config.offload().policy());
            assertEquals(mode.policy() != OffloadSettings.Policy.NEVER, mode.offloads());
        }
        assertEquals(0, DexEngineSettings.withCache(EngineMode.PARTITIONED, 1 << 20).cacheBytes(), "partitioned caches nothing");
        assertEquals(0.0, DexEngineSettings.withCache(EngineMode.SHERMAN, 1 << 20).leafAdmission(), "sherman admits no leaf");
    }

    @Test
    void anUnknownModeFailsNamingTheKnownOnes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> DexEngineSettings.withCache("fast", 1 << 20));
        assertEquals("engine mode must be one of dex, offload-only, no-offload, sherman, partitioned: fast", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new DexEngineSettings((EngineMode) null, 0, 0.1, 0.1, null));
        IllegalArgumentException policy = assertThrows(IllegalArgumentException.class,
                () -> DexEngineSettings.withCache(EngineMode.DEX, 1 << 20).withOffload(OffloadSettings.of(OffloadSettings.Policy.NEVER)));
        assertTrue(policy.getMessage().contains("mode dex offloads by policy"), policy.getMessage());
    }
}
