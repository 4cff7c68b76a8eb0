package dev.dex.core.offload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

class CostModelTest {
    private static final OffloadSettings NO_EXPLORATION =
            new OffloadSettings(OffloadSettings.Policy.COST_MODEL, 50, 0.01, 0.0, 40, 1.2);

    @Test
    void bootstrapsWithFiftyCachedThenFiftyOffloadedDecisions() {
        CostModel model = new CostModel(NO_EXPLORATION);
        SplittableRandom random = new SplittableRandom(1);
        for (int i = 0; i < 50; i++) {
            assertTrue(model.sample(random), "every latency is sampled while bootstrapping");
            assertFalse(model.shouldOffload(2, random), "decision " + i + " takes the caching path");
        }
        for (int i = 0; i < 50; i++) {
            assertTrue(model.shouldOffload(2, random), "decision " + (50 + i) + " offloads");
        }
    }

    @Test
    void offloadsExactlyWhenItBeatsLPlusOneReadsWithSearchAndCacheCost() {
        CostModel model = bootstrapped(2_000, 5_000);
        SplittableRandom random = new SplittableRandom(2);
        // (L + 1) * (2000 + 40) * 1.2: L=1 -> 4896 < 5000 (cache); L=2 -> 7344 > 5000 (offload)
        assertFalse(model.shouldOffload(1, random));
        assertTrue(model.shouldOffload(2, random));
        assertTrue(model.shouldOffload(3, random));
        assertEquals(2_000, model.readNanos(), 1e-9);
        assertEquals(5_000, model.offloadNanos(), 1e-9);
    }

    @Test
    void theMovingAverageForgetsOldSamples() {
        CostModel model = bootstrapped(2_000, 5_000);
        for (int i = 0; i < 50; i++) {
            model.recordOffload(20_000);
        }
        assertEquals(20_000, model.offloadNanos(), 1e-9, "a full window of new samples replaces the old ones");
        assertFalse(model.shouldOffload(3, new SplittableRandom(3)), "a slow memory server is avoided: 4*2040*1.2 < 20000");
    }

    @Test
    void aFailedOffloadCostsWhatItTookPlusTheCachingPath() {
        CostModel model = bootstrapped(2_000, 5_000);
        model.recordFailedOffload(1_000, 2);
        // One sample of 1000 + (2 + 1) * (2000 + 40) = 7120 among 49 of 5000.
        assertEquals((49 * 5_000 + 7_120) / 50.0, model.offloadNanos(), 1e-9);
        assertTrue(model.shouldOffload(2, new SplittableRandom(4)), "one cheap failure changes little");
        model.recordFailedOffload(2_000_000_000L, 2);
        assertFalse(model.shouldOffload(3, new SplittableRandom(4)), "one timeout (2 s) turns offloading off at once");
        assertFalse(model.shouldOffload(5, new SplittableRandom(4)));
    }

    @Test
    void exploresTheOtherChoiceAtTheConfiguredRate() {
        OffloadSettings exploring = new OffloadSettings(OffloadSettings.Policy.COST_MODEL, 50, 0.01, 0.01, 40, 1.2);
        CostModel model = new CostModel(exploring);
        SplittableRandom random = new SplittableRandom(4);
        for (int i = 0; i < 100; i++) {
            model.shouldOffload(1, random);
        }
        for (int i = 0; i < 50; i++) {
            model.recordRead(2_000);
            model.recordOffload(50_000);
        }
        int offloaded = 0;
        int decisions = 200_000;
        for (int i = 0; i < decisions; i++) {
            if (model.shouldOffload(1, random)) {
                offloaded++;
            }
        }
        assertEquals(0.01, offloaded / (double) decisions, 0.002, "1% of decisions explore the slower choice");
    }

    /** A model with a budget of 1% whose every decision the explore rate draws, past bootstrapping, on {@code clock}. */
    private static CostModel budgeted(long[] clock, long readNanos, long offloadNanos) {
        OffloadSettings settings = new OffloadSettings(OffloadSettings.Policy.COST_MODEL, 50, 0.01, 1.0, 40, 1.2, 0.01);
        return bootstrapped(new CostModel(settings, () -> clock[0]), readNanos, offloadNanos);
    }

    /**
     * With a budget, a flip that is not timed is charged the gap between the two averages: the next waits that gap
     * over the budget, however often the explore rate draws; and a flipped decision is always timed.
     */
    @Test
    void flipsStayWithinTheirBudgetAndAreAlwaysTimed() {
        long[] clock = {0};
        CostModel model = budgeted(clock, 2_000, 100_000);
        SplittableRandom random = new SplittableRandom(7);
        // At level 1 the caching path costs 2 x (2,000 + 40) x 1.2 = 4,896 ns: a flip (an offload) costs 95,104 ns more,
        // so with a budget of 1% one flip may come every 9.5104 ms.
        assertTrue(model.shouldOffload(1, random), "the first draw flips");
        assertTrue(model.sample(random), "a flipped decision is timed");
        int flips = 1;
        for (int i = 0; i < 100_000; i++) { // 100 ms, one decision a microsecond
            clock[0] += 1_000;
            flips += model.shouldOffload(1, random) ? 1 : 0;
        }
        assertEquals(11, flips, "one flip, then one per 9.5104 ms over 100 ms");
        int timed = 0;
        for (int i = 0; i < 5_000; i++) {
            model.shouldOffload(1, random); // within 9.5 ms of the last flip: not flipped
            timed += model.sample(random) ? 1 : 0;
        }
        assertTrue(timed < 150, "decisions that were not flipped are timed at the sample rate: " + timed);
    }

