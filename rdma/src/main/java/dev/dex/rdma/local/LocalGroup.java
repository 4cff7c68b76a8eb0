package dev.dex.rdma.local;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.Region;
import dev.dex.rdma.RegionFormat;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.RegionCopier;
import dev.dex.rdma.replica.ReplicaSet;
import dev.dex.rdma.replica.ReplicatedRemoteMemory;
import dev.dex.rdma.replica.ViewGate;

/**
 * One memory server of a {@link LocalFabric} with replicas: its replicas' regions in this JVM, the group's view, and
 * the view changes a coordinator makes (a primary that dies, a backup that dies, a replica that is added and copied).
 * Every client connected to the server follows its views: a change moves the gates of the replicas it keeps first,
 * so that no verb of the old view runs on them any more, then installs the new view on every client.
 *
 * <p>Concurrency: view changes are serialised by this object's monitor; verbs never take it (they pass the replicas'
 * gates). The clients are a copy-on-write list.
 */
final class LocalGroup {
    private final int serverId;
    private final long regionLength;
    private final int chunkLength;
    private final long latencyNs;
    private final int segmentShift;
    private final List<ReplicatedRemoteMemory> clients = new CopyOnWriteArrayList<>();
    private long view = 1;
    private Member primary;
    private final List<Member> backups = new ArrayList<>();
    private int named;

    /** A replica: its region and its gate. */
    private final class Member {
        final String name = "server-" + serverId + "-replica-" + named++;
        final Region region = Region.offHeap(regionLength, segmentShift);
        final ViewGate gate = new ViewGate(serverId, name, view);
        /** The order its clients converge its words in ({@link dev.dex.rdma.replica.WordOrder}). */
        final dev.dex.rdma.replica.WordOrder words = new dev.dex.rdma.replica.WordOrder();
        ReplicaSet.State state = ReplicaSet.State.COMPLETE;
    }

    LocalGroup(int serverId, long regionLength, int chunkLength, int replicas, long latencyNs, int segmentShift) {
        this.serverId = serverId;
        this.regionLength = regionLength;
        this.chunkLength = chunkLength;
        this.latencyNs = latencyNs;
        this.segmentShift = segmentShift;
        primary = new Member();
        RegionFormat.format(primary.region, chunkLength);
        for (int r = 1; r < replicas; r++) {
            Member backup = new Member();
            copyHeader(backup);
            backups.add(backup);
        }
    }

    /** The primary's region (what the exporting side sees of the server). */
    synchronized Region primaryRegion() {
        return primary.region;
    }

    long regionLength() {
        return regionLength;
    }

    int chunkLength() {
        return chunkLength;
    }

    /** This server's replicas as a new client reaches them, in the current view. */
    synchronized ReplicaSet connectSet() {
        return set();
    }

    /** Has {@code client} follow this server's views from now on. */
    void follow(ReplicatedRemoteMemory client) {
        clients.add(client);
    }

    void unfollow(ReplicatedRemoteMemory client) {
        clients.remove(client);
    }

    synchronized String describe() {
        return set().toString();
    }

    /**
     * The primary dies: its verbs fail from now on, and the first complete backup becomes primary in a new view.
     *
     * @throws IllegalStateException when no complete backup is left (the server is lost; nothing changes)
     */
    synchronized void killPrimary() {
        Member next = backups.stream().filter(m -> m.state == ReplicaSet.State.COMPLETE).findFirst()
                .orElseThrow(() -> new IllegalStateException("memory server " + serverId + " has no complete backup to take over"));
        primary.gate.retire("memory server " + serverId + "'s replica " + primary.name + " is gone (its memory node died)");
        backups.remove(next);
        primary = next;
        // Every replica left refuses the old view: a client that missed the failover can neither read a replica that
        // may be behind nor bring an old primary's words to the new one.
        change(true);
    }

    /** The backup at {@code index} dies, or is dropped after it failed a change: the next view leaves it out. */
    synchronized void dropBackup(int index) {
        Member gone = backups.remove(index);
        gone.gate.retire("memory server " + serverId + "'s replica " + gone.name + " is gone (left out of the group)");
        change(false);
    }

    /**
     * Adds a replica and copies the region to it while clients keep writing: a view in which it takes every change
     * (copying), the copy, then a view in which it is complete.
     */
    void addReplica(long bytesPerSecond, RegionCopier.Progress progress) {
        Member added;
        RemoteMemory from;
        RemoteMemory to;
        synchronized (this) {
            added = new Member();
            added.state = ReplicaSet.State.COPYING;
            copyHeader(added);
            backups.add(added);
            // The primary refuses the old view: no client changes it from now on without the new replica, and the
            // changes of the old view that passed it are there before the copy reads it.
            change(false);
            from = connection(primary, view);
            to = connection(added, view);
        }
        try {
            new RegionCopier(from, to, serverId, bytesPerSecond).copy(regionLength, progress);
        } finally {
            from.close();
            to.close();
        }
        synchronized (this) {
            if (!backups.contains(added)) {
                throw new IllegalStateException("the replica " + added.name + " was dropped during its copy");
            }
            added.state = ReplicaSet.State.COMPLETE;
            change(false);
        }
    }

    /**
     * A new view: the primary refuses the old one from now on (with {@code backupsToo}, every backup as well), then every
     * client installs the new one. A view that keeps its primary leaves the backups' gates alone, so that a change the
     * primary took in the old view still reaches them.
     */
    private void change(boolean backupsToo) {
        view++;
        primary.gate.advance(view);
        if (backupsToo) {
            backups.forEach(backup -> backup.gate.advance(view));
        }
        for (ReplicatedRemoteMemory client : clients) {
            client.install(serverId, set());
        }
    }

    private ReplicaSet set() {
        List<ReplicaSet.Replica> replicas = new ArrayList<>();
        for (Member backup : backups) {
            replicas.add(new ReplicaSet.Replica(backup.name, connection(backup, view), backup.state, backup.words));
        }
        return new ReplicaSet(view, new ReplicaSet.Replica(primary.name, connection(primary, view), ReplicaSet.State.COMPLETE,
                primary.words), replicas);
    }

    private RemoteMemory connection(Member member, long inView) {
        return LocalFabric.gated(serverId, member.region, member.gate, inView, latencyNs);
    }

    /** A new replica gets the primary's header, so that its connections find a formatted region; the copy redoes it. */
    private void copyHeader(Member to) {
        UnsafeBuffer header = new UnsafeBuffer(new byte[chunkLength]);
        primary.region.getBytes(0, header, 0, chunkLength);
        to.region.putBytes(0, header, 0, chunkLength);
    }

    /** The regions of every replica, primary first (for tests that compare them). */
    synchronized List<Region> regions() {
        List<Region> all = new ArrayList<>();
        all.add(primary.region);
        backups.forEach(b -> all.add(b.region));
        return all;
    }
}
