package dev.dex.rdma.disni;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.DirectRemoteMemory;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.GroupReplica;
import dev.dex.rdma.replica.RegionCopier;
import dev.dex.rdma.tcp.ReplicaSettings;

/**
 * One replica of a memory server on the {@code disni} fabric, exported by one memory node of the cluster
 * ({@link DisniFabric#exportReplica}); the replicas of a server live on different hosts. The cluster's replica
 * coordinator gives it its part ({@link #becomePrimary}, {@link #becomeBackup}, {@link #installView}) as it does to a
 * {@code local} replica; compute nodes write every change to every replica of the group's view themselves
 * (docs/replication.md, "The compute-side write path"). What a {@code local} replica learns from the JVM it shares with
 * the others, this one learns from messages between the memory nodes, on the control fabric:
 * <ul>
 *   <li>{@link #BEAT}, every quarter of {@code dex.fabric.tcp.replication.lease}, from a primary to each backup of its
 *       view: the primary's view and endpoint, and the state of its copy to that backup (bytes left, or the view the
 *       copy completed in). A complete backup that hears no beat for {@code suspect-after} says its primary is lost
 *       ({@link #primaryLost}); a primary whose beat a backup did not answer says that backup is lost
 *       ({@link #lostBackups}). Neither is certain, so the coordinator asks the other node before it acts.</li>
 *   <li>{@link #DEPOSE}, from a backup that became primary to the primary it last heard from, at once: if that
 *       replica still runs, it refuses the older views from then on and loses its part and its completeness.</li>
 * </ul>
 * A backup also grants compute nodes read leases ({@link #grantRead}, {@link ReadLeases}) for no longer than a lease
 * after its primary's last beat, and becomes primary only once the last of them ran out.
 * <p>Moving a part moves the replica's view with {@link DisniFabric#advanceView}: the RDMA keys of older views are revoked
 * and their atomics refused before the part changes.
 *
 * <p>Concurrency: role, view, completeness and the copy's progress are volatile and change under this object's
 * monitor, one part at a time; the links to the backups are a concurrent map, changed under the monitor and read without
 * it (the memory node's actor asks {@link #lostBackups} and the status without waiting for a part to change); the beats
 * run on one scheduled thread of this replica's; each copy runs on a thread of its own; the control fabric's blocking
 * pool runs the messages, which take the monitor briefly. No replica of another process is ever waited for under the
 * monitor: the beats and depositions go out on a pool of their own, one task a message, and a link connects outside
 * its lock. Under the monitor, an {@link #installView} waits up to 2 s for an older copy of its own to end. The read
 * leases' bound and the promotion flag change under the monitor; a promotion waits its leases out outside it.
 */
public final class DisniReplicaRegion implements GroupReplica {
    private static final Logger LOG = LoggerFactory.getLogger(DisniReplicaRegion.class);

    /** A primary's heartbeat to a backup: its view, endpoint and the copy's state. */
    static final byte BEAT = 8;
    /** A new primary's word to the primary it replaces: refuse the views before this one. */
    static final byte DEPOSE = 9;
    /** magic 4, kind 1, padding 3, view 8, bytes left 8, the view the copy completed in 8, endpoint length 4. */
    static final int HEADER = 36;
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;
    /** A stale answer's length: the answer header and the answering replica's role (1 for a primary). */
    private static final int STALE_ANSWER = RdmaGrants.ANSWER_HEADER + Integer.BYTES;
    /** How often a primary starts again a copy to a backup that failed. */
    static final java.time.Duration COPY_RETRY = java.time.Duration.ofSeconds(2);

    private final DisniFabric fabric;
    private final ExportedRegion exported;
    private final int serverId;
    private final ReplicaSettings timing;
    /** The memory node's own access to its region: what a copy reads (no key, no view: the same process). */
    private final RemoteMemory own;
    /** Schedules the beats and the restarts of failed copies; sends nothing itself. */
    private final ScheduledExecutorService beats;
    /** Sends the beats and depositions, one task per message, so that a backup that hangs holds up no other. */
    private final java.util.concurrent.ExecutorService sends;
    /** A primary's links to the backups of its view, by endpoint; changed under this monitor, read without it. */
    private final Map<String, BackupLink> links = new java.util.concurrent.ConcurrentHashMap<>();
    private volatile Role role = Role.SOLE;
    private volatile long view;
    private volatile boolean complete = true; // a fresh, formatted region holds its whole (empty) server
    private volatile long copyLeft;
    /** The view it last became a backup in: a copy that started in an older view cannot complete it. */
    private volatile long backupSince;
    /** A backup's primary, as its last beat named it, and when that beat came ({@link System#nanoTime}). */
    private volatile String primary;
    private volatile long lastBeat;
    private volatile List<String> backups = List.of();
    private volatile boolean closed;
    /** The latest moment a read lease it granted may still hold ({@link System#nanoTime}); 0: none granted. */
    private long grantedUntil;
    /** Promotions under way, each waiting out its read leases: it grants none while there is one. */
    private int promoting;
    /** For tests: every message this replica sends fails, as from a host cut off from the others. */
    volatile boolean cutOff;

