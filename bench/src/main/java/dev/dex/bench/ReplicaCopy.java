package dev.dex.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * The backups of {@code bench --replicas R} (docs/replication.md): each memory server's region is exported on R-1
 * fabrics of their own (own event loops, as on other hosts) and made a backup; {@link #start} makes the bench's regions
 * their primaries, which copy their whole region to them while serving (re-replication). Without
 * {@code --copy-under-load} the bench starts and awaits the copy before the load; with it, a third of the way into the
 * measured run.
 *
 * <p>Concurrency: {@link #start} once, from any one thread; {@link #complete} from any thread.
 */
final class ReplicaCopy {
    private final TcpFabric primaries;
    private final List<ExportedRegion> exported;
    private final List<TcpFabric> backups;
    private final List<List<String>> endpoints = new ArrayList<>();
    private final long regionBytes;

    ReplicaCopy(TcpFabric primaries, List<ExportedRegion> exported, List<TcpFabric> backups, long region, int chunk) {
        this.primaries = primaries;
        this.exported = List.copyOf(exported);
        this.backups = List.copyOf(backups);
        this.regionBytes = region;
        for (ExportedRegion primary : exported) {
            List<String> serverBackups = new ArrayList<>();
            for (TcpFabric backup : backups) {
                serverBackups.add(backup.export(primary.serverId(), region, chunk).endpoint());
                backup.becomeBackup(primary.serverId(), 1);
            }
            endpoints.add(serverBackups);
        }
    }

    /** The fabrics of the backups, to close after their primaries. */
    List<TcpFabric> backups() {
        return backups;
    }

    /** Bytes the copy sends: every region to each of its backups. */
    long bytes() {
        return regionBytes * exported.size() * backups.size();
    }

    /** Makes every exported region primary of view 1 with its backups: each copy starts. */
    void start() {
        for (int i = 0; i < exported.size(); i++) {
            primaries.becomePrimary(exported.get(i).serverId(), 1, endpoints.get(i));
        }
    }

    /** Whether every backup holds its primary's stream (its copy is done). */
    boolean complete() {
        for (TcpFabric backup : backups) {
            for (ExportedRegion primary : exported) {
                if (!backup.replicaStatus(primary.serverId()).complete()) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Waits until {@link #complete}; throws {@link IllegalStateException} after {@code minutes}. */
    void await(long minutes) {
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(minutes);
        while (!complete()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the backups were not copied within " + minutes + " minutes");
            }
            try {
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while the backups were copied", e);
            }
        }
    }
}
