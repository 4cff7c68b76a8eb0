package dev.dex.rdma.tcp;

import java.util.List;

/**
 * What one replica of a memory server says of itself (docs/replication.md).
 *
 * @param role      {@link Role}
 * @param view      the newest view this replica took part in
 * @param streamId  the identity of the stream it applies or orders (0: none yet)
 * @param applied   the number of the last change in its region
 * @param committed a primary's: the highest number every gating backup acknowledged; a backup's: {@code applied}
 * @param complete  a backup's: it holds the stream's prefix up to {@code applied} (its copy, if any, is done);
 *                  a primary's: true
 * @param copyLeft  a backup's: bytes of its copy not received yet (0 when none runs)
 * @param backups   a primary's: its backups as it sees them; empty otherwise
 * @param primaryLost a complete backup's: why it thinks its primary is gone (the stream's connection closed, or it was
 *                  silent longer than {@link ReplicaSettings#suspectAfter}); null while the stream is live, and for
 *                  every other replica
 * @param regionId  the identity of the region this replica serves, the same across restarts of its memory node on a kept
 *                  region (0: none recorded)
 * @param freshRegion its region was formatted by this run of its memory node (or lives in its process): it holds an
 *                  empty index, not an older state of its server
 * @param kept      a replica that has taken no part since its memory node started: what its kept region held when
 *                  it last had one ({@link ReplicaFile}), or null when it held nothing its group may serve from
 */
public record ReplicaStatus(int serverId, Role role, long view, long streamId, long applied, long committed, boolean complete,
                            long copyLeft, List<Backup> backups, String primaryLost, long regionId, boolean freshRegion,
                            Kept kept) {

    /** A status without a region identity or a kept part (tests, and fabrics without replica groups). */
    public ReplicaStatus(int serverId, Role role, long view, long streamId, long applied, long committed, boolean complete,
                         long copyLeft, List<Backup> backups, String primaryLost) {
        this(serverId, role, view, streamId, applied, committed, complete, copyLeft, backups, primaryLost, 0, true, null);
    }

    /**
     * What a kept region held when its memory node last ran: every change its group answered in {@code view}, as that
     * view's {@code role} ({@link Role#PRIMARY} or a complete {@link Role#BACKUP}).
     */
    public record Kept(Role role, long view) {
    }

    public enum Role {
        /** Not in a replica group: the only copy of its server, as with {@code dex.memory.replicas = 1}. */
        SOLE,
        /** Serves clients and orders the stream its backups apply. */
        PRIMARY,
        /** Applies its primary's stream and refuses clients. */
        BACKUP,
        /** Was primary and learnt that a newer view replaced it: serves nothing, and must be copied anew to serve again. */
        DEMOTED
    }

    /**
     * One backup as its primary sees it.
     *
     * @param acked    the last change it acknowledged
     * @param gating   its acknowledgements hold the primary's answers back
     * @param complete it holds every change the primary answered (it may become primary)
     * @param copyLeft bytes of its copy not acknowledged yet
     * @param broken   why its link is gone, or null
     */
    public record Backup(String endpoint, long acked, boolean gating, boolean complete, long copyLeft, String broken) {
    }
}
