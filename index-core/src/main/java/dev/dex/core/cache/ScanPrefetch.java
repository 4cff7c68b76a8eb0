package dev.dex.core.cache;

import static dev.dex.core.cache.FrameHeaderDescriptor.NO_FRAME;
import static dev.dex.core.node.NodeHeaderDescriptor.NODE_LENGTH;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.core.node.NodeView;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.VerbBatch;

/**
 * A scan's leaves, read together: the miss of the scan's next leaf reads it (under its IO marker, as any miss) in one
 * {@link VerbBatch} with the uncached leaves right after it under the same cached level-1 parent, as many as the scan's
 * remaining entries need ({@link #readWithNext}); after each leaf, once those are used, the next run is read the same way
 * ({@link #ahead}). The scan's next descents take the images read ahead from here ({@link #take}) instead of reading
 * each leaf on its own. Only the run right after the current leaf is read (it ends at the first cached leaf, or one
 * that lazy admission admits), so the scan reads its leaves in key order: every transport runs a batch's reads to one
 * memory server in slot order.
 *
 * <p>Why an image read ahead may serve the scan. A scan reads each leaf atomically, and the scan as a whole is not a
 * snapshot (docs/baseline-tree.md): an image read ahead is the leaf as it was at a moment after the scan began and
 * after the leaves before it were read, which a scan that descended to it at that moment would have read. The image is
 * used only for the address the descent arrives at, and fences only shrink, so every key the descent looks for in it was
 * in its range when it was read; an image wider than its slot now is clipped to the slot like any read
 * ({@code Admission.clipToSlot}); a torn image (front and back versions differ) is not used. What makes it different
 * from a read under the IO marker is that another thread may change the leaf between the read and its use: so an image
 * read ahead is <b>never admitted</b> into the cache (a cached image must be current), and it serves only scans, which
 * write nothing. Lazy leaf admission keeps its odds: the draw for each leaf is made when it would be read ahead, and a
 * leaf the draw admits ends the run and is admitted by its own miss without a second draw ({@link #drawnToAdmit}). Only
 * owned leaves of the scan's own partition are read ahead (a shared leaf needs the validated read), only under a cached
 * parent whose version still holds after its slots were read.
 *
 * <p>Verbs: each leaf read ahead is one read, counted when it is issued, as the scan's own read of it would have been;
 * the leaves looked at are as many as the scan's remaining entries need if every leaf were full (at most {@link #MAX}),
 * so the scan needs each of them, unless it ends at its partition's end or another thread cached one meanwhile: a read
 * ahead is not a read more.
 *
 * <pre>
 * Concurrency: owned by one DexSession, so by one thread. The parent frame is read optimistically and validated after
 * its slots were read; the leaves are read without markers, and their images are private to this object.
 * </pre>
 */
final class ScanPrefetch {
    /** At most this many leaves are read ahead at once. */
    static final int MAX = 16;

    private final DexEngine engine;
    private final FrameArena arena;
    private final VerbBatch batch = new VerbBatch(MAX);
    private final UnsafeBuffer images = new UnsafeBuffer(new byte[MAX * NODE_LENGTH]);
    private final NodeView view;
    private final long[] addresses = new long[MAX];
    /** The leaf that ended the last run because its draw admitted it (0: none): its miss admits it without drawing again. */
    private long drawnLeaf;
    /** Lazy leaf admission's draw for an owned leaf not read yet ({@code Admission.admitsOwnedLeaf}). */
    private final java.util.function.BooleanSupplier admits;
    private final long[] low;
    private final long[] high;
    /** Leaves read ahead in the last batch, and of those, not yet taken. */
    private int count;
    private int pending;
    /** The parent frame of the last leaves read ahead, and the slot of the last of them. */
    private int lastParent = NO_FRAME;
    private int lastSlot;
    /** 1 when the last batch began with the scan's own next leaf ({@link #readWithNext}), else 0. */
    private int firstSlots;
    /** What the scan in progress still wants ({@link #want}); 0 outside scans. */
    private int wanting;
    private int wantingPartition;
    /** Leaves read ahead, and of those, used by a descent: for tests and statistics. */
    private long readAhead;
    private long used;

    ScanPrefetch(DexEngine engine, java.util.function.BooleanSupplier admits) {
        this.engine = engine;
        this.admits = admits;
        this.arena = engine.arena;
        this.view = new NodeView(engine.keys);
        this.low = new long[engine.keys.words()];
        this.high = new long[engine.keys.words()];
    }

    /**
     * Reads ahead the uncached leaves after the one at depth {@code d} of {@code path} under its cached parent, as many
     * as {@code entriesWanted} more entries need in full leaves, all of them in {@code partition}. Does
     * nothing when the parent is not a cached frame, or changed meanwhile, or while leaves read ahead are still ahead of
     * the scan; images the scan passed without taking them (their leaf was cached meanwhile) are dropped.
     */
    void ahead(SessionPath path, int d, int entriesWanted, int partition) {
        if (d == 0 || entriesWanted <= 0 || stillAhead(path, d - 1)) {
            return;
        }
        readAhead(path, d - 1, leavesFor(entriesWanted), partition, 0, null);
    }

    /** Whether leaves read ahead under the parent at depth {@code pd} are still ahead of the scan's slot there. */
    private boolean stillAhead(SessionPath path, int pd) {
        return pending > 0 && path.frameAt[pd] == lastParent && path.childIndexAt[pd] < lastSlot;
    }

