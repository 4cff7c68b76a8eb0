package dev.dex.rdma.local;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.Region;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.GroupReplica;
import dev.dex.rdma.replica.RegionCopier;
import dev.dex.rdma.replica.ViewGate;
import dev.dex.rdma.replica.WordOrder;

/**
 * One replica of a memory server, exported by one memory node of the cluster on a {@code local} fabric (several
 * memory nodes of a server share the JVM's fabric, each with a replica of its own, named by its {@link #endpoint()}).
 * The cluster's replica coordinator gives it its part ({@link #becomePrimary}, {@link #becomeBackup},
 * {@link #installView}); compute nodes write every change to every replica of the group's view themselves
 * (docs/replication.md, "The compute-side write path"), and a primary copies its region to a backup that joins.
 * Closing it (its memory node stopped) retires its gate: every verb on it fails from then on.
 *
 * <p>Concurrency: role, view, completeness and the copy's progress are volatile, changed under this object's monitor
 * (one part at a time); the gate orders verbs against view changes; each copy runs on a thread of its own. A replica
 * takes another's monitor only while holding none of its own the other could wait for: {@link #becomePrimary} deposes
 * the others under its monitor, so {@link #installView} makes its new backups backups outside its own.
 */
public final class LocalReplicaRegion implements GroupReplica {
    private static final Logger LOG = LoggerFactory.getLogger(LocalReplicaRegion.class);

    private final LocalFabric fabric;
    private final int serverId;
    private final String endpoint;
    private final Region region;
    private final int chunkLength;
    private final ViewGate gate;
    /** The order every compute node of this JVM converges this replica's words in, as a backup ({@link WordOrder}). */
    private final WordOrder words = new WordOrder();
    /** A primary's copies to its backups, by endpoint: the thread and the view it copies in. */
    private final Map<String, Copy> copies = new HashMap<>();
    private volatile Role role = Role.SOLE;
    private volatile long view;
    private volatile boolean complete = true; // a fresh, formatted region holds its whole (empty) server
    private volatile long copyLeft;
    /** The view it last became a backup in: a copy that started in an older view predates it and cannot complete it. */
    private volatile long backupSince;
    /** A backup's primary: the replica that copied to it. */
    private volatile LocalReplicaRegion primary;
    /** A primary's backups in its view, by endpoint. */
    private volatile List<String> backups = List.of();

    LocalReplicaRegion(LocalFabric fabric, int serverId, String endpoint, Region region, int chunkLength) {
        this.fabric = fabric;
        this.serverId = serverId;
        this.endpoint = endpoint;
        this.region = region;
        this.chunkLength = chunkLength;
        this.gate = new ViewGate(serverId, endpoint, 0);
    }

    @Override
    public int serverId() {
        return serverId;
    }

    @Override
    public Region region() {
        return region;
    }

    /** The replica's name on the fabric: how compute nodes and the primary reach it. */
    @Override
    public String endpoint() {
        return endpoint;
    }

    WordOrder words() {
        return words;
    }

    ViewGate gate() {
        return gate;
    }

    int chunkLength() {
        return chunkLength;
    }

    @Override
    public Role role() {
        return role;
    }

