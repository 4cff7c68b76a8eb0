package dev.dex.rdma.tcp;

import java.time.Duration;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;

/**
 * How a replica group's members replicate ({@code dex.fabric.tcp.replication}, docs/replication.md).
 *
 * @param lease     how long a backup's acknowledgement lets its primary answer reads: the primary answers nothing
 *                  once every full backup's last acknowledgement of a frame it sent more than 0.9 of this ago; a
 *                  backup becomes primary only this long after it last acknowledged the old primary's stream. So
 *                  a primary that was replaced without knowing it (paused, cut off) stops answering before its
 *                  successor starts. The primary sends a heartbeat every quarter of it when the stream is idle.
 * @param copyRate  bytes per second a primary copies to a backup that joins (at least 1 MiB/s)
 * @param copyChunk bytes of one copy frame (4 KiB .. the fabric's max-transfer)
 * @param suspectAfter a complete backup says it lost its primary ({@link ReplicaStatus#primaryLost}) when the stream's
 *                  connection closed, or when no frame came for this long (heartbeats come every quarter lease);
 *                  its memory node then asks the group's coordinator to fail over. Raised to half the lease when lower
 *                  (two heartbeats missed at least)
 * @param failoverWait a client's read, or {@link dev.dex.rdma.OwnedWrites owned} write, that fails because its memory
 *                  server's connection broke waits up to this long for the server to be relocated to its group's new
 *                  primary, and then runs again there once (0: fails at once, as a fabric without replica groups does)
 */
public record ReplicaSettings(Duration lease, long copyRate, int copyChunk, Duration suspectAfter, Duration failoverWait) {

    /** {@code dex.fabric.tcp.replication} of this module's reference.conf. */
    public static final ReplicaSettings DEFAULTS = fromConfig(
            ConfigFactory.defaultReferenceUnresolved().getConfig("dex.fabric.tcp.replication"));

    /** The settings of a {@code dex.fabric.tcp.replication} section; a bad value fails naming its key. */
    public static ReplicaSettings fromConfig(Config replication) {
        long chunk = replication.getBytes("copy-chunk");
        if (chunk > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("dex.fabric.tcp.replication.copy-chunk is too large: " + chunk);
        }
        return new ReplicaSettings(replication.getDuration("lease"), replication.getBytes("copy-rate"), (int) chunk,
                replication.getDuration("suspect-after"), replication.getDuration("failover-wait"));
    }

    public ReplicaSettings {
        if (lease == null || lease.toMillis() < 10 || lease.toSeconds() > 60) {
            throw new IllegalArgumentException("dex.fabric.tcp.replication.lease must be in [10ms, 60s]: " + lease);
        }
        if (copyRate < (1 << 20)) {
            throw new IllegalArgumentException("dex.fabric.tcp.replication.copy-rate must be at least 1MiB (per second): " + copyRate);
        }
        if (copyChunk < 4096 || copyChunk > (16 << 20) || Integer.bitCount(copyChunk) != 1) {
            throw new IllegalArgumentException("dex.fabric.tcp.replication.copy-chunk must be a power of two in [4KiB, 16MiB]: "
                    + copyChunk);
        }
        if (suspectAfter == null || suspectAfter.isNegative() || suspectAfter.toSeconds() > 600) {
            throw new IllegalArgumentException("dex.fabric.tcp.replication.suspect-after must be in [0, 600s]: " + suspectAfter);
        }
        if (failoverWait == null || failoverWait.isNegative() || failoverWait.toSeconds() > 600) {
            throw new IllegalArgumentException("dex.fabric.tcp.replication.failover-wait must be in [0, 600s]: " + failoverWait);
        }
        if (suspectAfter.compareTo(lease.dividedBy(2)) < 0) {
            suspectAfter = lease.dividedBy(2); // heartbeats come every quarter lease: two missed ones at least
        }
    }

    public ReplicaSettings withLease(Duration newLease) {
        return new ReplicaSettings(newLease, copyRate, copyChunk, suspectAfter, failoverWait);
    }

    public ReplicaSettings withCopyRate(long bytesPerSecond) {
        return new ReplicaSettings(lease, bytesPerSecond, copyChunk, suspectAfter, failoverWait);
    }

    public ReplicaSettings withFailoverWait(Duration wait) {
        return new ReplicaSettings(lease, copyRate, copyChunk, suspectAfter, wait);
    }
}
