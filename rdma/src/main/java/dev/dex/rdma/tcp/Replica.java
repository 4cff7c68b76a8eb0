package dev.dex.rdma.tcp;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.LongConsumer;

import org.agrona.DirectBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.Region;
import io.netty.channel.Channel;

/**
 * A region server's part in a replica group (docs/replication.md): {@link ReplicaStatus.Role#SOLE} until told
 * otherwise, then a primary that orders a {@link ReplicationStream}, or a backup that applies one.
 *
 * <p>A backup takes one stream at a time, from the connection that greeted with a view no older than its own; a newer
 * greeting (a new primary) closes the older stream's connection, and a stream of an older view is refused
 * {@code NOT_PRIMARY}, which tells a replaced primary that it was replaced. It becomes primary only when complete
 * (it holds the stream's prefix) and a lease after it last acknowledged the old primary, so the old one has stopped
 * answering by then ({@link ReplicationStream#leaseHeld}).
 *
 * <p>Concurrency: the backup's stream frames (on one event loop), promotions and role changes (on the caller's
 * thread) synchronize on this object; the fields the region server reads per request ({@link #stream}, {@link #role})
 * are volatile. The stream itself is thread-safe.
 */
final class Replica {
    private static final Logger LOG = LoggerFactory.getLogger(Replica.class);

    private final int serverId;
    private final Region region;
    private final TcpSettings tcp;
    private final ReplicaSettings settings;
    private final IoTransport io;
    /** Closes every client connection (a replica that stops serving clients). */
    private final Runnable dropClients;
    /** Records a fence the primary streamed. */
    private final LongConsumer fence;
    /** This region's identity and its part in the group, kept beside a region file (docs/replication.md). */
    private final ReplicaFile record;
    /** When this replica was made: a restarted backup's old process died before, and its old primary's lease with it. */
    private final long createdNanos = System.nanoTime();

    private volatile ReplicaStatus.Role role = ReplicaStatus.Role.SOLE;
    private volatile long view;
    /** The primary's stream; null unless primary. */
    volatile ReplicationStream stream;
    private volatile String demotedBecause;
    /** A sole replica that must not serve clients until its group says what it is ({@link #standBy}). */
    private volatile boolean standby;
    /** Waiting out the old primary's lease on its way to primary: no other change of role meanwhile. */
    private boolean promoting;

    // A backup's state (under this object's lock)
    private long streamId;
    private volatile long applied;
    private volatile boolean complete;
    private volatile long lastAckNanos = System.nanoTime();
    private Channel streamChannel;
    private long streamView;
    private volatile long copyReceived;
    private int copyReported;

    Replica(int serverId, Region region, TcpSettings tcp, ReplicaSettings settings, IoTransport io, Runnable dropClients,
            LongConsumer fence, ReplicaFile record) {
        this.serverId = serverId;
        this.record = record;
        this.region = region;
        this.tcp = tcp;
        this.settings = settings;
        this.io = io;
        this.dropClients = dropClients;
        this.fence = fence;
    }

    /** Why this replica refuses a client's greeting, or null when it serves clients. */
    String clientRefusal() {
        return switch (role) {
            case SOLE -> standby ? "memory server " + serverId + ": this replica waits for its replica group to make it primary or"
                    + " backup (dex.memory.replicas > 1)" : null;
            case PRIMARY -> null;
            case BACKUP -> "memory server " + serverId + ": this replica is a backup in view " + view + "; its primary serves clients";
            case DEMOTED -> "memory server " + serverId + ": this replica was primary and was replaced (" + demotedBecause + ")";
        };
    }

    ReplicaStatus status() {
        ReplicationStream primary = stream;
        if (primary != null) {
            return new ReplicaStatus(serverId, role, Math.max(view, primary.view()), primary.streamId(), primary.assigned(),
                    primary.committed(), true, 0, primary.backups(), null, record.regionId(), record.freshRegion(), null);
        }
        synchronized (this) {
            long left = role == ReplicaStatus.Role.BACKUP && !complete ? Math.max(0, region.length() - copyReceived) : 0;
            return new ReplicaStatus(serverId, role, view, streamId, applied, applied, role == ReplicaStatus.Role.SOLE || complete,
                    left, List.of(), primaryLost(), record.regionId(), record.freshRegion(),
                    role == ReplicaStatus.Role.SOLE ? record.kept() : null);
        }
    }

    /** Under the lock: why a complete backup thinks its primary is gone, or null. */
    private String primaryLost() {
        if (role != ReplicaStatus.Role.BACKUP || !complete || promoting || streamView < view) {
            return null; // only the stream of its own view: a newer view's primary has yet to greet it
        }
        if (streamChannel == null || !streamChannel.isActive()) {
            return "the stream's connection from the primary of view " + streamView + " closed";
        }
        long silent = System.nanoTime() - lastAckNanos;
        if (silent > settings.suspectAfter().toNanos()) {
            return "no frame from the primary of view " + streamView + " for " + silent / 1_000_000 + " ms";
        }
        return null;
    }

    // ---- roles, set by whoever keeps the group map

