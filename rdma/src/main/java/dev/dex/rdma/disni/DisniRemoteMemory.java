package dev.dex.rdma.disni;

import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.function.Consumer;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.ChunkAllocator;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbChecks;
import dev.dex.rdma.VerbCounters;

/**
 * {@link RemoteMemory} of the {@code disni} transport: reads and writes are one-sided RDMA READ and WRITE
 * work requests; compare-and-swap and fetch-and-add go to the memory server over the control transport.
 *
 * <p>Why atomics are two-sided: DiSNI 2.1 has the RDMA atomic opcodes and access flag, but its post-send call
 * never copies a work request's atomic arguments (compare/add value, swap value, remote address, rkey) to the
 * native work request, so an RDMA compare-and-swap would run with stale arguments. The control transport runs
 * them on the memory server, atomically with respect to each other and to aligned 8-byte RDMA reads and
 * writes (which NICs perform as single PCIe transactions on an aligned word).
 *
 * <p>A verb at region offset {@code o} of a server lands in segment {@code o >>> shift} of that server's
 * {@link RdmaRegionDescriptor}: remote address {@code segment.address + (o & (2^shift - 1))} with the
 * segment's rkey. A transfer that crosses a segment boundary or exceeds the transport's maximum transfer is
 * split into several work requests, posted one after the other. Every verb is counted once in
 * {@link #counters()}, whatever the number of work requests, and atomics are counted here only: the control
 * connection's own counters are never exposed.
 *
 * <p>Errors, as {@link RemoteMemory} promises: a swizzled address, an unconnected server, a range outside the
 * region or a misaligned atomic throw {@link IllegalArgumentException} before anything is posted; verbs after
 * {@link #close()} throw {@link IllegalStateException}; a failed or timed-out work request throws
 * {@link dev.dex.rdma.FabricException}, and {@link FencedException} when the memory server fenced this client
 * (revoked its keys; the control connection tells).
 *
 * <p>A {@link dev.dex.rdma.VerbBatch batch}'s reads and writes are posted together ({@link #start}); its atomics,
 * which are two-sided here, run one after the other.
 *
 * <p>Concurrency: immutable apart from the closed flag and the counters; the verbs and the control connection
 * are thread-safe. A verb racing with {@link #close()} either completes or fails with
 * {@link IllegalStateException}.
 */
final class DisniRemoteMemory implements RemoteMemory, dev.dex.rdma.replica.StampedWords {
    private final Target[] targets;
    private final int[] serverIds;
    private final OneSidedVerbs verbs;
    private final RemoteMemory control;
    private final int maxTransfer;
    private final VerbCounters counters = new VerbCounters();
    /** Each thread's pieces of its current single verb. */
    private final ThreadLocal<WorkList> single = ThreadLocal.withInitial(WorkList::new);
    private final ChunkAllocator chunkAllocator;
    private final Runnable releaseKeys;
    /** Set once a failure was found to be a fence: later failures say so at once. */
    private volatile FencedException fenced;
    private final Consumer<DisniRemoteMemory> onClose;
    /** The view of the replica groups this client's keys belong to, or -1 for regions that are no replicas. */
    private final long view;
    /** Runs atomics and asks views in {@link #view}; null when the view is -1. */
    private final ViewAtomics.Client inView;
    private volatile boolean closed;

    /**
     * @param servers     descriptor of each connected server, with this client's keys, by server id
     * @param verbs       one-sided verbs connected to every server in {@code servers}; closed with this object
     * @param control     the control transport's client of the same servers, for atomics and chunk lengths;
     *                    closed with this object
     * @param maxTransfer largest length of one work request
     * @param releaseKeys gives this client's keys back, run once at close before the control connection closes
     * @param onClose     told once, when this object closes
     */
    DisniRemoteMemory(Map<Integer, RdmaRegionDescriptor> servers, OneSidedVerbs verbs, RemoteMemory control, int maxTransfer,
                      Runnable releaseKeys, Consumer<DisniRemoteMemory> onClose) {
        this(servers, verbs, control, maxTransfer, releaseKeys, onClose, -1, null);
    }

