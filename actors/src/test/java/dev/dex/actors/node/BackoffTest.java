package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;

import org.junit.jupiter.api.Test;

class BackoffTest {

    @Test
    void pausesDoubleFromMinToMaxWithinTwentyPercent() {
        Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(1));
        long[] expected = {100, 200, 400, 800, 1000, 1000, 1000};
        for (int attempt = 1; attempt <= expected.length; attempt++) {
            for (int i = 0; i < 50; i++) {
                long millis = backoff.after(attempt).toMillis();
                long centre = expected[attempt - 1];
                assertTrue(millis >= centre * 0.8 - 1 && millis <= centre * 1.2 + 1, "attempt " + attempt + ": " + millis + " ms");
            }
        }
        long late = backoff.after(Integer.MAX_VALUE).toMillis();
        assertTrue(late >= 799 && late <= 1201, "a very late attempt waits about max: " + late);
    }

    @Test
    void badBoundsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new Backoff(Duration.ZERO, Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class, () -> new Backoff(Duration.ofSeconds(2), Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class, () -> new Backoff(null, Duration.ofSeconds(1)));
    }
}
