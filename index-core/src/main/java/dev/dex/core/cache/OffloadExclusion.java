package dev.dex.core.cache;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReferenceArray;

import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeView;

/**
 * What lets an offloaded write go in one message ({@code docs/offloading.md}): the compute node never sends a write
 * into a subtree it may hold a newer image of, and holds off caching anything in a subtree while a write into it is
 * out.
 *
 * <p>When the missed node A is not cached, path-aware caching keeps every cached frame below A reachable only
 * through A, with two exceptions, which this class keeps track of as <em>escapes</em>: a frame with no cached
 * parent (an orphan: its parent's split moved it to a sibling that is not cached, a refresh of a stale shared node
 * dropped it, or it was reheated or admitted below an uncached image) and a frame whose cached parent is shared
 * (another compute node may have split that parent, so the frame may now hang below a node that is owned here and
 * not cached). A descent that steps from a shared node into a node below it also enters an escape for the rest of
 * its operation, since the shared image it followed may be stale. A frame does not become an escape by cooling:
 * cooling frames are clean (written back when cooled) and reachable only through a cached parent, and the offloader
 * drops the cooling copy of the leaf a write changed (a frame that is an escape stays one until it is evicted).
 * Operations that went below the missed node before the write entered (through it while it was cached, holding
 * uncached images) are kept out another way: each session publishes the key it descends to, and the offloader does
 * not send a write into a range that holds another operation's key ({@code PublishedKey}).
 *
 * <p>Everything is kept by key range and level. A node below A lies at a lower level, and its low fence lies in
 * A's range (a node keeps its low fence when it splits, and so does the leaf a merge widens, docs/merges.md; a merge
 * runs while its partition is paused, with no operation and no escape in it), so an escape conflicts with a
 * write at A when its level is lower and its low fence lies in {@code [low(A), high(A))}. Only nodes below the
 * offloading level M matter (a write starts at level M or lower), so escapes at level M and above are not kept.
 *
 * <pre>
 * Concurrency: entering or leaving an escape takes no lock and waits for nothing, so that the descents and
 * admissions of every operation pay a few atomic accesses while no write is in flight (the usual case: the cost
 * model offloads few operations). The rule: of an escape (but an orphan, which never gives way, see
 * {@link #enterOrphan}) and a write that conflict, at least one sees the other and gives way (the write falls back,
 * the descent restarts, the frame is not used); both may, so a refusal on either side can be needless. Each side publishes itself with a volatile-mode store or read-modify-write
 * (AtomicReferenceArray, VarHandle), then reads the other side with volatile-mode reads; these are all in one
 * total order consistent with each thread's program order, so of two such threads at least one reads after both
 * published (Dekker's argument):
 *   escape: store its range in its slot (a descent: a slot of its session; a frame: frames[f], then the frame's
 *           bit in frameBits);  read writes;  withdraw if a write covers it
 *   write:  store a new writes array;  read every session's slots and every frame whose bit is set;  withdraw if
 *           an escape conflicts
 * Writes are rare: they begin under writeLock, which keeps two overlapping writes apart, serializes the copies of
 * the writes array and is the only place where a frame's bit is cleared (a write that finds a set bit over a frame
 * with no escape clears it, then reads the frame again: an escape entered meanwhile stored its range before its
 * bit, so it is seen then, and the write sets the bit again, or its bit is set after the clear). Leaving an escape
 * never clears a bit, so a frame's escape has its bit from the moment its entry returned, but for a moment inside a
 * write's scan that then sets it again ({@link #escapeWithoutBit} is exact at rest).
 *
 * A descent's slots are written only by its session's thread (leaving with a release store: seen late, it only
 * makes a write give way needlessly). A frame's entry is set by compare-and-set from null by an admission, which
 * the caller does under the frame's lock, and is withdrawn by compare-and-set too, so an orphan's entry (stored over
 * whatever is there: it is the same node, and it is entered whatever is in flight, see {@link #enterOrphan}) is
 * never withdrawn by an admission. An admission that finds an entry returns at once without reading the writes:
 * under the frame's lock, that entry is not withdrawn meanwhile. A frame's escape is left when the frame is evicted or dropped; a descent's and a
 * write's when their operation ends or restarts ({@link Markers#releaseAll}).
 * </pre>
 */