    /** Whether it is gone: its memory node stopped, or it was killed ({@link LocalFabric#killReplica}). */
    @Override
    public boolean gone() {
        return gate.retired();
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

    /**
     * A complete backup's: why its primary is gone (its memory node stopped: its gate retired), for the coordinator to
     * fail over at once instead of after the cluster's failure detector; null otherwise.
     */
    @Override
    public String primaryLost() {
        LocalReplicaRegion of = primary;
        if (role != Role.BACKUP || !complete || of == null || !of.gate.retired()) {
            return null;
        }
        return "memory server " + serverId + "'s primary replica " + of.endpoint + " is gone";
    }

    /** Whether {@link #primaryLost} names a primary whose gate is retired: it refuses every verb for good. */
    @Override
    public boolean primaryRetired() {
        return primaryLost() != null;
    }

    /**
     * A primary's: the backups of its view that are gone (their memory node stopped), by endpoint, with why. Compute
     * nodes write every change to them, so each change waits (and then fails) until a view leaves them out: the memory
     * node asks the coordinator to drop them at once instead of after the cluster's failure detector. Empty otherwise.
     */
    @Override
    public Map<String, String> lostBackups() {
        if (role != Role.PRIMARY || gate.retired()) {
            return Map.of();
        }
        Map<String, String> lost = new java.util.TreeMap<>();
        for (String endpoint : backups) {
            LocalReplicaRegion backup = fabric.replica(endpoint);
            if (backup == null || backup.gone()) {
                lost.put(endpoint, "memory server " + serverId + "'s backup replica " + endpoint + " is gone");
            }
        }
        return lost;
    }

    /** A gone backup's gate is retired in the shared fabric: certain. */
    @Override
    public boolean backupLossCertain() {
        return true;
    }

    /** Bytes of the copy to it not written yet. */
    @Override
    public long copyLeft() {
        return copyLeft;
    }

    /**
     * Serves clients as the primary of {@code next}: from now on it refuses verbs of older views.
     *
     * @throws IllegalStateException when it is a backup whose copy is not done (it does not hold the whole server)
     */
    @Override
    public synchronized void becomePrimary(long next) {
        if (!complete) {
            throw new IllegalStateException("memory server " + serverId + "'s replica " + endpoint + " is a backup whose copy is not done:"
                    + " it cannot become primary");
        }
        // Every other replica of the server refuses the older views before this one serves: a deposed primary that is
        // still alive serves no compute node that missed the failover, and no old view's change converges onto a replica
        // of the new one. A deposed primary has no part until the coordinator adds it again as a backup (and copies it).
        for (LocalReplicaRegion other : fabric.othersOf(this)) {
            other.depose(next);
        }
        gate.advance(next);
        view = next;
        role = Role.PRIMARY;
        primary = null;
        backups = List.of(); // its views' backups start now: any it had in an earlier time as primary are copied again
    }

    /** Another replica of the server became primary of {@code next}: this one refuses older views from now on. */
    private synchronized void depose(long next) {
        if (gate.view() < next) {
            gate.advance(next);
        }
        if (role == Role.PRIMARY) {
            role = Role.SOLE;
            complete = false; // it may miss changes of the new view: it is copied again when it rejoins
        }
    }

    /**
     * Joins {@code next} as a backup: compute nodes write it from now on, and the primary copies its region to it. Asked
     * again in the view it is in, nothing changes (its copy goes on).
     */
    @Override
    public synchronized void becomeBackup(long next) {
        if (role == Role.BACKUP && backupSince == next) {
            return; // asked again for the same view
        }
        gate.advance(next);
        view = next;
        role = Role.BACKUP;
        complete = false;
        copyLeft = region.length();
        backupSince = next;
    }

    /**
     * As the primary, moves to {@code next} with {@code backups} (their endpoints): refuses the older view from now on, so
     * that no compute node changes it without the backups, then copies its region to every backup that is not complete,
     * each on a thread of its own at the fabric's {@link LocalFabric#copyRate} at most.
     *
     * @throws IllegalStateException when it is not the primary, or a backup is not a replica of this server on this fabric
     */
    @Override
    public void installView(long next, List<String> backups) {
        List<LocalReplicaRegion> replicas = new java.util.ArrayList<>();
        List<LocalReplicaRegion> added = new java.util.ArrayList<>();
        synchronized (this) {
            if (role != Role.PRIMARY) {
                throw new IllegalStateException("memory server " + serverId + "'s replica " + endpoint + " is " + role + ", not primary");
            }
            for (String backupEndpoint : backups) {
                LocalReplicaRegion backup = fabric.replica(backupEndpoint);
                if (backup == null || backup.serverId != serverId) {
                    throw new IllegalStateException("no replica of memory server " + serverId + " at " + backupEndpoint + " on this local fabric");
                }
                replicas.add(backup);
                if (!this.backups.contains(backupEndpoint)) {
                    added.add(backup);
                }
            }
            gate.advance(next);
            view = next;
            this.backups = List.copyOf(backups);
        }
        // New to this primary's views: whatever such a backup says of itself (one dropped while alive still says complete),
        // it missed the changes of the views it was out of, and is copied again. Outside this replica's monitor: a backup
        // that becomes primary holds its own while it deposes this one.
        for (LocalReplicaRegion backup : added) {
            backup.becomeBackup(next);
        }
        synchronized (this) {
            if (view != next) {
                return; // a newer view came meanwhile, and started its own copies
            }
            for (LocalReplicaRegion backup : replicas) {
                startCopy(backup, next);
            }
        }
    }

    /** Copies to {@code backup} in {@code next} unless it is complete or a copy of this view runs; under this monitor. */
    private void startCopy(LocalReplicaRegion backup, long next) {
        if (backup.gone()) {
            return; // gone meanwhile: the next view leaves it out
        }
        String backupEndpoint = backup.endpoint;
        backup.primary = this;
        backup.sawView(next);
        Copy running = copies.get(backupEndpoint);
        if (running != null && running.thread().isAlive() && running.view() < next) {
            // A copy of an older view: the gate just moved under it, so its next verb is refused. Let it end, then
            // start again in this view (it is not tried again otherwise: the coordinator asks incomplete backups
            // nothing more).
            try {
                running.thread().join(TimeUnit.SECONDS.toMillis(2));
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        if (backup.complete || running != null && running.thread().isAlive()) {
            return;
        }
        long inView = next;
        long rate = fabric.copyRate();
        Thread copy = new Thread(() -> copyTo(backup, inView, rate), "dex-copy-" + serverId + "-to-" + backupEndpoint);
        copy.setDaemon(true);
        copies.put(backupEndpoint, new Copy(copy, inView));
        copy.start();
    }

    /** A copy to a backup: its thread, and the view it copies in. */
    private record Copy(Thread thread, long view) {
    }

    private void copyTo(LocalReplicaRegion backup, long inView, long bytesPerSecond) {
        long start = System.nanoTime();
        try (RemoteMemory from = fabric.replicaConnection(this, inView); RemoteMemory to = fabric.replicaConnection(backup, inView)) {
            LOG.info("memory server {}: copying {} MiB to the backup {} in view {}", serverId, region.length() >> 20, backup.endpoint, inView);
            new RegionCopier(from, to, serverId, bytesPerSecond).copy(region.length(), (bytes, total) -> backup.copyLeft = total - bytes);
            backup.copied(inView);
            LOG.info("memory server {}: the backup {} is complete ({} MiB in {} ms)", serverId, backup.endpoint, region.length() >> 20,
                    (System.nanoTime() - start) / 1_000_000);
        } catch (RuntimeException e) {
            LOG.warn("memory server {}: the copy to the backup {} failed ({}); it starts again at the group's next view", serverId,
                    backup.endpoint, e.getMessage());
        }
    }

    /** Its primary moved to {@code next} with it as a backup: its reported view follows (the coordinator matches it). */
    private void sawView(long next) {
        if (role == Role.BACKUP && view < next) {
            view = next;
        }
    }

    /**
     * The copy to this backup in {@code inView} is done: complete, if it is still a backup of that view or a later one,
     * and has been one since before the copy began. A copy that started before it last became a backup (it was dropped
     * and added again while a stalled copy still ran) misses the changes made while it was out, so it completes nothing.
     */
    synchronized void copied(long inView) {
        if (role == Role.BACKUP && view >= inView && inView >= backupSince && !gate.retired()) {
            complete = true;
            copyLeft = 0;
        }
    }

    /** The replica's memory node stopped: every verb on it fails from now on, and the fabric forgets it. */
    @Override
    public void close() {
        gate.retire("memory server " + serverId + "'s replica " + endpoint + " is gone (its memory node stopped)");
        fabric.forget(this);
    }

    /** Its memory node's own access to the region, as {@link LocalFabric#connectOwn} gives it. */
    @Override
    public dev.dex.rdma.RemoteMemory connectOwn() {
        return fabric.connectOwn(this);
    }
}
