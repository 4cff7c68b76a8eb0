package dev.dex.rdma.replica;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;

/**
 * Brings the backups of a replica group to the primary's word after a client's atomic or word's write there
 * ({@link ReplicatedRemoteMemory}, docs/replication.md). Three ways, by what the replicas offer:
 * <ul>
 *   <li><b>Stamped</b> ({@link StampedWords}, {@code disni}): the primary stamped the change; each backup stores it only
 *       if its stamp is later than the word's last. One message per backup, no read of the primary after it, and a
 *       convergence that stalls can never move a backup back.</li>
 *   <li><b>In order</b> ({@link WordOrder}, {@code local}): under the word's stripe, one read of the primary and a swap
 *       on the backup.</li>
 *   <li><b>Unordered</b> (neither): swaps the backup's word toward the primary's until a read of the primary after the
 *       swap agrees; a stalled round can move a backup back when a value comes back (race 2), until its next round.</li>
 * </ul>
 * A backup that fails is reported, and the change then waits for views in which every replica holds it
 * ({@link ViewWaits#awaitViewWithout}).
 *
 * <p>Concurrency: thread-safe; the scratch word is per thread, and the rest never changes.
 */
final class Convergence {
    /** Reports a backup that failed a change; returns the failure the change throws if no view without it comes. */
    @FunctionalInterface
    interface BackupFailed {
        FabricException failed(ReplicaSet set, long address, ReplicaSet.Replica backup, String what, FabricException cause);
    }

    private final ThreadLocal<UnsafeBuffer> mirrorWord = ThreadLocal.withInitial(() -> new UnsafeBuffer(new byte[Long.BYTES]));
    private final long mirrorTimeoutNanos;
    private final long failoverWaitNanos;
    private final ViewWaits waits;
    private final ViewHistory[] installed;
    private final BackupFailed backupFailed;

    Convergence(long mirrorTimeoutNanos, long failoverWaitNanos, ViewWaits waits, ViewHistory[] installed, BackupFailed backupFailed) {
        this.mirrorTimeoutNanos = mirrorTimeoutNanos;
        this.failoverWaitNanos = failoverWaitNanos;
        this.waits = waits;
        this.installed = installed;
        this.backupFailed = backupFailed;
    }

    /**
     * Converges a change the primary stamped ({@code stampView}, {@code stampSeq}) that left {@code value} in the word:
     * each backup stores it unless it holds a later change. A backup that moved to a newer view while the primary kept
     * its role (a replica added or dropped) is sent the stamp again in that view: a stamp means the same in every view.
     * A backup that takes no stamps (a stand-in for one that cannot be reached) is converged unordered, from
     * {@code before}.
     */
    void stamped(ReplicaSet set, long address, long before, long value, long stampView, long stampSeq, String what) {
        Failed failed = null;
        for (ReplicaSet.Replica backup : set.backups()) {
            try {
                if (backup.memory() instanceof StampedWords words) {
                    words.setIfNewer(address, value, stampView, stampSeq);
                } else {
                    unordered(set, backup, address, before, value);
                }
            } catch (StaleViewException | PrimaryFailed e) {
                // A backup in a newer view, or the primary's (a stand-in's convergence reads it): if the primary kept
                // its role (a replica added or dropped), the stamp holds in that view too, and is sent again there.
                FabricException failure = e instanceof PrimaryFailed primary ? primary.failure : (StaleViewException) e;
                ReplicaSet next = failure instanceof StaleViewException newer ? keptPrimaryIn(set, address, newer) : null;
                if (next != null) {
                    stamped(next, address, before, value, stampView, stampSeq, what);
                    return;
                }
                // Another replica may have been primary since, or the primary failed. The change ran at the primary,
                // so this is no refusal (which would say nothing changed): its outcome is unknown.
                throw new FabricException("memory server " + GlobalAddress.serverId(address) + ": " + what + " ran at the primary"
                        + " of view " + set.view() + ", and its convergence failed (" + failure.getMessage() + "); its outcome"
                        + " is unknown", failure);
            } catch (FabricException e) {
                failed = failed(failed, set, address, backup, what, e);
            }
        }
        awaitViewWithout(failed, set, address);
    }

    /**
     * Brings every backup of {@code set} to the primary's value of the word at {@code address} after this client's change
     * of it. With the backup's {@link WordOrder}, in one turn under the word's stripe ({@link #inOrder}). Without one:
     * swaps the backup's word from the value before the change to the value after, and while a read of the primary then
     * disagrees, from what the backup holds to what the primary holds; the change counts once a read of the primary
     * after the backup's last swap agrees with the backup. Either way a later change of the word is converged by its
     * own client after it reached the primary, so at rest every backup holds the primary's word, and a client that died
     * between the primary and its convergence holds nobody up (the next change of the word brings its backups along).
     * A primary that moved to a newer view keeping its role (a replica added or dropped) has the convergence go on in
     * that view.
     */
    void converge(ReplicaSet set, long address, long before, long after, String what) {
        UnsafeBuffer word = mirrorWord.get();
        Failed failed = null;
        for (ReplicaSet.Replica backup : set.backups()) {
            try {
                if (backup.words() != null) {
                    inOrder(set, backup, address, before, word);
                    continue;
                }
                unordered(set, backup, address, before, after);
            } catch (PrimaryFailed e) {
                // The primary moved to a newer view (a replica added or dropped) after this change passed its gate:
                // converge again in that view, as long as it keeps the primary.
                ReplicaSet next = e.failure instanceof StaleViewException newer ? keptPrimaryIn(set, address, newer) : null;
                if (next != null) {
                    converge(next, address, before, after, what);
                    return;
                }
                throw e.failure; // the primary's failure, not the backup's: the failover handles it; the outcome is unknown
            } catch (FabricException e) {
                failed = failed(failed, set, address, backup, what, e);
            }
        }
        awaitViewWithout(failed, set, address);
    }

