package dev.dex.rdma.replica;

/**
 * Puts the convergences of one word onto one backup in one order, where every client of the backup shares a process
 * with it ({@code local}): a convergence reads the primary's word and swaps the backup's for it under the word's stripe
 * ({@link ReplicatedRemoteMemory}, docs/replication.md, "Known races").
 *
 * <p>Why: without an order, a convergence that stalls between its read of the primary and its swap on the backup can
 * install a word the primary no longer holds when the backup's word has come back to the value it expects (ABA: a lock
 * word is a tag, 0, the same tag again), and a failover before its next round promotes that stale word. Under the
 * stripe, the swaps onto a backup's word follow the order of their reads of the primary, so the backup's word only
 * ever moves to a value the primary held later than the one it holds; the change whose convergence ran last is there.
 *
 * <p>Concurrency: a fixed array of stripe monitors, chosen by the word's address; a convergence holds one for a read
 * of the primary and its swaps on the backup (one or two unless a write outside the order changes the word meanwhile,
 * bounded by the mirror timeout), and takes no other lock meanwhile but the gates' own read locks
 * (which no one holds while waiting for a stripe), so stripes cannot deadlock. Thread-safe and never changes.
 */
public final class WordOrder {
    private static final int STRIPES = 1024;
    private final Object[] stripes = new Object[STRIPES];

    public WordOrder() {
        for (int i = 0; i < STRIPES; i++) {
            stripes[i] = new Object();
        }
    }

    /** The monitor that orders the convergences of the word at {@code address}. */
    Object stripe(long address) {
        long word = address >>> 3;
        return stripes[(int) ((word ^ (word >>> 17)) & (STRIPES - 1))];
    }
}