    /**
     * A sole replica that belongs to a group: it refuses clients until it is made primary or backup. A memory node of a
     * replicated server starts so, also on a kept region, which may be older than what its group answered since.
     */
    synchronized void standBy() {
        if (role == ReplicaStatus.Role.SOLE) {
            standby = true;
            dropClients.run();
        }
    }

    /** From now on a backup of view {@code newView}: clients are refused and dropped; a primary's stream is taken. */
    synchronized void becomeBackup(long newView) {
        if (promoting) {
            throw new IllegalStateException("memory server " + serverId + " is becoming primary of view " + view);
        }
        if (role == ReplicaStatus.Role.PRIMARY) {
            throw new IllegalStateException("memory server " + serverId + " is primary of view " + view + "; a primary is not made a backup");
        }
        checkView(newView);
        record.clear(); // before it counts as a backup: from here on its region may be overwritten by a copy
        view = newView;
        // Its region's contents are of no stream of this view yet (a backup dropped by a view and added again may have
        // missed changes): it must be greeted, and copied unless it holds the new primary's prefix, before it may
        // become primary.
        complete = false;
        streamId = 0;
        applied = 0;
        role = ReplicaStatus.Role.BACKUP;
        dropClients.run();
        LOG.info("memory server {}: this replica is a backup in view {}", serverId, newView);
    }

    /**
     * Primary of view {@code newView} with {@code backups} (endpoints). A sole replica starts a new stream; a backup must be
     * complete, and waits until a lease has passed since it last acknowledged its old primary (that one answers nothing
     * by then), then continues the stream from the last change it applied. Backups that cannot be reached are left
     * out and reported by {@link #status()}.
     */
    void becomePrimary(long newView, List<String> backups) {
        ReplicationStream started;
        long waitUntil;
        boolean wasSole;
        synchronized (this) {
            checkView(newView);
            if (role == ReplicaStatus.Role.PRIMARY || promoting) {
                throw new IllegalStateException("memory server " + serverId + " is primary already (view " + view + ")");
            }
            if (role == ReplicaStatus.Role.DEMOTED) {
                throw new IllegalStateException("memory server " + serverId + " was replaced as primary; it must be copied anew");
            }
            // A new stream identity for every primary: another backup that applied the old primary's changes up to the same
            // number may hold other bytes than this one (what the old primary applied but never had answered), so no
            // backup is taken as holding this primary's stream without being copied.
            long id = ThreadLocalRandom.current().nextLong() | 1;
            long from = applied;
            if (role == ReplicaStatus.Role.BACKUP) {
                if (!complete) {
                    throw new IllegalStateException("memory server " + serverId + ": this backup's copy is not complete ("
                            + Math.max(0, region.length() - copyReceived) + " bytes left); it cannot become primary");
                }
                if (streamChannel != null) {
                    streamChannel.close();
                    streamChannel = null;
                }
            } else {
                from = 0;
            }
            wasSole = role == ReplicaStatus.Role.SOLE;
            promoting = true; // no other change of role until it is primary (or gave up)
            view = newView; // from here on the old primary's frames are refused (their view is older)
            waitUntil = lastAckNanos + settings.lease().toNanos();
            if (role == ReplicaStatus.Role.SOLE && record.kept() != null && record.kept().role() == ReplicaStatus.Role.BACKUP) {
                // A backup restarted on its kept region (the whole group was gone): its old primary stopped answering a
                // lease after this backup's old process stopped acknowledging, which was before this one was made.
                waitUntil = createdNanos + settings.lease().toNanos();
            }
            started = new ReplicationStream(serverId, region, tcp, settings, io, id, from, newView, this::demote);
        }
        long asked = System.nanoTime();
        long wait = waitUntil - asked;
        if (wait > 0 && (!wasSole || record.kept() != null)) {
            try {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                synchronized (this) {
                    promoting = false;
                }
                started.close();
                throw new IllegalStateException("interrupted while waiting out the old primary's lease", interrupted);
            }
        }
        synchronized (this) {
            record.claim(new ReplicaStatus.Kept(ReplicaStatus.Role.PRIMARY, newView));
            stream = started;
            role = ReplicaStatus.Role.PRIMARY;
            promoting = false;
            standby = false;
        }
        if (wasSole) {
            // A request that found no stream a moment ago may still be changing the region without a number: every event
            // loop runs such requests, so once each has run an empty task, every later change is numbered (and copied).
            for (io.netty.util.concurrent.EventExecutor loop : io.group()) {
                loop.submit(() -> { }).awaitUninterruptibly();
            }
        }
        LOG.info("memory server {}: this replica is primary of view {} from change {}{}", serverId, newView, started.assigned(),
                wasSole ? "" : " (" + (System.nanoTime() - asked) / 1_000_000 + " ms after it was asked: the old primary's lease)");
        installView(newView, backups);
    }