    /**
     * One offload that timed out (2 s) turns offloading off; once the memory side is fast again, the first flip finds
     * it so and costs nothing, the next flips follow at once, and offloading is back within the window's 50 flips, not
     * after the 400 s the gap of the averages over the budget would make it wait.
     */
    @Test
    void offloadingComesBackAsSoonAsTheFlipsFindTheMemorySideFastAgain() {
        long[] clock = {0};
        CostModel model = budgeted(clock, 30_000, 30_000); // the caching path costs 72 µs at level 1: offloading wins
        SplittableRandom random = new SplittableRandom(8);
        model.recordFailedOffload(2_000_000_000L, 1);
        int decisions = 0;
        boolean offloading = false;
        while (!offloading) {
            assertTrue(decisions < 200, "offloading back within 200 decisions");
            clock[0] += 10_000;
            decisions++;
            boolean offload = model.shouldOffload(1, random);
            if (offload) {
                model.recordOffload(30_000); // a flip to offloading (timed): fast again
            }
            offloading = !Double.isNaN(model.offloadNanos()) && model.offloadNanos() < 72_000 && offload;
        }
        assertTrue(clock[0] < 10_000_000, "back within 10 ms of simulated time: " + clock[0] / 1_000 + " µs");
    }

    /** While every flip to offloading times out, the flips come at most every 30 s, not at the explore rate. */
    @Test
    void whileFlipsKeepTimingOutTheyWaitTheLongestWaitBetweenThem() {
        long[] clock = {0};
        CostModel model = budgeted(clock, 30_000, 30_000);
        SplittableRandom random = new SplittableRandom(9);
        model.recordFailedOffload(2_000_000_000L, 1);
        int flips = 0;
        for (int i = 0; i < 300_000; i++) { // 300 s, one decision a millisecond
            clock[0] += 1_000_000;
            if (model.shouldOffload(1, random)) {
                flips++;
                clock[0] += 2_000_000_000L;
                model.recordFailedOffload(2_000_000_000L, 1);
            }
        }
        long seconds = clock[0] / 1_000_000_000L;
        assertTrue(flips >= 2 && flips <= seconds / 30 + 1, flips + " flips in " + seconds + " s: one per 30 s at most");
    }

    @Test
    void samplesAboutOnePercentAfterBootstrapping() {
        CostModel model = bootstrapped(1, 1);
        SplittableRandom random = new SplittableRandom(5);
        int sampled = 0;
        for (int i = 0; i < 200_000; i++) {
            if (model.sample(random)) {
                sampled++;
            }
        }
        assertEquals(0.01, sampled / 200_000.0, 0.002);
    }

    @Test
    void rejectsBadSettings() {
        assertThrows(IllegalArgumentException.class, () -> new OffloadSettings(OffloadSettings.Policy.ALWAYS, 0, 0.01, 0.01, 40, 1.2));
        assertThrows(IllegalArgumentException.class, () -> new OffloadSettings(OffloadSettings.Policy.ALWAYS, 50, 0.01, 0.01, 40, 1.2, -0.1));
        assertThrows(IllegalArgumentException.class, () -> new OffloadSettings(OffloadSettings.Policy.ALWAYS, 50, 0.01, 0.01, 40, 1.2, 1.5));
        assertThrows(IllegalArgumentException.class, () -> new OffloadSettings(OffloadSettings.Policy.ALWAYS, 50, 1.5, 0.01, 40, 1.2));
        assertThrows(IllegalArgumentException.class, () -> new OffloadSettings(OffloadSettings.Policy.ALWAYS, 50, 0.01, 0.01, 40, 0));
    }

    private static CostModel bootstrapped(long readNanos, long offloadNanos) {
        return bootstrapped(new CostModel(NO_EXPLORATION), readNanos, offloadNanos);
    }

    /** {@code model} past its bootstrapping (its decisions then take no random draw), with full windows of these samples. */
    private static CostModel bootstrapped(CostModel model, long readNanos, long offloadNanos) {
        SplittableRandom random = new SplittableRandom(9);
        for (int i = 0; i < 100; i++) {
            model.shouldOffload(1, random);
        }
        for (int i = 0; i < 50; i++) {
            model.recordRead(readNanos);
            model.recordOffload(offloadNanos);
        }
        return model;
    }
}
