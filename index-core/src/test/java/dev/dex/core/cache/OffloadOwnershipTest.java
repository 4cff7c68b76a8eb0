package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.log.RedoLogSettings;

/**
 * Offload ownership through the engine, on the {@code local} fabric (which cannot fence a compute node): once
 * another engine took a partition over, the memory servers refuse every offload the old owner still sends for
 * it (its epoch is superseded) and it falls back to its caching path, while its offloads into a partition it
 * still owns, and the new owner's, run.
 */
class OffloadOwnershipTest {

    /** Looks up every loaded key of {@code partition} and checks its value; returns how many. */
    private static int lookUpAll(DexFixture fixture, DexEngine engine, int partition) {
        int keys = 0;
        try (IndexSession session = engine.newSession()) {
            for (long key = 2; key <= 2L * fixture.loaded; key += 2) {
                if (fixture.table.partitionOf(key) == partition) {
                    assertTrue(session.lookup(key), "key " + key);
                    assertEquals(key + 1, session.value(), "key " + key);
                    keys++;
                }
            }
        }
        return keys;
    }

    @Test
    void aSupersededOwnersOffloadsAreRefusedAndTheNewOwnersRun() {
        try (DexFixture fixture = new DexFixture(2, 2, 20_000, 4, true, 0)) {
            fixture.redoLog = RedoLogSettings.ON;
            DexEngineSettings config = DexEngineSettings.withCache("offload-only", 6L * FrameHeaderDescriptor.FRAME_LENGTH).withLeafAdmission(0.3);
            List<DexEngine> engines = fixture.open(1, config, 1);
            DexEngine old = engines.get(0);
            assertTrue(lookUpAll(fixture, old, 0) > 1000);
            long offloads = old.stats().offloads();
            assertTrue(offloads > 100, "the owner's lookups were offloaded: " + old.stats());

            // Another engine takes partition 0 over while the old owner still runs and believes it holds it.
            DexEngine heir = fixture.openEngine(config, fixture.channel);
            heir.instanceGone(old.instanceId());
            DexEngine.AcquireReport takeover = heir.acquireReport(0);
            assertEquals(2, takeover.epoch(), "the second owner of partition 0");

            long fallbacks = old.stats().offloadFallbacks();
            long sent = fixture.channel.executed();
            lookUpAll(fixture, old, 0);
            assertEquals(offloads, old.stats().offloads(), "no offload of the superseded owner ran: " + old.stats());
            long refused = old.stats().offloadFallbacks() - fallbacks;
            // Each refusal makes that lookup take the caching path, which caches the inner nodes it reads: later
            // lookups then miss only at leaves, which are not offloaded. So a few attempts, all refused.
            assertTrue(refused > 0, "it tried, was refused, and fell back: " + old.stats());
            assertEquals(refused, fixture.channel.executed() - sent, "each attempt reached the memory side and was refused there");

            lookUpAll(fixture, old, 1);
            assertTrue(old.stats().offloads() > offloads, "its offloads into partition 1, which it still owns, run");
            lookUpAll(fixture, heir, 0);
            assertTrue(heir.stats().offloads() > 100, "the new owner's offloads run: " + heir.stats());
        }
    }
}
