package dev.dex.rdma.replica;

import java.util.List;
import java.util.Map;

import dev.dex.rdma.ExportedRegion;

/**
 * One replica of a memory server whose compute nodes write every replica themselves (docs/replication.md, "The
 * compute-side write path"), as its memory node exports it: the part the cluster's replica coordinator gives it, and
 * what it reports of its group. {@code local} replicas share a JVM and know their peers' state for certain;
 * {@code disni} replicas live on different hosts and learn it from their beats, so their reports are suspicions.
 *
 * <p>Concurrency: implementations are thread-safe; the queries never wait for a part to change.
 */
public interface GroupReplica extends ExportedRegion {
    /** The replica's part: none yet, primary or backup. */
    enum Role { SOLE, PRIMARY, BACKUP }

    Role role();

    /** Whether it is gone: its memory node stopped, and every verb on it fails from then on. */
    boolean gone();

    /** The newest view it took a part in. */
    long view();

    /** Whether it holds the whole server: a primary, or a backup whose copy is done. */
    boolean complete();

    /** Bytes of the copy to it not written yet. */
    long copyLeft();

    /** A complete backup's: why it thinks its primary is lost, for the coordinator to fail over; null otherwise. */
    String primaryLost();

    /** Whether {@link #primaryLost} names a primary that is gone for certain (it refuses every verb for good). */
    boolean primaryRetired();

    /** A primary's: the backups of its view it thinks lost, by endpoint, with why; empty otherwise. */
    Map<String, String> lostBackups();

    /** Whether the backups {@link #lostBackups} names are gone for certain, so the coordinator need not ask their nodes. */
    boolean backupLossCertain();

    /**
     * Serves clients as the primary of {@code next}: from now on it refuses verbs of older views.
     *
     * @throws IllegalStateException when it is a backup whose copy is not done
     */
    void becomePrimary(long next);

    /** Joins {@code next} as a backup: compute nodes write it from now on, and the primary copies its region to it. */
    void becomeBackup(long next);

    /**
     * As the primary, moves to {@code next} with {@code backups} (their endpoints), and copies its region to every backup
     * that is not complete.
     *
     * @throws IllegalStateException when it is not the primary, or a backup is not a replica of this server
     */
    void installView(long next, List<String> backups);

    /** Its memory node's own access to the region (chunk grants, the tree's format): no key, no view. */
    dev.dex.rdma.RemoteMemory connectOwn();
}
