package dev.dex.core.cache;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * When this compute node last changed each remote node, with one-sided verbs: every write,
 * compare-and-swap and fetch-and-add of the engine ({@link WriteFailures} calls {@link #changed}) takes the next
 * tick of a clock and records it for the node it touched. (Offloaded writes are not recorded: the memory side keeps its own reads and
 * writes apart, see {@code SubtreeExecutor}.) A one-message offloaded lookup reads the clock before it
 * sends; once it holds the IO markers of the path the answer reports, a change recorded since then for any
 * node of that path makes it fall back, and none shows that the memory side read no node this compute node
 * was changing meanwhile (see {@code docs/offloading.md}, "One message for a lookup").
 *
 * <p>Ticks are recorded per stripe of nodes (a hash of the 1 KiB node address into {@value #STRIPES}
 * stripes); nodes that share a stripe only cause needless fall-backs, never a missed change.
 *
 * <pre>
 * Concurrency
 *   A change is recorded after the verb that made it returned (the memory server applied it) or failed (it
 *   may have been applied), and before the exclusion that guarded it (a frame's mapping entry, an IO
 *   marker) is given up. Recording is a volatile increment of the clock and a compare-and-set maximum on
 *   the stripe, so a stripe never goes back in time when two writers race. The mapping table's updates are
 *   atomic under its stripes' monitors, so a reader that takes the marker of a node after its guard was
 *   given up also sees the tick recorded before; a writer whose tick was taken before the reader read the
 *   clock had finished its verb before the lookup was sent.
 * </pre>
 */
final class RemoteChanges {
    static final int STRIPES = 4096;
    private static final int STRIPE_SHIFT = Long.SIZE - Integer.numberOfTrailingZeros(STRIPES);
    private final AtomicLong clock = new AtomicLong();
    private final AtomicLongArray lastChange = new AtomicLongArray(STRIPES);

    /** The clock, to pass to {@link #changedSince} later. */
    long now() {
        return clock.get();
    }

    /** Whether a change to the node at {@code address} (or one sharing its stripe) was recorded after {@code time}. */
    boolean changedSince(long address, long time) {
        return lastChange.get(stripe(address)) > time;
    }

    /** Records a change to the node at (or word in) {@code address}. */
    void changed(long address) {
        long tick = clock.incrementAndGet();
        int stripe = stripe(address);
        long last;
        do {
            last = lastChange.get(stripe);
        } while (last < tick && !lastChange.compareAndSet(stripe, last, tick));
    }

    private static int stripe(long address) {
        long node = address >>> 10;
        return (int) ((node * 0x9E3779B97F4A7C15L) >>> STRIPE_SHIFT);
    }
}