    DisniReplicaRegion(DisniFabric fabric, ExportedRegion exported, ReplicaSettings timing) {
        this.fabric = fabric;
        this.exported = exported;
        this.serverId = exported.serverId();
        this.timing = timing;
        this.own = connectOwn();
        this.beats = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "dex-disni-beats-" + serverId);
            thread.setDaemon(true);
            return thread;
        });
        this.sends = Executors.newCachedThreadPool(runnable -> {
            Thread thread = new Thread(runnable, "dex-disni-replica-send-" + serverId);
            thread.setDaemon(true);
            return thread;
        });
        long period = Math.max(1, timing.lease().toMillis() / 4);
        beats.scheduleWithFixedDelay(this::beat, period, period, TimeUnit.MILLISECONDS);
    }

    @Override
    public int serverId() {
        return serverId;
    }

    @Override
    public Region region() {
        return exported.region();
    }

    /** The replica's {@link RdmaRegionDescriptor} text: how compute nodes and the primary reach it. */
    @Override
    public String endpoint() {
        return exported.endpoint();
    }

    /** Its memory node's own access to the region (chunk grants, the tree's format): the process's memory, no key, no view. */
    @Override
    public RemoteMemory connectOwn() {
        Region[] byServer = new Region[serverId + 1];
        byServer[serverId] = exported.region();
        return new DirectRemoteMemory(byServer, 0, () -> { });
    }

    @Override
    public Role role() {
        return role;
    }

    /** Whether its memory node closed it: every verb on it fails from then on. */
    @Override
    public boolean gone() {
        return closed;
    }

    /** The newest view it took a part in. */
    @Override
    public long view() {
        return view;
    }

    /** Whether it holds the whole server: a primary, or a backup whose copy is done. */
    @Override
    public boolean complete() {
        return complete;
    }

    /** Never: a primary on another host may be alive and cut off. */
    @Override
    public boolean primaryRetired() {
        return false;
    }

    /** Never: a backup on another host that misses beats may be alive and cut off. */
    @Override
    public boolean backupLossCertain() {
        return false;
    }

    /** Bytes of the copy to it not written yet, as its primary's last beat said. */
    @Override
    public long copyLeft() {
        return copyLeft;
    }

    /**
     * A complete backup's: why it thinks its primary is lost (no beat for {@code suspect-after}), for the coordinator
     * to ask the primary's node and fail over; null otherwise. Never certain: a primary on another host may be alive and
     * cut off.
     */
    @Override
    public String primaryLost() {
        String of = primary;
        if (role != Role.BACKUP || !complete || of == null || closed) {
            return null;
        }
        long silentMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastBeat);
        if (silentMs <= timing.suspectAfter().toMillis()) {
            return null;
        }
        return "memory server " + serverId + "'s primary replica " + of + " sent no heartbeat for " + silentMs + " ms";
    }

    /**
     * A primary's: the backups of its view whose node did not answer its last beat, by endpoint, with why. Compute nodes
     * write every change to them, so each change waits until a view leaves them out. Empty otherwise.
     */
    @Override
    public Map<String, String> lostBackups() {
        if (role != Role.PRIMARY || closed) {
            return Map.of();
        }
        Map<String, String> lost = new TreeMap<>();
        for (String backup : backups) {
            BackupLink link = links.get(backup);
            if (link != null && link.broken != null) {
                lost.put(backup, link.broken);
            }
        }
        return lost;
    }

    /**
     * Serves clients as the primary of {@code next}: from now on it refuses verbs of older views. The primary it last
     * heard from is told to refuse them too, at once and without waiting for its answer.
     *
     * @throws IllegalStateException when it is a backup whose copy is not done (it does not hold the whole server)
     */
    @Override
    public void becomePrimary(long next) {
        String deposed;
        try {
            awaitReadLeases();
            synchronized (this) {
                deposed = promote(next);
            }
        } finally {
            synchronized (this) {
                promoting--;
            }
        }
        if (deposed != null && !deposed.equals(endpoint())) {
            send(() -> depose(deposed, next));
        }
    }

    /**
     * Stops granting read leases and waits, outside the monitor, until every lease it granted ran out: a compute node
     * that missed the failover then reads the replaced primary no more (docs/replication.md, "Read leases").
     */
    private void awaitReadLeases() {
        long deadline;
        synchronized (this) {
            promoting++; // first: becomePrimary's finally takes it back, whatever throws
            if (!complete) {
                throw new IllegalStateException("memory server " + serverId + "'s replica " + endpoint() + " is a backup whose copy"
                        + " is not done: it cannot become primary");
            }
            // Grants of an earlier process of this node need no wait: that process's backup was dropped when it stopped
            // answering beats, and its primary moved to a view without it, revoking the keys of the views it granted in;
            // this one becomes complete only by a copy from that primary in a later view still.
            deadline = grantedUntil;
        }
        if (deadline == 0) {
            return; // it never granted one
        }
        long wait = deadline - System.nanoTime();
        if (wait > 0) {
            LOG.info("memory server {}: the replica {} waits {} ms for the read leases it granted to run out", serverId, endpoint(),
                    TimeUnit.NANOSECONDS.toMillis(wait));
        }
        for (long left; (left = deadline - System.nanoTime()) > 0; ) {
            java.util.concurrent.locks.LockSupport.parkNanos(left);
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while the read leases of memory server " + serverId + " run out");
            }
        }
    }

    /** Takes the primary's part in {@code next}; under the monitor. Returns the primary it last heard from, or null. */
    private String promote(long next) {
        if (closed || !complete) {
            throw new IllegalStateException("memory server " + serverId + "'s replica " + endpoint() + " is "
                    + (closed ? "closed" : "no longer complete") + ": it cannot become primary");
        }
        try {
            fabric.advanceView(serverId, next);
        } catch (RuntimeException notMoved) {
            // Its part is none until an advance to this view returns: the coordinator asks a primary of its map that
            // reports no part again (it keeps its completeness: it missed no change).
            role = Role.SOLE;
            throw notMoved;
        }
        view = next;
        role = Role.PRIMARY;
        String deposed = primary;
        primary = null;
        backups = List.of(); // its views' backups start now: any it had in an earlier time as primary are copied again
        closeLinks(links.keySet());
        return deposed;
    }

    /**
     * A compute node's request for a read lease in {@code inView} ({@link ReadLeases}): granted while it is a backup of
     * that view that heard its primary's beat within a lease, for the rest of that lease; refused while it waits to
     * become primary.
     */
    synchronized ReadLeases.Grant grantRead(long inView) {
        if (closed) {
            return ReadLeases.Grant.notNow("its region is closed");
        }
        if (inView < view) {
            return ReadLeases.Grant.newer(view);
        }
        if (role != Role.BACKUP || inView > view || promoting > 0) {
            return ReadLeases.Grant.notNow("it is " + (promoting > 0 ? "becoming primary" : role) + " in view " + view);
        }
        long now = System.nanoTime();
        long end = lastBeat + timing.lease().toNanos();
        if (primary == null || end - now <= 0) {
            return ReadLeases.Grant.notNow("it heard no heartbeat from its primary for "
                    + (primary == null ? "ever" : TimeUnit.NANOSECONDS.toMillis(now - lastBeat) + " ms"));
        }
        if (grantedUntil == 0 || end - grantedUntil > 0) {
            grantedUntil = end;
        }
        return ReadLeases.Grant.granted(end - now);
    }

    /**
     * Joins {@code next} as a backup: compute nodes write it from now on, and the primary copies its region to it. Asked
     * again in the view it is in, nothing changes (its copy goes on).
     */
    @Override
    public synchronized void becomeBackup(long next) {
        if (role == Role.BACKUP && backupSince == next) {
            return;
        }
        // Incomplete before anything else: an advance that fails leaves it so (and without a part, so that the
        // coordinator asks again), never a replica the map names a backup that still says complete from before.
        complete = false;
        role = Role.SOLE;
        copyLeft = region().length();
        fabric.stampsFrom(serverId, next);
        fabric.advanceView(serverId, next);
        view = next;
        role = Role.BACKUP;
        backupSince = next;
        closeLinks(links.keySet());
    }

    /**
     * As the primary, moves to {@code next} with {@code backups} (their endpoints): refuses the older view from now on, so
     * that no compute node changes it without the backups, then copies its region to every backup that is not known to
     * be complete, each on a thread of its own at {@code copy-rate} at most. A backup new to this primary's views is
     * copied whatever it says of itself: it missed the changes of the views it was out of.
     *
     * @throws IllegalStateException when it is not the primary, or a backup's endpoint is not one of this server's
     */
    @Override
    public synchronized void installView(long next, List<String> newBackups) {
        if (role != Role.PRIMARY) {
            throw new IllegalStateException("memory server " + serverId + "'s replica " + endpoint() + " is " + role + ", not primary");
        }
        for (String backup : newBackups) {
            RdmaRegionDescriptor descriptor;
            try {
                descriptor = RdmaRegionDescriptor.parse(backup);
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException("memory server " + serverId + "'s backup endpoint is no disni endpoint: " + e.getMessage(), e);
            }
            if (descriptor.serverId() != serverId) {
                throw new IllegalStateException("the backup " + backup + " is a replica of memory server " + descriptor.serverId()
                        + ", not " + serverId);
            }
        }
        fabric.advanceView(serverId, next);
        view = next;
        List<String> gone = new ArrayList<>(links.keySet());
        gone.removeAll(newBackups);
        closeLinks(gone);
        backups = List.copyOf(newBackups);
        for (String backup : backups) {
            BackupLink link = links.computeIfAbsent(backup, endpoint -> new BackupLink(fabric, serverId, endpoint));
            startCopy(link, next);
        }
        // The backups learn the view now, not a quarter lease later: a backup reports a lost primary in the view it
        // knows, and the coordinator takes only a report of the current one.
        schedule(this::beat);
    }

    /** Copies to {@code link}'s backup in {@code next} unless its copy is done or one of this view runs; under the monitor. */
    private void startCopy(BackupLink link, long next) {
        if (link.doneView >= 0) {
            return;
        }
        Thread running = link.copy;
        if (running != null && running.isAlive()) {
            if (link.copyView >= next) {
                return;
            }
            // A copy of an older view. A kept backup's gate does not move with the primary's view, so it may run on;
            // let it end (2 s at most), then copy again in this view. Two copies at once would still be safe (each
            // piece is read, written and read again), only slower; the older one's end completes the older view.
            try {
                running.join(TimeUnit.SECONDS.toMillis(2));
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        Thread copy = new Thread(() -> copyTo(link, next), "dex-copy-" + serverId + "-to-" + link.endpoint.hashCode());
        copy.setDaemon(true);
        link.copy = copy;
        link.copyView = next;
        link.copyStarted = System.nanoTime();
        link.left = region().length();
        copy.start();
    }

    private void copyTo(BackupLink link, long inView) {
        long start = System.nanoTime();
        try (RemoteMemory to = fabric.connect(Map.of(serverId, link.endpoint), 0, inView)) {
            LOG.info("memory server {}: copying {} MiB to the backup {} in view {}", serverId, region().length() >> 20, link.endpoint, inView);
            new RegionCopier(own, to, serverId, timing.copyRate()).copy(region().length(), (bytes, total) -> link.left = total - bytes);
            link.left = 0;
            link.doneView = inView;
            LOG.info("memory server {}: the copy to the backup {} is done ({} MiB in {} ms)", serverId, link.endpoint,
                    region().length() >> 20, (System.nanoTime() - start) / 1_000_000);
            schedule(this::beat); // tell the backup now rather than a quarter lease later
        } catch (RuntimeException e) {
            LOG.warn("memory server {}: the copy to the backup {} failed ({}); it starts again at the group's next view", serverId,
                    link.endpoint, e.getMessage());
        }
    }

    /**
     * One round from a primary to the backups of its view, on the scheduling thread: a beat to each backup whose last
     * beat was answered (on the send pool, one task each), a backup whose beat is unanswered for {@code suspect-after}
     * marked lost, and a copy that failed started again (at most every {@link #COPY_RETRY}).
     */
    private void beat() {
        List<BackupLink> targets = new ArrayList<>();
        long inView;
        synchronized (this) {
            if (role != Role.PRIMARY || closed) {
                return;
            }
            inView = view;
            long now = System.nanoTime();
            for (String backup : backups) {
                BackupLink link = links.get(backup);
                if (link == null) {
                    continue;
                }
                targets.add(link);
                Thread copy = link.copy;
                if (link.doneView < 0 && (copy == null || !copy.isAlive()) && now - link.copyStarted > COPY_RETRY.toNanos()) {
                    startCopy(link, inView); // failed (the backup was unreachable, say): again in this view
                }
            }
        }
        for (BackupLink link : targets) {
            long sentAt = link.beatSentAt;
            if (sentAt != 0) {
                long silentMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sentAt);
                if (silentMs > timing.suspectAfter().toMillis()) {
                    link.broken = "memory server " + serverId + "'s backup replica " + link.endpoint + " has not answered its"
                            + " primary's heartbeat for " + silentMs + " ms";
                }
                continue; // one beat in flight per backup
            }
            link.beatSentAt = System.nanoTime();
            send(() -> beatOnce(link, inView));
        }
    }

    /** One beat to one backup, on the send pool. */
    private void beatOnce(BackupLink link, long inView) {
        try {
            send(link.sender(), BEAT, inView, link.left, link.doneView);
            link.broken = null;
        } catch (Superseded newer) {
            link.broken = null;
            if (newer.primary) {
                // A replica of this server is primary of a newer view: this one was replaced while it could not be told
                // (cut off when its successor sent DEPOSE). It refuses its views from now on, as if told.
                synchronized (this) {
                    if (role == Role.PRIMARY && view == inView) {
                        deposed(newer.view);
                    }
                }
            } else {
                // A backup in a newer view: the coordinator's next view is on its way to this primary.
                LOG.debug("memory server {}: the backup {} is in view {}, past this primary's {}", serverId, link.endpoint,
                        newer.view, inView);
            }
        } catch (RuntimeException unanswered) {
            link.broken = "memory server " + serverId + "'s backup replica " + link.endpoint + " did not answer its primary's"
                    + " heartbeat: " + unanswered.getMessage();
            link.drop(); // connect again at the next beat
        } finally {
            link.beatSentAt = 0;
        }
    }

    /** Runs {@code task} on the scheduling thread (as the beats run), unless the replica is closed. */
    private void schedule(Runnable task) {
        try {
            beats.execute(task);
        } catch (java.util.concurrent.RejectedExecutionException closing) {
            LOG.debug("memory server {}: a beat not sent, the replica is closed", serverId);
        }
    }

    /** Runs {@code task} on the send pool, unless the replica is closed. */
    private void send(Runnable task) {
        try {
            sends.execute(task);
        } catch (java.util.concurrent.RejectedExecutionException closing) {
            LOG.debug("memory server {}: a replica message not sent, the replica is closed", serverId);
        }
    }

    private void depose(String replaced, long next) {
        try (RemoteMemory link = fabric.controlLink(serverId, replaced)) {
            send((MessageSender) link, DEPOSE, next, -1, -1);
            LOG.info("memory server {}: the replaced primary {} refuses the views before {}", serverId, replaced, next);
        } catch (RuntimeException unreachable) {
            LOG.warn("memory server {}: the replaced primary {} could not be told of view {} ({}); compute nodes that missed the"
                    + " failover can still read it, but none can change the group through it", serverId, replaced, next,
                    unreachable.getMessage());
        }
    }

    /** Whether a message of the control fabric is one of the replicas' own ({@link #BEAT}, {@link #DEPOSE}). */
    static boolean isReplicaMessage(DirectBuffer message, int offset, int length) {
        if (length < HEADER || message.getInt(offset, ORDER) != RdmaGrants.MAGIC) {
            return false;
        }
        byte kind = message.getByte(offset + 4);
        return kind == BEAT || kind == DEPOSE;
    }

    /** Answers a replica message; on the control fabric's blocking pool. */
    int handle(DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
        byte kind = message.getByte(offset + 4);
        long inView = message.getLong(offset + 8, ORDER);
        long left = message.getLong(offset + 16, ORDER);
        long doneView = message.getLong(offset + 24, ORDER);
        int endpointLength = message.getInt(offset + 32, ORDER);
        if (endpointLength < 0 || HEADER + endpointLength != length) {
            throw new IllegalArgumentException("a replica message of " + length + " bytes names an endpoint of " + endpointLength);
        }
        String from = message.getStringWithoutLengthUtf8(offset + HEADER, endpointLength);
        reply.putInt(0, RdmaGrants.MAGIC, ORDER);
        synchronized (this) {
            if (kind == DEPOSE) {
                deposed(inView);
            } else if (inView < view) {
                reply.putInt(4, RdmaGrants.STALE_VIEW, ORDER);
                reply.putLong(8, view, ORDER);
                reply.putInt(RdmaGrants.ANSWER_HEADER, role == Role.PRIMARY ? 1 : 0, ORDER);
                return STALE_ANSWER;
            } else if (role == Role.BACKUP) {
                primary = from;
                lastBeat = System.nanoTime();
                view = inView; // its primary moved to a later view with it as a backup: its reported view follows
                if (!complete && left >= 0) {
                    copyLeft = left;
                }
                if (doneView >= 0) {
                    copied(doneView);
                }
            }
            reply.putInt(4, 0, ORDER);
            reply.putLong(8, view, ORDER);
        }
        return RdmaGrants.ANSWER_HEADER;
    }

    /** A new primary's {@link #DEPOSE}: refuse views before {@code next}; a primary loses its part and completeness. */
    private void deposed(long next) {
        if (next <= view) {
            return; // it took a part in that view or a later one already: the message is late
        }
        fabric.advanceView(serverId, next);
        view = next;
        if (role == Role.PRIMARY) {
            role = Role.SOLE;
            complete = false; // it may miss changes of the new view: it is copied again when it rejoins
            backups = List.of();
            closeLinks(new ArrayList<>(links.keySet()));
            LOG.warn("memory server {}: this replica was primary, and a replica of view {} replaced it; it serves no client of an"
                    + " older view", serverId, next);
        }
    }

    /**
     * The copy to this backup in {@code inView} is done: complete, if it is still a backup of that view or a later one,
     * and has been one since before the copy began.
     */
    private void copied(long inView) {
        if (role == Role.BACKUP && view >= inView && inView >= backupSince && !closed && !complete) {
            complete = true;
            copyLeft = 0;
            LOG.info("memory server {}: this backup is complete in view {}", serverId, inView);
        }
    }

    private void send(MessageSender to, byte kind, long inView, long left, long doneView) {
        if (cutOff) {
            throw new dev.dex.rdma.FabricException("memory server " + serverId + "'s replica " + endpoint() + " is cut off");
        }
        byte[] self = endpoint().getBytes(StandardCharsets.UTF_8);
        if (HEADER + self.length > MessageHandler.MAX_MESSAGE) {
            throw new IllegalStateException("an endpoint of " + self.length + " bytes does not fit a replica message");
        }
        UnsafeBuffer request = new UnsafeBuffer(new byte[HEADER + self.length]);
        request.putInt(0, RdmaGrants.MAGIC, ORDER);
        request.putByte(4, kind);
        request.putLong(8, inView, ORDER);
        request.putLong(16, left, ORDER);
        request.putLong(24, doneView, ORDER);
        request.putInt(32, self.length, ORDER);
        request.putBytes(HEADER, self);
        UnsafeBuffer answer = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        int n = to.send(serverId, request, 0, request.capacity(), answer, 0);
        if (n < RdmaGrants.ANSWER_HEADER || answer.getInt(0, ORDER) != RdmaGrants.MAGIC) {
            throw new IllegalArgumentException("memory server " + serverId + "'s replica answered a replica message with " + n + " bytes");
        }
        if (answer.getInt(4, ORDER) == RdmaGrants.STALE_VIEW) {
            throw new Superseded(answer.getLong(8, ORDER), n >= STALE_ANSWER && answer.getInt(RdmaGrants.ANSWER_HEADER, ORDER) == 1);
        }
    }

    private void closeLinks(java.util.Collection<String> endpoints) {
        for (String endpoint : List.copyOf(endpoints)) {
            BackupLink link = links.remove(endpoint);
            if (link != null) {
                link.close();
            }
        }
    }

    /** Stops the beats and the sends; the region's close calls it too. */
    void stopThreads() {
        beats.shutdownNow();
        sends.shutdownNow();
    }

    /** Its memory node stopped: the beats stop, every key is revoked and the region closes. */
    @Override
    public void close() {
        List<Thread> copies = new ArrayList<>();
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            for (BackupLink link : links.values()) {
                if (link.copy != null) {
                    copies.add(link.copy);
                }
            }
            closeLinks(links.keySet());
        }
        stopThreads();
        own.close(); // a copy's next read fails; let each end before the region's memory goes
        for (Thread copy : copies) {
            try {
                copy.join(TimeUnit.SECONDS.toMillis(1));
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        exported.close();
    }

    /** A replica answered that it is in a newer view, as its primary ({@code primary}) or not. */
    private static final class Superseded extends RuntimeException {
        final long view;
        final boolean primary;

        Superseded(long view, boolean primary) {
            super("a replica is in view " + view + (primary ? " as its primary" : ""), null, false, false);
            this.view = view;
            this.primary = primary;
        }
    }
}