    /** Entries the scan in progress still wants, before the descent to its next leaf; 0 ends it. */
    void want(int entries, int partition) {
        wanting = entries;
        wantingPartition = partition;
    }

    /**
     * The scan's miss of its next leaf at depth {@code d} (its IO marker held, owned): when the scan wants more entries
     * than one leaf holds and the parent is a cached level-1 frame, reads the leaf into {@code image} in one batch with
     * the leaves after it that the scan will need (read ahead, as {@link #ahead}), so that a scan of a few leaves costs
     * one round trip, not two.
     *
     * @return whether {@code image} holds the whole leaf; false when nothing was done or the image is torn (read it alone)
     */
    boolean readWithNext(SessionPath path, int d, long address, NodeView image) {
        if (wanting <= engine.keys.leafCapacity() || d == 0 || path.frameAt[d - 1] == NO_FRAME
                || path.viewAt[d - 1].level() != 1 || stillAhead(path, d - 1)) {
            // One leaf is enough, or no cached level-1 parent (an inner node's miss: what was read ahead stays), or
            // the leaves after it were read already.
            return false;
        }
        if (!readAhead(path, d - 1, leavesFor(wanting) - 1, wantingPartition, address, image)) {
            return false;
        }
        RuntimeException failed = batch.failure(0);
        if (failed != null) {
            throw failed;
        }
        return image.version() == image.backVersion();
    }

    private int leavesFor(int entries) {
        // Leaves hold at most leafCapacity entries each: fewer leaves than that count cannot give the entries wanted, so
        // none of them is read for nothing (unless the scan ends at its partition's end first).
        int perLeaf = engine.keys.leafCapacity();
        return Math.min(MAX, (entries + perLeaf - 1) / perLeaf);
    }

    /**
     * Reads, in one batch, {@code first} into {@code firstImage} (if {@code first} is not 0) and the uncached leaves of the
     * {@code wanted} slots after the parent's slot at {@code childIndexAt[pd]}, owned by {@code partition}, whose draw does
     * not admit them. Returns false, reading nothing, when the parent is not a cached level-1 frame or changed while its
     * slots were read.
     */
    private boolean readAhead(SessionPath path, int pd, int wanted, int partition, long first, NodeView firstImage) {
        count = 0;
        pending = 0;
        drawnLeaf = 0;
        int f = path.frameAt[pd];
        NodeView parent = path.viewAt[pd];
        if (f == NO_FRAME || parent.level() != 1) {
            return false;
        }
        lastParent = f;
        int last = Math.min(parent.count(), parent.capacity());
        batch.clear();
        firstSlots = 0;
        if (first != 0) {
            batch.read(first, firstImage.buffer(), firstImage.offset(), NODE_LENGTH);
            firstSlots = 1;
        }
        int considered = 0;
        for (int j = path.childIndexAt[pd] + 1; j <= last && considered < wanted; j++) {
            long child = parent.child(j);
            parent.slotLow(j, low);
            parent.slotHigh(j, high);
            if (engine.partitions.ownerOf(low, high, engine.keys.words()) != partition) {
                break; // the partition ends, or the slot straddles its end: its leaf is shared
            }
            considered++;
            // Only the run of leaves right after the current one is read ahead, so that the scan reads its leaves in key
            // order: a leaf after a cached one (read from its frame later) would be older than it.
            if (GlobalAddress.isSwizzled(child) || engine.mapping.get(child) != MappingTable.ABSENT) {
                break; // cached, or being read by another thread
            }
            if (admits.getAsBoolean()) {
                // The scan's own read admits it: lazy leaf admission, drawn here rather than at its miss.
                drawnLeaf = child;
                break;
            }
            lastSlot = j;
            addresses[count] = child;
            batch.read(child, images, count * NODE_LENGTH, NODE_LENGTH);
            count++;
        }
        if (!arena.validate(f, path.versionAt[pd])) {
            count = 0; // the parent changed while its slots were read: they may name other nodes
            drawnLeaf = 0;
            return false;
        }
        if (batch.isEmpty() || first == 0 && count == 0) {
            return false;
        }
        engine.memory.submit(batch);
        readAhead += count;
        pending = count;
        return true;
    }

    /**
     * Copies the image of {@code address} read ahead into {@code image}, if there is a whole one; it is used once.
     *
     * @return whether {@code image} holds it now
     */
    boolean take(long address, NodeView image) {
        for (int i = 0; i < count; i++) {
            if (addresses[i] != address) {
                continue;
            }
            addresses[i] = 0;
            pending--;
            if (batch.failure(firstSlots + i) != null) {
                return false;
            }
            view.wrap(images, i * NODE_LENGTH);
            if (view.version() != view.backVersion() || view.address() != address) {
                return false;
            }
            image.buffer().putBytes(image.offset(), images, i * NODE_LENGTH, NODE_LENGTH);
            used++;
            return true;
        }
        return false;
    }

    /** Whether the leaf at {@code address} was passed over because its draw admitted it; answers true once. */
    boolean drawnToAdmit(long address) {
        if (address != drawnLeaf) { // a missed node's address is never 0, NULL
            return false;
        }
        drawnLeaf = 0;
        return true;
    }

    /** Forgets what was read ahead: the scan ended. */
    void clear() {
        count = 0;
        pending = 0;
        drawnLeaf = 0;
        wanting = 0;
    }

    long readAhead() {
        return readAhead;
    }

    long used() {
        return used;
    }
}