    /**
     * The next view installed after {@code newer} refused a convergence in {@code set}'s, if every view up to it kept
     * {@code set}'s primary; null if another replica may have been primary meanwhile (the change's outcome is unknown).
     */
    private ReplicaSet keptPrimaryIn(ReplicaSet set, long address, StaleViewException newer) {
        ReplicaSet next = waits.next(set, address, newer);
        return installed[GlobalAddress.serverId(address)].keptPrimary(set, next) ? next : null;
    }

    /** The backups that failed a change, and the failure the change throws if no view without them comes. */
    private record Failed(List<String> backups, FabricException failure) {
    }

    /** Reports {@code backup}'s failure of a change and adds it to {@code failed} (null: none yet). */
    private Failed failed(Failed failed, ReplicaSet set, long address, ReplicaSet.Replica backup, String what, FabricException cause) {
        FabricException failure = backupFailed.failed(set, address, backup, what, cause);
        List<String> backups = failed == null ? new ArrayList<>() : failed.backups();
        backups.add(backup.name());
        return new Failed(backups, failure);
    }

    /** Once backups failed a change: waits for views in which every replica holds it, or throws its failure. */
    private void awaitViewWithout(Failed failed, ReplicaSet set, long address) {
        if (failed != null) {
            waits.awaitViewWithout(set, address, failed.backups(), failed.failure(), System.nanoTime() + failoverWaitNanos);
        }
    }

    /** The primary failed a read of a convergence: carried past the backup's failure handling, never reported as it. */
    private static final class PrimaryFailed extends RuntimeException {
        final FabricException failure;

        PrimaryFailed(FabricException failure) {
            super(failure.getMessage(), failure, false, false);
            this.failure = failure;
        }
    }

    private static long primaryWord(ReplicaSet set, long address, UnsafeBuffer word) {
        try {
            set.primary().memory().read(address, word, 0, Long.BYTES);
        } catch (FabricException e) {
            throw new PrimaryFailed(e);
        }
        return word.getLong(0, java.nio.ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * {@link #mirror} onto a backup whose clients all share its {@link WordOrder}: under the word's stripe, reads the
     * primary's word and swaps the backup's for it. The swaps onto the backup's word then follow the order of their reads
     * of the primary, so the word never moves back, and this change, read at the primary after it took effect, is on the
     * backup when this returns (or a later one, brought by a convergence ordered after this one). No read of the primary
     * follows the swap: a change the primary takes meanwhile is converged by its own client, after this.
     */
    private void inOrder(ReplicaSet set, ReplicaSet.Replica backup, long address, long before, UnsafeBuffer word) {
        synchronized (backup.words().stripe(address)) {
            long deadline = System.nanoTime() + mirrorTimeoutNanos; // from the turn on: waiting for it is not chasing
            long onPrimary = primaryWord(set, address, word);
            long onBackup = before;
            for (int attempt = 1; ; attempt++) {
                long found = backup.memory().compareAndSwap(address, onBackup, onPrimary);
                if (found == onBackup || found == onPrimary) {
                    return;
                }
                // Another writer of the word on the backup outside the order: a holder writing its locked node's image
                // (the same word as the primary's, or one about to be), or a copy's piece. Swap from what is there.
                onBackup = found;
                if (System.nanoTime() - deadline > 0) {
                    throw new FabricException("the word at " + GlobalAddress.toString(address) + " kept changing on the backup for "
                            + TimeUnit.NANOSECONDS.toMillis(mirrorTimeoutNanos) + " ms while it was brought to the primary's");
                }
                if (attempt > 16) {
                    LockSupport.parkNanos(10_000);
                }
            }
        }
    }

    /**
     * Unordered: swaps {@code backup}'s word from the value before the change to the value after, and while a read of the
     * primary then disagrees, from what the backup holds to what the primary holds, until a read of the primary after
     * the backup's last swap agrees with it.
     *
     * @throws PrimaryFailed when a read of the primary fails
     */
    private void unordered(ReplicaSet set, ReplicaSet.Replica backup, long address, long before, long after) {
        UnsafeBuffer word = mirrorWord.get();
        long deadline = System.nanoTime() + mirrorTimeoutNanos;
        long onBackup = before;
        long onPrimary = after;
        for (int attempt = 1; ; attempt++) {
            long found = backup.memory().compareAndSwap(address, onBackup, onPrimary);
            if (found == onBackup) {
                onBackup = onPrimary; // swapped in
            } else {
                onBackup = found;
            }
            onPrimary = primaryWord(set, address, word);
            if (onBackup == onPrimary) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new FabricException("the word at " + GlobalAddress.toString(address) + " kept changing on the primary for "
                        + TimeUnit.NANOSECONDS.toMillis(mirrorTimeoutNanos) + " ms while it was brought to the backup");
            }
            if (attempt > 16) {
                LockSupport.parkNanos(10_000);
            }
        }
    }
}
