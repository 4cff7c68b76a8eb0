package dev.dex.rdma.tcp;

import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Properties;
import java.util.concurrent.ThreadLocalRandom;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A replica's part in its group, kept in a file beside its region file (docs/replication.md, "The whole group
 * restarts"), so that a memory node restarted on its kept region can tell the coordinator what that region holds:
 * the region's own identity, drawn once per region file, and the last view in which the region held every change its
 * group answered (as primary, or as a complete backup). A few lines of text, forced to the device and moved over the
 * old file as a whole, so a crash leaves the old record or the new one. The record names the region's incarnation (its
 * header's, {@link dev.dex.rdma.RegionFormat#incarnation}) when it was written: a region formatted anew, or a crash
 * between a format and the new record, leaves a record of another incarnation, which claims nothing.
 *
 * <p>The record never claims more than the region holds: a replica {@link #clear clears} it before it takes a copy or a
 * new view's stream (and fails the change when it cannot), and {@link #claim claims} a view only once the region holds
 * it (a claim that cannot be written is logged: an older claim is never taken for a newer view). Without a region
 * directory nothing is kept (a restarted node starts empty anyway): {@link #inMemory}.
 *
 * <p>Concurrency: {@link #save} is synchronized; it is called under the {@link Replica}'s lock, on an event loop or the
 * thread that changes the replica's role, and only when the role, view or completeness changes.
 */
final class ReplicaFile {
    private static final Logger LOG = LoggerFactory.getLogger(ReplicaFile.class);

    private final int serverId;
    /** Null: nothing is kept. */
    private final Path file;
    /** The region's incarnation now (its header's word): a copy into a backup changes it. */
    private final java.util.function.LongSupplier incarnation;
    private final long regionId;
    private final boolean freshRegion;
    private final ReplicaStatus.Kept kept;
    private ReplicaStatus.Kept saved;

    private ReplicaFile(int serverId, Path file, java.util.function.LongSupplier incarnation, long regionId, boolean freshRegion,
                        ReplicaStatus.Kept kept) {
        this.serverId = serverId;
        this.incarnation = incarnation;
        this.freshRegion = freshRegion;
        this.file = file;
        this.regionId = regionId;
        this.kept = kept;
        this.saved = kept;
    }

    /** A record of nothing: the region lives in this process. */
    static ReplicaFile inMemory(int serverId) {
        return new ReplicaFile(serverId, null, () -> 0, newRegionId(), true, null);
    }

    /**
     * Opens memory server {@code serverId}'s record in {@code file}, for a region whose header says {@code incarnation}. A
     * fresh region (just formatted) starts a new record with a new identity; a kept one reads what its last run recorded,
     * if that was written for this incarnation.
     *
     * @throws UncheckedIOException when the file cannot be read or written
     */
    static ReplicaFile open(int serverId, Path file, boolean freshRegion, java.util.function.LongSupplier incarnation) {
        try {
            if (!freshRegion && Files.exists(file)) {
                Properties lines = new Properties();
                lines.load(new StringReader(Files.readString(file, StandardCharsets.UTF_8)));
                long regionId = Long.parseUnsignedLong(lines.getProperty("region-id", "0"), 16);
                long recordedFor = Long.parseUnsignedLong(lines.getProperty("region-incarnation", "0"), 16);
                if (regionId != 0 && recordedFor != incarnation.getAsLong()) {
                    LOG.warn("memory server {}: {} was written for another region (incarnation {}, the region's is {}): it"
                            + " claims nothing", serverId, file, Long.toHexString(recordedFor),
                            Long.toHexString(incarnation.getAsLong()));
                } else if (regionId != 0) {
                    String role = lines.getProperty("role", "");
                    ReplicaStatus.Kept kept = role.isEmpty() ? null
                            : new ReplicaStatus.Kept(ReplicaStatus.Role.valueOf(role), Long.parseLong(lines.getProperty("view", "0")));
                    if (kept != null) {
                        LOG.info("memory server {}: its kept region was {} of view {} and held every change its group answered"
                                + " then", serverId, kept.role(), kept.view());
                    }
                    return new ReplicaFile(serverId, file, incarnation, regionId, false, kept);
                } else {
                    LOG.warn("memory server {}: {} names no region; a new record is started", serverId, file);
                }
            }
            ReplicaFile started = new ReplicaFile(serverId, file, incarnation, newRegionId(), freshRegion, null);
            started.write(null);
            return started;
        } catch (IOException | RuntimeException e) {
            throw new UncheckedIOException("memory server " + serverId + " cannot read or write its replica record " + file,
                    e instanceof IOException io ? io : new IOException(e.getMessage(), e));
        }
    }

    private static long newRegionId() {
        long id;
        do {
            id = ThreadLocalRandom.current().nextLong();
        } while (id == 0);
        return id;
    }

    /** This region's identity, the same across restarts of its memory node (new for every fresh region). */
    long regionId() {
        return regionId;
    }

    /** Whether the region was formatted by this run (or lives in this process): an empty index, no older state. */
    boolean freshRegion() {
        return freshRegion;
    }

    /** What the record said when the memory node started: the region holds every change answered in that view; or null. */
    ReplicaStatus.Kept kept() {
        return kept;
    }

    /**
     * Records that the region holds nothing its group may serve from, before it may stop holding what it claimed.
     *
     * @throws UncheckedIOException when it cannot be written: the caller must not go on (the old claim would outlive it)
     */
    void clear() {
        save(null);
    }

    /**
     * Records that the region holds every change its group answered in {@code now}'s view. One that cannot be written is
     * logged and left: the record keeps claiming less (an older view, or nothing), which is never taken for more.
     */
    void claim(ReplicaStatus.Kept now) {
        try {
            save(now);
        } catch (UncheckedIOException unrecorded) {
            LOG.warn("memory server {}: {}; a restart on this region will not be taken as {} of view {}", serverId,
                    unrecorded.getMessage(), now.role(), now.view());
        }
    }

    private synchronized void save(ReplicaStatus.Kept now) {
        if (file == null || java.util.Objects.equals(now, saved)) {
            return;
        }
        try {
            write(now);
        } catch (IOException e) {
            throw new UncheckedIOException("memory server " + serverId + " cannot write its replica record " + file, e);
        }
        saved = now;
    }

    private void write(ReplicaStatus.Kept now) throws IOException {
        String text = "# memory server " + serverId + ": this region's part in its replica group (docs/replication.md)\n"
                + "region-id=" + Long.toHexString(regionId) + "\n"
                + "region-incarnation=" + Long.toHexString(incarnation.getAsLong()) + "\n"
                + (now == null ? "" : "role=" + now.role().name() + "\nview=" + now.view() + "\n");
        Path next = file.resolveSibling(file.getFileName() + ".next");
        try (java.nio.channels.FileChannel channel = java.nio.channels.FileChannel.open(next, java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.WRITE, java.nio.file.StandardOpenOption.TRUNCATE_EXISTING)) {
            channel.write(java.nio.ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8)));
            channel.force(true);
        }
        Files.move(next, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
}
