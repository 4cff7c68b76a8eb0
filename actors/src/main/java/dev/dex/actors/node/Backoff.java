package dev.dex.actors.node;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Pauses between the attempts of a handshake that must not give up (describe a memory node, connect the
 * fabric, open the tree): {@code min * 2^(attempt - 1)}, at most {@code max}, each stretched or shrunk by up
 * to 20% so that nodes that failed together do not retry together.
 *
 * @param min the pause before the second attempt
 * @param max the longest pause
 */
public record Backoff(Duration min, Duration max) {
    /** The defaults: {@code dex.compute.handshake} of the actors module's reference.conf, their one home. */
    public static final Backoff DEFAULTS = fromConfig(com.typesafe.config.ConfigFactory.defaultReferenceUnresolved()
            .getConfig("dex.compute.handshake"));

    /** The pauses of a {@code dex.compute.handshake} section ({@code min-backoff}, {@code max-backoff}). */
    public static Backoff fromConfig(com.typesafe.config.Config handshake) {
        try {
            return new Backoff(handshake.getDuration("min-backoff"), handshake.getDuration("max-backoff"));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("dex.compute.handshake: " + e.getMessage(), e);
        }
    }

    public Backoff {
        if (min == null || max == null || min.isNegative() || min.isZero() || max.compareTo(min) < 0) {
            throw new IllegalArgumentException("a backoff needs 0 < min <= max: min " + min + ", max " + max);
        }
    }

    /** The pause after failed attempt {@code attempt} (1 is the first). */
    public Duration after(int attempt) {
        long maxNanos = max.toNanos();
        long nanos = min.toNanos();
        for (int i = 1; i < attempt && nanos < maxNanos; i++) {
            nanos = Math.min(maxNanos, nanos * 2);
        }
        double jitter = 0.8 + 0.4 * ThreadLocalRandom.current().nextDouble();
        return Duration.ofNanos(Math.max(1, (long) (nanos * jitter)));
    }
}