    /** A primary's new view: exactly {@code backups} hold its stream (missing ones are added, copied when they need it). */
    void installView(long newView, List<String> backups) {
        ReplicationStream primary = stream;
        if (primary == null) {
            throw new IllegalStateException("memory server " + serverId + " is not primary (" + role + ")");
        }
        record.claim(new ReplicaStatus.Kept(ReplicaStatus.Role.PRIMARY, newView));
        primary.installView(newView, new LinkedHashSet<>(backups));
        view = newView;
        LOG.info("memory server {}: view {} installed, backups {}", serverId, newView, backups);
        for (String endpoint : backups) {
            try {
                primary.addBackup(endpoint);
            } catch (RuntimeException unreachable) {
                LOG.warn("memory server {}: backup {} of view {} cannot be reached: {}", serverId, endpoint, newView,
                        unreachable.getMessage());
            }
        }
    }

    private void checkView(long newView) {
        if (newView < view) {
            throw new IllegalArgumentException("memory server " + serverId + " is in view " + view + ", newer than " + newView);
        }
    }

    private void demote() {
        ReplicationStream primary;
        synchronized (this) {
            primary = stream;
            demotedBecause = primary == null ? "a newer view" : primary.demoted();
            try {
                record.clear();
            } catch (RuntimeException unrecorded) {
                // Its record claims a view that the map has left already: a restart on it is never taken as the newest.
                LOG.warn("memory server {}: {}", serverId, unrecorded.getMessage());
            }
            role = ReplicaStatus.Role.DEMOTED;
        }
        dropClients.run();
        if (primary != null) {
            primary.close(); // its links and heartbeat: it serves nothing any more
        }
    }

    void close() {
        ReplicationStream primary = stream;
        if (primary != null) {
            primary.close();
        }
    }

    // ---- a backup's side of the stream: the region server's event loop calls these for OP_STREAM and OP_APPLY

    /**
     * A primary's greeting: returns 1 when this backup holds exactly the prefix it streams from, 0 when it must be
     * copied, or throws {@link NotPrimaryException} for a replica that is not a backup or a view older than its own.
     */
    synchronized long openStream(Channel channel, long greetingView, long id, long last) {
        if (greetingView < view) {
            // The one refusal that tells a primary it was replaced.
            throw new NotPrimaryException("memory server " + serverId + ": this replica is in view " + view
                    + " and refuses the stream of view " + greetingView);
        }
        if (role != ReplicaStatus.Role.BACKUP || promoting) {
            // Not a backup (yet): a restarted node, say. The primary greets it again later.
            throw new IllegalStateException("memory server " + serverId + " at this endpoint is " + role
                    + (promoting ? ", becoming primary" : "") + ", not a backup");
        }
        boolean holdsPrefix = complete && streamId == id && applied == last;
        // Recorded before the greeting is answered: incomplete before a copy may overwrite the region, complete in the new
        // view only once the primary knows this backup holds its stream (it gates answers on it from then on).
        if (holdsPrefix) {
            record.claim(new ReplicaStatus.Kept(ReplicaStatus.Role.BACKUP, greetingView));
        } else {
            record.clear();
        }
        view = greetingView;
        if (streamChannel != null && streamChannel != channel) {
            streamChannel.close();
        }
        streamChannel = channel;
        streamView = greetingView;
        lastAckNanos = System.nanoTime();
        if (holdsPrefix) {
            return 1;
        }
        streamId = id;
        applied = last;
        complete = false;
        copyReceived = 0;
        copyReported = 0;
        LOG.info("memory server {}: this backup gets a copy of the region from the primary of view {}", serverId, greetingView);
        return 0;
    }

    /** One frame of the stream; returns the number to acknowledge. */
    synchronized long apply(Channel channel, long number, long flags, long offset, DirectBuffer payload, int count) {
        if (channel != streamChannel || streamView < view || role != ReplicaStatus.Role.BACKUP) {
            if (channel == streamChannel && streamView < view) {
                throw new NotPrimaryException("memory server " + serverId + ": this replica is in view " + view
                        + " and applies no stream of view " + streamView);
            }
            throw new IllegalStateException("memory server " + serverId + ": this connection's stream is not the one this"
                    + " replica applies (" + role + ", view " + view + ")");
        }
        if ((flags & TcpFrameDescriptor.APPLY_FENCE) != 0) {
            fence.accept(payload.getLong(0, java.nio.ByteOrder.LITTLE_ENDIAN));
        } else if (count > 0) {
            region.writeVerb(offset, payload, 0, count);
        }
        if ((flags & TcpFrameDescriptor.APPLY_COPY) != 0) {
            copyReceived += count;
            int percent = (int) (copyReceived * 100 / region.length());
            if (percent / 10 > copyReported / 10) {
                copyReported = percent;
                LOG.info("memory server {}: copy from the primary {}% ({} of {} MiB, {} MiB left)", serverId, percent,
                        copyReceived >> 20, region.length() >> 20, (region.length() - copyReceived) >> 20);
            }
        }
        if ((flags & TcpFrameDescriptor.APPLY_COPY_DONE) != 0) {
            record.claim(new ReplicaStatus.Kept(ReplicaStatus.Role.BACKUP, streamView));
            complete = true;
            LOG.info("memory server {}: copy complete at change {}; this backup holds the stream", serverId, number);
        }
        if (number > applied) {
            applied = number;
        }
        lastAckNanos = System.nanoTime();
        return number;
    }
}
