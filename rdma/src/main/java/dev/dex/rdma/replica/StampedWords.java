package dev.dex.rdma.replica;

/**
 * A replica connection whose memory node stamps each change of a word ({@code disni}: its memory node runs every atomic
 * and word's write of a replica group, docs/replication.md, "Known races", race 2). A change at the primary returns its
 * stamp (the primary's view, then a sequence per word that grows in the order the changes took effect), and a backup
 * stores a converged word only if its stamp is later than the last it stored there. So the convergences of one word may
 * land in any order, and a stalled one can never move a backup's word back: a replica group's clients need no common
 * process, as {@link WordOrder} does.
 *
 * <p>A stamp is two longs, view and sequence; 0, 0 for a change that changed nothing.
 */
public interface StampedWords {
    /** A compare-and-swap at the primary; {@code stamp} gets its stamp. Returns the word found. */
    long compareAndSwap(long address, long expected, long desired, long[] stamp);

    /** A fetch-and-add at the primary; {@code stamp} gets its stamp. Returns the word before. */
    long fetchAndAdd(long address, long delta, long[] stamp);

    /** A word's write at the primary, stamped even when it stores the value it found; {@code stamp} gets its stamp. */
    void writeWord(long address, long value, long[] stamp);

    /**
     * Stores {@code value} in this backup's word at {@code address} if the stamp is later than the last stored there.
     *
     * @return whether it was stored (false: the word holds a later change, or the backup's copy carried this one)
     */
    boolean setIfNewer(long address, long value, long stampView, long stampSeq);
}
