package dev.dex.rdma.replica;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.FabricException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;

/**
 * Copies a memory server's region from its primary to a new replica while clients go on changing it (re-replication on
 * the compute-side write path, docs/replication.md). Before the copy starts, every client must send its changes to the
 * new replica as well (a view that has it as a {@link ReplicaSet.State#COPYING} backup, with the primary's gate moved to
 * that view so that no client still changes the primary alone).
 *
 * <p>Each piece is read from the primary, written to the new replica and read from the primary again; when the two
 * reads differ, the second is written and the primary read again, until two reads agree. Why that leaves no change
 * behind: a client writes the primary before the new replica. A change the copy's second read does not see reaches
 * the primary after that read, so its write to the new replica comes after the copy's write of the piece, and wins. A
 * change the second read sees was either seen by the first too (and written by the copy, in the same value as the
 * client's own write to the new replica), or makes the two reads differ and the piece go again. Atomics (and a word's
 * write) are converged by compare-and-swap toward the primary's word: on a piece not yet copied that may install the
 * primary's word ahead of the copy, which the copy's own reads of the primary then agree with or overwrite with a
 * later value; on a piece copied it applies in the primary's order.
 *
 * <p>Not thread-safe: one copy per instance; the connections it is given may be shared.
 */
public final class RegionCopier {
    /** Told of the copy's progress after every piece. */
    @FunctionalInterface
    public interface Progress {
        void copied(long bytes, long total);
    }

    /** Bytes per piece. */
    public static final int DEFAULT_PIECE = 16 * 1024;
    /** How long one piece may take by default before the copy fails. */
    public static final Duration DEFAULT_PIECE_DEADLINE = Duration.ofSeconds(10);

    private final RemoteMemory primary;
    private final RemoteMemory replica;
    private final int serverId;
    private final int piece;
    private final long bytesPerSecond;
    private final long pieceDeadlineNanos;
    private long retries;

    /** A copier of {@link #DEFAULT_PIECE} pieces, each within {@link #DEFAULT_PIECE_DEADLINE}. */
    public RegionCopier(RemoteMemory primary, RemoteMemory replica, int serverId, long bytesPerSecond) {
        this(primary, replica, serverId, DEFAULT_PIECE, bytesPerSecond, DEFAULT_PIECE_DEADLINE);
    }

    /**
     * @param primary        a connection to the primary
     * @param replica        a connection to the new replica
     * @param serverId       the memory server both hold
     * @param piece          bytes copied per read-write-read
     * @param bytesPerSecond the copy's rate at most, 0 for no limit
     * @param pieceDeadline  how long one piece may take before the copy fails (a piece changed faster than it copies)
     */
    public RegionCopier(RemoteMemory primary, RemoteMemory replica, int serverId, int piece, long bytesPerSecond, Duration pieceDeadline) {
        if (piece < 8 || piece % 8 != 0) {
            throw new IllegalArgumentException("a piece must be a positive multiple of 8 bytes: " + piece);
        }
        if (bytesPerSecond < 0) {
            throw new IllegalArgumentException("the copy rate must be >= 0 bytes per second: " + bytesPerSecond);
        }
        this.primary = primary;
        this.replica = replica;
        this.serverId = serverId;
        this.piece = piece;
        this.bytesPerSecond = bytesPerSecond;
        this.pieceDeadlineNanos = pieceDeadline.toNanos();
    }

    /**
     * Copies the first {@code length} bytes of the region.
     *
     * @throws FabricException when a verb fails, or a piece did not settle within the piece deadline
     */
    public void copy(long length, Progress progress) {
        UnsafeBuffer first = new UnsafeBuffer(new byte[piece]);
        UnsafeBuffer second = new UnsafeBuffer(new byte[piece]);
        long start = System.nanoTime();
        for (long offset = 0; offset < length; offset += piece) {
            int n = (int) Math.min(piece, length - offset);
            copyPiece(GlobalAddress.of(serverId, offset), n, first, second);
            long copied = offset + n;
            progress.copied(copied, length);
            if (bytesPerSecond > 0) {
                long due = start + (long) (copied * 1e9 / bytesPerSecond);
                for (long wait; (wait = due - System.nanoTime()) > 0; ) {
                    LockSupport.parkNanos(wait);
                }
            }
        }
    }

    private void copyPiece(long address, int n, UnsafeBuffer first, UnsafeBuffer second) {
        long deadline = System.nanoTime() + pieceDeadlineNanos;
        primary.read(address, first, 0, n);
        for (int attempt = 1; ; attempt++) {
            replica.write(address, first, 0, n);
            primary.read(address, second, 0, n);
            if (equal(first, second, n)) {
                return;
            }
            retries++;
            if (System.nanoTime() - deadline > 0) {
                throw new FabricException("the copy of memory server " + serverId + "'s piece at " + GlobalAddress.toString(address)
                        + " did not settle within " + TimeUnit.NANOSECONDS.toMillis(pieceDeadlineNanos) + " ms: it changes faster than"
                        + " it copies");
            }
            first.putBytes(0, second, 0, n);
            if (attempt % 16 == 0) {
                Thread.onSpinWait();
            }
        }
    }

    private static boolean equal(UnsafeBuffer a, UnsafeBuffer b, int n) {
        int words = n & ~7;
        for (int i = 0; i < words; i += 8) {
            if (a.getLong(i) != b.getLong(i)) {
                return false;
            }
        }
        for (int i = words; i < n; i++) {
            if (a.getByte(i) != b.getByte(i)) {
                return false;
            }
        }
        return true;
    }

    /** Pieces written again because the primary changed under the copy. */
    public long retries() {
        return retries;
    }
}