final class OffloadExclusion {
    /** One range at one level: a write in flight, or an escape of a frame or of a descent. */
    static final class Range {
        /** The node's fences: its own copies of the words. */
        final long[] low;
        final long[] high;
        final int level;
        final boolean write;
        /** A descent's session and slot; null and -1 otherwise. */
        final Descents session;
        final int slot;

        Range(long[] low, long[] high, int level, boolean write) {
            this(low, high, level, write, null, -1);
        }

        private Range(long[] low, long[] high, int level, boolean write, Descents session, int slot) {
            this.low = low;
            this.high = high;
            this.level = level;
            this.write = write;
            this.session = session;
            this.slot = slot;
        }
    }

    /**
     * The slots of one session's descent escapes ({@link #descents()}): written only by the session's thread, read by
     * writes.
     */
    static final class Descents {
        private volatile AtomicReferenceArray<Range> slots = new AtomicReferenceArray<>(8);
    }

    private static final Range[] NO_WRITES = new Range[0];

    private final int subtreeLevel;
    /** The width of the keys, which orders the fences. */
    private final KeyFormat keys;
    /** The escape of each frame that has one. */
    private final AtomicReferenceArray<Range> frames;
    /**
     * One bit per frame, set at least while it has an escape (it may stay set after, until a write clears it): what a
     * write reads to find them (through {@link #BITS}).
     */
    private final long[] frameBits;
    private static final VarHandle BITS = MethodHandles.arrayElementVarHandle(long[].class);
    /** The sessions' descent slots. */
    private final List<Descents> sessions = new CopyOnWriteArrayList<>();
    /** The writes in flight: replaced whole under {@link #writeLock}, read without it. */
    private volatile Range[] writes = NO_WRITES;
    private final Object writeLock = new Object();

    /**
     * @param subtreeLevel the offloading level M; 0 for an engine that never offloads, which keeps nothing and
     *                     whose calls return at once
     */
    OffloadExclusion(int frames, int subtreeLevel, KeyFormat keys) {
        this.frames = new AtomicReferenceArray<>(Math.max(1, frames));
        this.frameBits = new long[(Math.max(1, frames) + 63) >>> 6];
        this.subtreeLevel = subtreeLevel;
        this.keys = keys;
    }

    /** Whether a node at {@code level} can ever lie below a node an offloaded write starts at. */
    boolean matters(int level) {
        return level < subtreeLevel;
    }

    /** The descent slots of a new session, which {@link #forget} drops when the session closes. */
    Descents descents() {
        Descents session = new Descents();
        sessions.add(session);
        return session;
    }

    /** Drops a closed session's slots (it holds no escape any more). */
    void forget(Descents session) {
        sessions.remove(session);
    }

    /**
     * Enters an offloaded write into the node {@code (low, high]} at {@code level}; null when it conflicts with an
     * escape below it or with another write in flight (then the caller falls back to its caching path).
     */
    Range beginWrite(long[] low, long[] high, int level) {
        Range w = new Range(low.clone(), high.clone(), level, true);
        synchronized (writeLock) {
            Range[] current = writes;
            for (Range other : current) {
                if (overlap(other.low, other.high, low, high)) {
                    return null;
                }
            }
            Range[] more = Arrays.copyOf(current, current.length + 1);
            more[current.length] = w;
            writes = more; // published before the escapes are read (the class comment)
            if (conflictsWithEscape(low, high, level)) {
                writes = current;
                return null;
            }
        }
        return w;
    }

    /**
     * Whether an escape below {@code level} has its low fence in {@code [low, high)}. Under {@link #writeLock}: it also
     * clears the bits of frames that have no escape any more, the only place where a bit is cleared.
     */
    private boolean conflictsWithEscape(long[] low, long[] high, int level) {
        for (Descents session : sessions) {
            AtomicReferenceArray<Range> slots = session.slots;
            for (int i = 0; i < slots.length(); i++) {
                Range e = slots.get(i);
                if (e != null && below(e, low, high, level)) {
                    return true;
                }
            }
        }
        for (int w = 0; w < frameBits.length; w++) {
            long bits = (long) BITS.getVolatile(frameBits, w);
            while (bits != 0) {
                int frame = (w << 6) + Long.numberOfTrailingZeros(bits);
                bits &= bits - 1;
                Range e = frames.get(frame);
                if (e == null) {
                    // Left: clear its bit, then look again. An escape entered meanwhile stored its range before it
                    // set the bit, so either it is seen here, or its bit is set after this clear.
                    BITS.getAndBitwiseAnd(frameBits, w, ~(1L << frame));
                    e = frames.get(frame);
                    if (e != null) {
                        setBit(frame);
                    }
                }
                if (e != null && below(e, low, high, level)) {
                    return true;
                }
            }
        }
        return false;
    }

