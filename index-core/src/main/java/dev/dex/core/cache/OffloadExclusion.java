package dev.dex.core.cache;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

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
 * A's range (fences only narrow, and a node keeps its low fence when it splits), so an escape conflicts with a
 * write at A when its level is lower and its low fence lies in {@code [low(A), high(A))}. Only nodes below the
 * offloading level M matter (a write starts at level M or lower), so escapes at level M and above are not kept.
 *
 * <pre>
 * Concurrency: every method is synchronized on this object and runs a few map operations without waiting for
 * anything. An escape is entered before its node is read from remote memory or can be reached through it, a
 * write before it is sent; each checks the other kind under the same monitor, so of an escape and a write that
 * conflict, the one entered second sees the first and gives way (the write falls back, the descent restarts).
 * Two writes whose ranges overlap exclude each other the same way. A frame's escape is left when the frame is
 * evicted or dropped; a descent's and a write's when their operation ends or restarts ({@link Markers#releaseAll}).
 * </pre>
 */
final class OffloadExclusion {
    /** One range at one level: a write in flight, or an escape of a frame ({@code frame >= 0}) or of a descent. */
    static final class Range {
        /** The node's fences: its own copies of the words. */
        final long[] low;
        final long[] high;
        final int level;
        final int frame;
        final boolean write;

        Range(long[] low, long[] high, int level, int frame, boolean write) {
            this.low = low;
            this.high = high;
            this.level = level;
            this.frame = frame;
            this.write = write;
        }
    }

    private final int subtreeLevel;
    /** The width of the keys, which orders the fences. */
    private final KeyFormat keys;
    /** Escapes by low fence. */
    private final TreeMap<long[], List<Range>> escapes;
    /** The escape of each frame that has one. */
    private final Range[] frames;
    private final List<Range> writes = new ArrayList<>();
    private int escapeCount;

    /**
     * @param subtreeLevel the offloading level M; 0 for an engine that never offloads, which keeps nothing and
     *                     whose calls return at once
     */
    OffloadExclusion(int frames, int subtreeLevel, KeyFormat keys) {
        this.frames = new Range[Math.max(1, frames)];
        this.subtreeLevel = subtreeLevel;
        this.keys = keys;
        this.escapes = new TreeMap<>((a, b) -> keys.compare(a, 0, b, 0));
    }

    /** Whether a node at {@code level} can ever lie below a node an offloaded write starts at. */
    boolean matters(int level) {
        return level < subtreeLevel;
    }

    /**
     * Enters an offloaded write into the node {@code (low, high]} at {@code level}; null when it conflicts with an
     * escape below it or with another write in flight (then the caller falls back to its caching path).
     */
    synchronized Range beginWrite(long[] low, long[] high, int level) {
        for (Range w : writes) {
            if (overlap(w.low, w.high, low, high)) {
                return null;
            }
        }
        for (List<Range> atLow : escapes.subMap(low, true, high, false).values()) {
            for (Range e : atLow) {
                if (e.level < level) {
                    return null;
                }
            }
        }
        Range w = new Range(low.clone(), high.clone(), level, -1, true);
        writes.add(w);
        return w;
    }

    synchronized void endWrite(Range write) {
        writes.remove(write);
    }

    /**
     * Enters an escape for the node {@code (low, high]} at {@code level} for one operation (a descent stepped from
     * a shared node into it); null, entering nothing, when a write in flight covers it.
     */
    Range enterDescent(long[] low, long[] high, int level) {
        if (!matters(level)) {
            return NOTHING;
        }
        return enterDescentSync(low, high, level);
    }

    private synchronized Range enterDescentSync(long[] low, long[] high, int level) {
        if (covered(low, level)) {
            return null;
        }
        Range e = new Range(low.clone(), high.clone(), level, -1, false);
        add(e);
        return e;
    }

    /** Leaves a descent's escape ({@link #enterDescent}). */
    synchronized void leaveDescent(Range escape) {
        if (escape != NOTHING) {
            remove(escape);
        }
    }

    /**
     * Makes frame {@code frame}, caching the node {@code (low, high]} at {@code level}, an escape; false, entering
     * nothing, when a write in flight covers it (the caller must not use the frame's image or make it reachable).
     */
    boolean enterFrame(int frame, NodeView node) {
        return !matters(node.level()) || enterFrameSync(frame, fences(node, true), fences(node, false), node.level());
    }

    /** {@link #enterFrame(int, NodeView)} of a node with fences {@code (low, high]} (copied) at {@code level}. */
    boolean enterFrame(int frame, long[] low, long[] high, int level) {
        return !matters(level) || enterFrameSync(frame, low.clone(), high.clone(), level);
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

    private synchronized boolean enterFrameSync(int frame, long[] low, long[] high, int level) {
        if (frames[frame] != null) {
            return true;
        }
        if (covered(low, level)) {
            return false;
        }
        Range e = new Range(low, high, level, frame, false);
        frames[frame] = e;
        add(e);
        return true;
    }

    /**
     * Makes an orphan an escape whatever is in flight: a frame that loses its cached parent was reachable through
     * it until now, so no write in flight can lie above it (see the class comment).
     */
    void enterOrphan(int frame, NodeView node) {
        if (matters(node.level())) {
            enterOrphanSync(frame, fences(node, true), fences(node, false), node.level());
        }
    }

    /** {@link #enterOrphan(int, NodeView)} of a node with fences {@code (low, high]} (copied) at {@code level}. */
    void enterOrphan(int frame, long[] low, long[] high, int level) {
        if (matters(level)) {
            enterOrphanSync(frame, low.clone(), high.clone(), level);
        }
    }

    private synchronized void enterOrphanSync(int frame, long[] low, long[] high, int level) {
        if (frames[frame] == null) {
            Range e = new Range(low, high, level, frame, false);
            frames[frame] = e;
            add(e);
        }
    }

    /** The frame is evicted or dropped: its escape, if it has one, goes with it. */
    void leaveFrame(int frame) {
        if (subtreeLevel > 0) {
            leaveFrameSync(frame);
        }
    }

    private synchronized void leaveFrameSync(int frame) {
        Range e = frames[frame];
        if (e != null) {
            frames[frame] = null;
            remove(e);
        }
    }

    /** Escapes entered now (frames and descents), for tests and the invariant validator. */
    synchronized int escapes() {
        return escapeCount;
    }

    /** Writes in flight now. */
    synchronized int writes() {
        return writes.size();
    }

    /** Whether frame {@code frame} is an escape. */
    synchronized boolean isEscape(int frame) {
        return frames[frame] != null;
    }

    /** Entered for a descent at a level that cannot matter: nothing to leave. */
    static final Range NOTHING = new Range(new long[1], new long[1], 0, -1, false);

    /** Ends a write or leaves a descent's escape, whichever {@code range} is. */
    void release(Range range) {
        if (range.write) {
            endWrite(range);
        } else {
            leaveDescent(range);
        }
    }

    private boolean covered(long[] low, int level) {
        for (Range w : writes) {
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

    private void add(Range e) {
        escapes.computeIfAbsent(e.low, k -> new ArrayList<>(2)).add(e);
        escapeCount++;
    }

    private void remove(Range e) {
        List<Range> atLow = escapes.get(e.low);
        if (atLow == null) {
            return;
        }
        for (Iterator<Range> it = atLow.iterator(); it.hasNext(); ) {
            if (it.next() == e) {
                it.remove();
                escapeCount--;
                break;
            }
        }
        if (atLow.isEmpty()) {
            escapes.remove(e.low);
        }
    }

    @Override
    public synchronized String toString() {
        StringBuilder out = new StringBuilder("OffloadExclusion[").append(escapeCount).append(" escapes, ")
                .append(writes.size()).append(" writes");
        for (Map.Entry<long[], List<Range>> entry : escapes.entrySet()) {
            for (Range e : entry.getValue()) {
                out.append(", (").append(java.util.Arrays.toString(e.low)).append(", ").append(java.util.Arrays.toString(e.high))
                        .append("]@").append(e.level);
            }
        }
        return out.append(']').toString();
    }
}