    /**
     * As above, for replicas of groups in {@code view}: the keys belong to that view, atomics run through {@code inView},
     * and a verb the replica refused because it moved to a newer view throws {@link dev.dex.rdma.replica.StaleViewException}.
     */
    DisniRemoteMemory(Map<Integer, RdmaRegionDescriptor> servers, OneSidedVerbs verbs, RemoteMemory control, int maxTransfer,
                      Runnable releaseKeys, Consumer<DisniRemoteMemory> onClose, long view, ViewAtomics.Client inView) {
        if (view >= 0 && inView == null) {
            throw new IllegalArgumentException("a client in a view needs its atomics in that view");
        }
        this.view = view;
        this.inView = inView;
        if (servers.isEmpty()) {
            throw new IllegalArgumentException("a disni client needs at least one memory server");
        }
        SortedMap<Integer, RdmaRegionDescriptor> sorted = new TreeMap<>(servers);
        this.targets = new Target[sorted.lastKey() + 1];
        this.serverIds = new int[sorted.size()];
        long[] regionLengths = new long[targets.length];
        long[] chunkLengths = new long[targets.length];
        int i = 0;
        for (Map.Entry<Integer, RdmaRegionDescriptor> entry : sorted.entrySet()) {
            int id = entry.getKey();
            targets[id] = new Target(entry.getValue());
            regionLengths[id] = targets[id].regionLength;
            chunkLengths[id] = control.chunkAllocator().chunkLength(id);
            serverIds[i++] = id;
        }
        this.verbs = verbs;
        this.control = control;
        this.maxTransfer = maxTransfer;
        this.releaseKeys = releaseKeys;
        this.onClose = onClose;
        this.chunkAllocator = new ChunkAllocator(this::fetchAndAdd, regionLengths, chunkLengths);
    }

    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        transfer(address, dst, null, dstOffset, length);
        counters.recordRead(length);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        if (isWordInView(address, length)) {
            // Exact where an RDMA WRITE is not: refused means not done (ViewAtomics, "why a word's write goes here").
            src.boundsCheck(srcOffset, Long.BYTES);
            writeWord(address, src.getLong(srcOffset, java.nio.ByteOrder.nativeOrder()), null);
            return;
        }
        transfer(address, null, src, srcOffset, length);
        counters.recordWrite(length);
    }

    /** Whether a write is of one aligned word by a client in a view: it goes to the replica's memory node. */
    private boolean isWordInView(long address, int length) {
        return view >= 0 && length == Long.BYTES && (address & (Long.BYTES - 1)) == 0;
    }

    /**
     * Posts the reads and writes of {@code batch} together ({@link OneSidedVerbs#postAll}: one work request per piece,
     * as {@link #pieces} splits them), waits for all their completions, then runs its atomics on the control
     * connection one after the other. A verb fails as it would alone: with the first failure of its pieces, a fence
     * said as {@link FencedException}.
     */
    @Override
    public void start(dev.dex.rdma.VerbBatch batch) {
        batch.started();
        WorkList work = batch.transportState() instanceof WorkList kept ? kept : new WorkList();
        batch.transportState(work);
        work.clear();
        boolean atomics = false;
        for (int slot = 0; slot < batch.size(); slot++) {
            byte op = batch.op(slot);
            if (batch.completed(slot)) {
                continue;
            }
            if (op != dev.dex.rdma.VerbBatch.READ && op != dev.dex.rdma.VerbBatch.WRITE
                    || op == dev.dex.rdma.VerbBatch.WRITE && isWordInView(batch.address(slot), batch.length(slot))) {
                atomics = true; // two-sided: after the one-sided verbs, one by one
                continue;
            }
            try {
                pieces(work, slot, batch.address(slot), op == dev.dex.rdma.VerbBatch.READ ? batch.destination(slot) : null,
                        op == dev.dex.rdma.VerbBatch.READ ? null : batch.source(slot), batch.bufferOffset(slot), batch.length(slot));
            } catch (RuntimeException e) {
                batch.fail(slot, e);
            }
        }
        try {
            if (work.size() > 0) {
                verbs.postAll(work);
                failPieces(batch, work);
            }
        } catch (RuntimeException e) {
            for (int i = 0; i < work.size(); i++) {
                if (batch.failure(work.tag(i)) == null) {
                    batch.fail(work.tag(i), e);
                }
            }
        } finally {
            work.clear();
        }
        for (int slot = 0; slot < batch.size(); slot++) {
            byte op = batch.op(slot);
            boolean oneSided = op == dev.dex.rdma.VerbBatch.READ
                    || op == dev.dex.rdma.VerbBatch.WRITE && !isWordInView(batch.address(slot), batch.length(slot));
            if (!batch.completed(slot) && oneSided) {
                batch.complete(slot, 0);
                if (op == dev.dex.rdma.VerbBatch.READ) {
                    counters.recordRead(batch.length(slot));
                } else {
                    counters.recordWrite(batch.length(slot));
                }
            }
        }
        if (atomics) {
            for (int slot = 0; slot < batch.size(); slot++) {
                if (!batch.completed(slot)) {
                    batch.runOne(this, slot);
                }
            }
        }
    }

    /**
     * Fails each verb of {@code batch} with the first failure of its pieces. A fence is looked for first: on a
     * connection whose keys were revoked only one request fails with the access error and the others are flushed, and
     * every piece's verb is to say {@link FencedException} then, whatever order they come in.
     */
    private void failPieces(dev.dex.rdma.VerbBatch batch, WorkList work) {
        Map<Integer, FabricException> said = null;
        for (int i = 0; i < work.size() && fenced == null; i++) {
            if (work.failure(i) instanceof FabricException failed && isAccessError(failed)) {
                if (said == null) {
                    said = new java.util.HashMap<>();
                }
                // One round trip on the control connection per server and batch.
                said.computeIfAbsent(work.serverId(i), id -> fencedOr(id, failed));
            }
        }
        FencedException known = fenced;
        for (int i = 0; i < work.size(); i++) {
            int slot = work.tag(i);
            RuntimeException failed = work.failure(i);
            if (failed == null || batch.failure(slot) != null) {
                continue;
            }
            RuntimeException reported = failed;
            if (failed instanceof FabricException fabric && !(failed instanceof FencedException)) {
                FabricException classified = said == null ? null : said.get(work.serverId(i));
                if (known != null) {
                    reported = known;
                } else if (classified instanceof dev.dex.rdma.replica.StaleViewException && isAccessError(fabric)) {
                    reported = classified;
                }
            }
            batch.fail(slot, reported);
        }
    }

    /**
     * Whether a failed work request may be a revoked key's doing: the access error itself, or a request flushed because
     * another request of its queue pair met the access error (the queue pair is in the error state then).
     */
    private static boolean isAccessError(FabricException failed) {
        String message = String.valueOf(failed.getMessage());
        return message.contains("REM_ACCESS_ERR") || message.contains("WR_FLUSH_ERR");
    }

    /**
     * Checks one read into {@code dst} or write from {@code src} and adds its work requests to {@code work}, tagged
     * {@code tag}: one per piece that lies in one segment and is at most the maximum transfer.
     */
    private void pieces(WorkList work, int tag, long address, MutableDirectBuffer dst, DirectBuffer src, int bufferOffset, int length) {
        Target target = targetOf(address);
        VerbChecks.range(address, length, target.regionLength);
        (dst != null ? dst : src).boundsCheck(bufferOffset, length);
        long offset = GlobalAddress.offset(address);
        int serverId = GlobalAddress.serverId(address);
        int done = 0;
        while (done < length) {
            int segment = (int) ((offset + done) >>> target.shift);
            int inSegment = (int) ((offset + done) & target.mask);
            int n = Math.min(Math.min(length - done, target.lengths[segment] - inSegment), maxTransfer);
            long remote = target.addresses[segment] + inSegment;
            if (dst != null) {
                work.read(tag, serverId, remote, target.rkeys[segment], dst, bufferOffset + done, n);
            } else {
                work.write(tag, serverId, remote, target.rkeys[segment], src, bufferOffset + done, n);
            }
            done += n;
        }
    }

    /** An RDMA READ into {@code dst} or WRITE from {@code src}, its pieces ({@link #pieces}) one after the other. */
    private void transfer(long address, MutableDirectBuffer dst, DirectBuffer src, int bufferOffset, int length) {
        WorkList work = single.get();
        work.clear();
        try {
            pieces(work, 0, address, dst, src, bufferOffset, length);
            for (int i = 0; i < work.size(); i++) {
                try {
                    verbs.post(work, i);
                } catch (FabricException failed) {
                    throw fencedOr(work.serverId(i), failed);
                }
            }
        } finally {
            work.clear();
        }
    }

    /**
     * A work request failed: when the cause is a fence (the memory server revoked this client's keys, and closed
     * its control connection first), says so with {@link FencedException}, as the {@code tcp} fabric does, so
     * that the compute node leaves; otherwise {@code failed}. The control connection tells: its next verb
     * throws {@link FencedException} once the server fenced this client.
     */
    private FabricException fencedOr(int serverId, FabricException failed) {
        FencedException known = fenced;
        if (known != null) {
            return known;
        }
        // A revoked key fails as a remote access error; anything else (a timeout, a lost peer) is no fence, and
        // is not worth a round trip on the control connection.
        if (failed instanceof FencedException || closed || !isAccessError(failed)) {
            return failed;
        }
        try {
            control.read(GlobalAddress.of(serverId, 0), new UnsafeBuffer(new byte[Long.BYTES]), 0, Long.BYTES);
        } catch (FencedException controlFenced) {
            FencedException both = new FencedException(controlFenced.getMessage() + "; its RDMA keys are revoked: " + failed.getMessage());
            both.addSuppressed(failed);
            fenced = both;
            return both;
        } catch (RuntimeException otherwise) {
            failed.addSuppressed(otherwise);
        }
        if (view >= 0) {
            // Not fenced. A replica revokes every key of an older view when it moves: then the verb is to run in the
            // newer view. A WRITE refused so may have landed in part (a transfer of several packets cut by the
            // revocation, or pieces posted one after another); running it again in the newer view writes it whole, and
            // the engine writes a node's image only while it holds the node's lock. A word's write never comes here.
            try {
                long now = inView.view(serverId);
                if (now > view) {
                    dev.dex.rdma.replica.StaleViewException stale = new dev.dex.rdma.replica.StaleViewException(serverId,
                            "RDMA keys", view, now);
                    stale.addSuppressed(failed);
                    return stale;
                }
            } catch (RuntimeException unknown) {
                failed.addSuppressed(unknown);
            }
        }
        return failed;
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        if (view >= 0) {
            return compareAndSwap(address, expected, desired, null);
        }
        checkWord(address);
        long found = control.compareAndSwap(address, expected, desired);
        counters.recordAtomic();
        return found;
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired, long[] stamp) {
        checkWord(address);
        long found = inView().atomic(GlobalAddress.serverId(address), ViewAtomics.CAS, view, GlobalAddress.offset(address), expected,
                desired, stamp);
        counters.recordAtomic();
        return found;
    }

    @Override
    public long fetchAndAdd(long address, long delta, long[] stamp) {
        checkWord(address);
        long previous = inView().atomic(GlobalAddress.serverId(address), ViewAtomics.ADD, view, GlobalAddress.offset(address), delta, 0,
                stamp);
        counters.recordAtomic();
        return previous;
    }

    @Override
    public void writeWord(long address, long value, long[] stamp) {
        checkWord(address);
        inView().atomic(GlobalAddress.serverId(address), ViewAtomics.SET, view, GlobalAddress.offset(address), 0, value, stamp);
        counters.recordWrite(Long.BYTES);
    }

    @Override
    public boolean setIfNewer(long address, long value, long stampView, long stampSeq) {
        checkWord(address);
        boolean stored = inView().setIfNewer(GlobalAddress.serverId(address), view, GlobalAddress.offset(address), value, stampView,
                stampSeq);
        counters.recordAtomic();
        return stored;
    }

    /** The atomics of a client in a view; stamped words are only for replicas of groups. */
    private ViewAtomics.Client inView() {
        if (inView == null) {
            throw new IllegalStateException("stamped words are for clients of replica groups, connected in a view");
        }
        return inView;
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        if (view >= 0) {
            return fetchAndAdd(address, delta, null);
        }
        checkWord(address);
        long previous = control.fetchAndAdd(address, delta);
        counters.recordAtomic();
        return previous;
    }

    /** The identity the control connections greeted with, which the memory servers granted keys to. */
    @Override
    public long clientId() {
        return control.clientId();
    }

    /**
     * Fences {@code clientId} on every connected memory server through the control connections: each closes
     * that client's control connections and revokes its RDMA keys before it answers.
     */
    @Override
    public boolean fence(long clientId) {
        return control.fence(clientId);
    }

    @Override
    public int[] memoryServerIds() {
        return serverIds.clone();
    }

    @Override
    public VerbCounters counters() {
        return counters;
    }

    @Override
    public ChunkAllocator chunkAllocator() {
        return chunkAllocator;
    }

    /**
     * Closes the one-sided connections, gives the keys back, closes the control connection, then tells the
     * fabric; idempotent.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            verbs.close();
        } finally {
            try {
                releaseKeys.run();
            } finally {
                try {
                    control.close();
                } finally {
                    onClose.accept(this);
                }
            }
        }
    }

    private Target targetOf(long address) {
        return VerbChecks.server(targets, address, closed);
    }

    private void checkWord(long address) {
        VerbChecks.range(address, Long.BYTES, targetOf(address).regionLength);
        VerbChecks.aligned(address);
    }

    /** One server's region as the descriptor tells it, flattened into arrays for the verb path. */
    private static final class Target {
        final long regionLength;
        final int shift;
        final long mask;
        final long[] addresses;
        final int[] rkeys;
        final int[] lengths;

        Target(RdmaRegionDescriptor descriptor) {
            this.regionLength = descriptor.regionLength();
            this.shift = descriptor.segmentShift();
            this.mask = (1L << shift) - 1;
            int count = descriptor.segments().size();
            this.addresses = new long[count];
            this.rkeys = new int[count];
            this.lengths = new int[count];
            for (int i = 0; i < count; i++) {
                RdmaRegionDescriptor.RemoteSegment segment = descriptor.segments().get(i);
                addresses[i] = segment.address();
                rkeys[i] = segment.rkey();
                lengths[i] = segment.length();
            }
        }
    }
}