    private boolean below(Range e, long[] low, long[] high, int level) {
        return e.level < level && compare(e.low, low) >= 0 && compare(e.low, high) < 0;
    }

    void endWrite(Range write) {
        synchronized (writeLock) {
            Range[] current = writes;
            for (int i = 0; i < current.length; i++) {
                if (current[i] == write) {
                    Range[] fewer = new Range[current.length - 1];
                    System.arraycopy(current, 0, fewer, 0, i);
                    System.arraycopy(current, i + 1, fewer, i, current.length - i - 1);
                    writes = fewer.length == 0 ? NO_WRITES : fewer;
                    return;
                }
            }
        }
    }

    /**
     * Enters an escape of {@code session} for the node {@code (low, high]} at {@code level} for one operation (a
     * descent stepped from a shared node into it); null, entering nothing, when a write in flight covers it. Called
     * by the session's own thread.
     */
    Range enterDescent(Descents session, long[] low, long[] high, int level) {
        if (!matters(level)) {
            return NOTHING;
        }
        AtomicReferenceArray<Range> slots = session.slots;
        int slot = 0;
        while (slot < slots.length() && slots.getPlain(slot) != null) {
            slot++;
        }
        if (slot == slots.length()) { // more descents in one operation than ever before: a larger array, same entries
            AtomicReferenceArray<Range> larger = new AtomicReferenceArray<>(slots.length() * 2);
            for (int i = 0; i < slots.length(); i++) {
                larger.setPlain(i, slots.getPlain(i)); // published by the volatile field below
            }
            session.slots = larger;
            slots = larger;
        }
        Range e = new Range(low.clone(), high.clone(), level, false, session, slot);
        slots.set(slot, e); // published (volatile) before the writes are read
        if (covered(low, level)) {
            slots.set(slot, null);
            return null;
        }
        return e;
    }

    /** Leaves a descent's escape ({@link #enterDescent}); by the session's own thread. */
    void leaveDescent(Range escape) {
        if (escape != NOTHING) {
            AtomicReferenceArray<Range> slots = escape.session.slots;
            if (slots.get(escape.slot) == escape) {
                slots.setRelease(escape.slot, null); // seen late, it only makes a write give way needlessly
            }
        }
    }

    /**
     * Makes frame {@code frame}, caching the node {@code (low, high]} at {@code level}, an escape; false, entering
     * nothing, when a write in flight covers it (the caller must not use the frame's image or make it reachable).
     */
    boolean enterFrame(int frame, NodeView node) {
        return !matters(node.level()) || enterFrameEscape(frame, fences(node, true), fences(node, false), node.level());
    }

    /** {@link #enterFrame(int, NodeView)} of a node with fences {@code (low, high]} (copied) at {@code level}. */
    boolean enterFrame(int frame, long[] low, long[] high, int level) {
        return !matters(level) || enterFrameEscape(frame, low.clone(), high.clone(), level);
    }

    /** A copy of {@code node}'s low or high fence. */
    private long[] fences(NodeView node, boolean low) {
        long[] fence = new long[keys.words()];
        if (low) {
            node.lowFence(fence);
        } else {
            node.highFence(fence);
        }
        return fence;
    }

    private boolean enterFrameEscape(int frame, long[] low, long[] high, int level) {
        if (frames.get(frame) != null) {
            return true;
        }
        Range e = new Range(low, high, level, false);
        if (!frames.compareAndSet(frame, null, e)) {
            return true; // an orphan entered meanwhile: the frame is an escape, by that entry
        }
        setBit(frame); // published before the writes are read
        if (covered(low, level)) {
            // Withdrawn, unless an orphan's entry replaced it meanwhile: that one stands (its bit is set).
            frames.compareAndSet(frame, e, null);
            return false;
        }
        return true;
    }

