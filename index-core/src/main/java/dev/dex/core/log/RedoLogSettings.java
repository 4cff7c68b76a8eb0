package dev.dex.core.log;

/**
 * Settings of the per-partition redo logs (see {@code docs/durability.md}).
 *
 * @param enabled    whether writes are logged before they are acknowledged; off trades the durability
 *                   of acknowledged writes across a compute node crash for one fabric write per batch
 * @param bytes      length of a partition's log when it is created (rounded up to whole chunks); a
 *                   replay reads at most about half of it, so it bounds the takeover time
 * @param awaitNanos how long a commit waits for the records before its own to reach the log
 */
public record RedoLogSettings(boolean enabled, long bytes, long awaitNanos) {
    /** {@code dex.compute.redo-log-size} of index-core's reference.conf, its one home. */
    public static final long DEFAULT_BYTES = com.typesafe.config.ConfigFactory.defaultReferenceUnresolved().getBytes("dex.compute.redo-log-size");
    /** How long a commit waits for earlier records; not a setting. */
    public static final long DEFAULT_AWAIT_NANOS = 30_000_000_000L;
    public static final RedoLogSettings OFF = new RedoLogSettings(false, DEFAULT_BYTES, DEFAULT_AWAIT_NANOS);
    public static final RedoLogSettings ON = new RedoLogSettings(true, DEFAULT_BYTES, DEFAULT_AWAIT_NANOS);

    public RedoLogSettings {
        if (bytes < 2L * RedoLogDescriptor.RECORD_LENGTH + RedoLogDescriptor.HEADER_LENGTH) {
            throw new IllegalArgumentException("a redo log needs room for two records at least: " + bytes + " bytes");
        }
        if (awaitNanos <= 0) {
            throw new IllegalArgumentException("redo log wait must be positive: " + awaitNanos + " ns");
        }
    }

    /** The redo log of a {@code dex.compute} section ({@code redo-log}, {@code redo-log-size}). */
    public static RedoLogSettings fromConfig(com.typesafe.config.Config compute) {
        long bytes = compute.getBytes("redo-log-size");
        if (bytes < 4096 || bytes > 1L << 30) {
            throw new IllegalArgumentException("dex.compute.redo-log-size must be in [4096, " + (1L << 30) + "]: " + bytes);
        }
        return new RedoLogSettings(compute.getBoolean("redo-log"), bytes, DEFAULT_AWAIT_NANOS);
    }

    public RedoLogSettings withBytes(long length) {
        return new RedoLogSettings(enabled, length, awaitNanos);
    }
}
