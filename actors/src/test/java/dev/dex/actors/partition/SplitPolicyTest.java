package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;

import com.typesafe.config.ConfigFactory;

/** Which partition a compute node splits ({@code dex.compute.split}), and the settings it takes. */
class SplitPolicyTest {
    private final SplitPolicy policy = new SplitPolicy(Duration.ofSeconds(1), 4.0, 1_000, 100);

    @Test
    void theBusiestPartitionSplitsWhenItIsFactorTimesTheMeanAndAboveTheMinimum() {
        assertEquals(7, policy.choose(List.of(3, 7, 9, 12), List.of(100.0, 20_000.0, 100.0, 100.0), 64), "20,000 against a mean of 100 for the others");
        assertEquals(-1, policy.choose(List.of(3, 7, 9, 12), List.of(5_000.0, 9_000.0, 5_000.0, 5_000.0), 64), "1.8x the others: balanced enough");
        assertEquals(-1, policy.choose(List.of(3, 7), List.of(10.0, 900.0), 64), "below min-rate");
        assertEquals(5, policy.choose(List.of(5), List.of(2_000.0), 64), "a node with one partition: min-rate alone decides");
        assertEquals(-1, policy.choose(List.of(5), List.of(999.0), 64));
        assertEquals(-1, policy.choose(List.of(), List.of(), 64), "nothing held");
        assertEquals(-1, policy.choose(List.of(1, 2), List.of(), 64), "no window closed yet");
        assertEquals(-1, policy.choose(List.of(3, 7), List.of(100.0, 20_000.0), 100), "the table has max-partitions already");
        assertEquals(7, policy.choose(List.of(3, 7), List.of(100.0, 20_000.0), 99));
    }

    @Test
    void itIsOffByDefaultAndRefusesNegativeSettings() {
        SplitPolicy shipped = SplitPolicy.from(ConfigFactory.load());
        assertFalse(shipped.enabled(), "reference.conf: interval = 0s");
        assertTrue(SplitPolicy.from(ConfigFactory.parseString("dex.compute.split { interval = 2s, rate-factor = 3, min-rate = 50 }")
                .withFallback(ConfigFactory.load())).enabled());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> new SplitPolicy(Duration.ofSeconds(-1), 4, 1, 64));
        IllegalArgumentException tooMany = assertThrows(IllegalArgumentException.class, () -> new SplitPolicy(Duration.ofSeconds(1), 4, 1, 1025));
        assertTrue(tooMany.getMessage().contains("max-partitions must be in [0, 1024]: 1025"), tooMany.getMessage());
        assertTrue(bad.getMessage().contains("dex.compute.split"), bad.getMessage());
        assertFalse(SplitPolicy.OFF.enabled());
    }
}