    /**
     * Makes an orphan an escape whatever is in flight: a frame that loses its cached parent was reachable through
     * it until now, so no write in flight can lie above it (see the class comment).
     */
    void enterOrphan(int frame, NodeView node) {
        if (matters(node.level())) {
            enterOrphanEscape(frame, fences(node, true), fences(node, false), node.level());
        }
    }

    /** {@link #enterOrphan(int, NodeView)} of a node with fences {@code (low, high]} (copied) at {@code level}. */
    void enterOrphan(int frame, long[] low, long[] high, int level) {
        if (matters(level)) {
            enterOrphanEscape(frame, low.clone(), high.clone(), level);
        }
    }

    private void enterOrphanEscape(int frame, long[] low, long[] high, int level) {
        // Over any entry of the frame (the same node): one an admission may still withdraw must not stand for it.
        frames.set(frame, new Range(low, high, level, false));
        setBit(frame);
    }

    /**
     * The frame is evicted or dropped: its escape, if it has one, goes with it. Its bit stays set until a write finds
     * the frame without an escape and clears it.
     */
    void leaveFrame(int frame) {
        if (subtreeLevel > 0) {
            frames.set(frame, null);
        }
    }

    private void setBit(int frame) {
        BITS.getAndBitwiseOr(frameBits, frame >>> 6, 1L << frame);
    }

    /** Escapes entered now (frames and descents), for tests and the invariant validator (exact at rest). */
    int escapes() {
        return entered().size();
    }

    /** The escapes entered now, frames' then descents'. */
    private List<Range> entered() {
        List<Range> entered = new ArrayList<>();
        for (int f = 0; f < frames.length(); f++) {
            if (frames.get(f) != null) {
                entered.add(frames.get(f));
            }
        }
        for (Descents session : sessions) {
            AtomicReferenceArray<Range> slots = session.slots;
            for (int i = 0; i < slots.length(); i++) {
                if (slots.get(i) != null) {
                    entered.add(slots.get(i));
                }
            }
        }
        return entered;
    }

    /** Writes in flight now. */
    int writes() {
        return writes.length;
    }

    /** Whether frame {@code frame} is an escape. */
    boolean isEscape(int frame) {
        return frames.get(frame) != null;
    }

    /**
     * The first frame that is an escape without its bit set, or -1, for tests and the invariant validator: exact at
     * rest (while a write scans, it may clear a bit for a moment before it sees the frame's new escape).
     */
    int escapeWithoutBit() {
        for (int f = 0; f < frames.length(); f++) {
            if (frames.get(f) != null && ((long) BITS.getVolatile(frameBits, f >>> 6) & (1L << f)) == 0) {
                return f;
            }
        }
        return -1;
    }

    /** Entered for a descent at a level that cannot matter: nothing to leave. */
    static final Range NOTHING = new Range(new long[1], new long[1], 0, false);

    /** Ends a write or leaves a descent's escape, whichever {@code range} is. */
    void release(Range range) {
        if (range.write) {
            endWrite(range);
        } else {
            leaveDescent(range);
        }
    }

    private boolean covered(long[] low, int level) {
        for (Range w : writes) { // one volatile read: the array is never changed in place
            if (level < w.level && compare(low, w.low) >= 0 && compare(low, w.high) < 0) {
                return true;
            }
        }
        return false;
    }

    private boolean overlap(long[] low1, long[] high1, long[] low2, long[] high2) {
        return compare(low1, high2) < 0 && compare(low2, high1) < 0;
    }

    private int compare(long[] a, long[] b) {
        return keys.compare(a, 0, b, 0);
    }

    @Override
    public String toString() {
        List<Range> entered = entered();
        StringBuilder out = new StringBuilder("OffloadExclusion[").append(entered.size()).append(" escapes, ")
                .append(writes.length).append(" writes");
        for (Range e : entered) {
            out.append(", (").append(Arrays.toString(e.low)).append(", ").append(Arrays.toString(e.high)).append("]@")
                    .append(e.level);
        }
        return out.append(']').toString();
    }
}
