package dev.dex.rdma.tcp;

import static dev.dex.rdma.tcp.TcpFrameDescriptor.APPLY_COPY;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.APPLY_COPY_DONE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.APPLY_FENCE;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.LENGTH_FIELD_LENGTH;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_APPLY;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.OP_STREAM;
import static dev.dex.rdma.tcp.TcpFrameDescriptor.REQUEST_HEADER_LENGTH;

import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;

/**
 * The primary's side of a replica group (docs/replication.md): every change the primary applies to its region gets the
 * next number of the stream in the same critical section that applies it, and goes to every backup as the bytes it
 * left in the region, in that order. A backup applies the stream in order, so its region is always the primary's as
 * it was at some number: a prefix of one history, compare-and-swap and fetch-and-add included, never a reordering.
 * The region server answers a request only once every gating backup acknowledged the number that was current when
 * the request was executed ({@link #committed}), and while the primary holds its lease ({@link #leaseHeld}).
 *
 * <p>A backup that joins tells at its greeting whether it holds the stream's prefix up to the current number; if not,
 * the region is copied to it as stream frames, chunk by chunk, each read in the same critical section as a change, so
 * that it lands in the stream's order and the changes after it apply on top; throttled to the copy rate.
 *
 * <p>Concurrency: {@link #lock} orders changes, copy chunks, heartbeats and joins; under it a change stores its number
 * in {@link #assigned} (volatile) before it touches the region, and a reader of the region reads {@code assigned}
 * after what it read (with a full fence between), so a reader that saw a change waits for its acknowledgement. Links
 * update their acknowledgements on their event loops and call {@link #progressed}, which wakes the connections
 * waiting to answer ({@link #await}); a waiter registers, then checks again, so no wake-up is lost. The links are a
 * copy-on-write list; status and the gating minimum read them without the lock.
 */
final class ReplicationStream {
    /** The flags of a link's greeting frame. */
    static final long GREETING = -1;
    private static final Logger LOG = LoggerFactory.getLogger(ReplicationStream.class);

    private final int serverId;
    private final Region region;
    private final TcpSettings tcp;
    private final ReplicaSettings settings;
    private final IoTransport io;
    private final long streamId;
    private final Object lock = new Object();
    private volatile long assigned;
    private volatile long view;
    private final CopyOnWriteArrayList<ReplicaLink> links = new CopyOnWriteArrayList<>();
    private final Set<Runnable> waiters = ConcurrentHashMap.newKeySet();
    private final Runnable onDemoted;
    private volatile String demoted;
    private volatile boolean closed;
    private final ScheduledFuture<?> heartbeat;
    /** 0.9 of the lease: how recent a gating backup's acknowledgement must be for this primary to answer. */
    private final long leaseLimitNanos;
    /** A view over the frame being filled; only under {@link #lock}, where every frame is made. */
    private final UnsafeBuffer frameView = new UnsafeBuffer(0, 0);

    /**
     * @param streamId  the stream's identity, which a backup compares with the one it applies
     * @param startAt   the number of the last change already in the region (a promoted backup's applied number)
     * @param onDemoted runs once when a backup says a newer view exists: the region server stops serving clients
     */
    ReplicationStream(int serverId, Region region, TcpSettings tcp, ReplicaSettings settings, IoTransport io, long streamId,
                      long startAt, long view, Runnable onDemoted) {
        this.serverId = serverId;
        this.region = region;
        this.tcp = tcp;
        this.settings = settings;
        this.io = io;
        this.streamId = streamId;
        this.assigned = startAt;
        this.view = view;
        this.onDemoted = onDemoted;
        this.leaseLimitNanos = settings.lease().toNanos() * 9 / 10;
        long period = Math.max(1, settings.lease().toMillis() / 4);
        this.heartbeat = io.group().next().scheduleAtFixedRate(this::heartbeat, period, period, TimeUnit.MILLISECONDS);
    }

    long streamId() {
        return streamId;
    }

    long view() {
        return view;
    }

    /** The number of the last change applied here. */
    long assigned() {
        return assigned;
    }

    /** Why a backup refused this primary (a newer view exists), or null. */
    String demoted() {
        return demoted;
    }

    /**
     * The highest number every gating backup acknowledged ({@link #assigned} when there is none): an answer made
     * when {@code assigned} was at most this may go out. A gating backup whose link broke holds it until a new view
     * leaves that backup out ({@link #installView}).
     */
    long committed() {
        long min = assigned;
        for (ReplicaLink link : links) {
            if (link.gating) {
                min = Math.min(min, link.acked);
            }
        }
        return min;
    }

    /**
     * Whether every gating backup acknowledged a frame sent within 0.9 of the lease: no backup can have become
     * primary meanwhile (it waits a whole lease after its last acknowledgement), so what this primary reads is current.
     */
    boolean leaseHeld() {
        long now = System.nanoTime();
        for (ReplicaLink link : links) {
            if (link.gating && now - link.ackedSentNanos >= leaseLimitNanos) {
                return false;
            }
        }
        return true;
    }

    /** Whether an answer made when {@link #assigned} was {@code number} may go out now. */
    boolean mayAnswer(long number) {
        return demoted == null && committed() >= number && leaseHeld();
    }

    /**
     * Waits until every gating backup acknowledged change {@code number}; not on an event loop.
     *
     * @throws IllegalStateException when that takes longer than {@code max} (a backup is lost and no new view has left it
     *                               out yet), or this primary was replaced
     */
    void awaitCommitted(long number, java.time.Duration max) {
        long deadline = System.nanoTime() + max.toNanos();
        while (committed() < number) {
            if (demoted != null || closed) {
                throw new IllegalStateException("memory server " + serverId + " is no longer primary: " + demoted);
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("memory server " + serverId + ": change " + number + " was not acknowledged by"
                        + " every backup within " + max.toMillis() + " ms");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(200_000);
        }
    }

    /** Runs {@code waiter} (once per progress, from an event loop) until it is removed; see the class comment. */
    void await(Runnable waiter) {
        waiters.add(waiter);
    }

    void stopAwaiting(Runnable waiter) {
        waiters.remove(waiter);
    }

    /** A link acknowledged something, broke, or the view changed: the waiting connections look again. */
    void progressed() {
        for (Runnable waiter : waiters) {
            waiter.run();
        }
    }

    // ---- changes, each under the lock: number, then the region, then the frame to every backup

    void write(long offset, DirectBuffer src, int srcIndex, int length) {
        synchronized (lock) {
            long number = next();
            region.writeVerb(offset, src, srcIndex, length);
            ByteBuf frame = frame(number, 0, offset, length);
            copyInto(frame, src, srcIndex, length);
            broadcast(frame);
        }
    }

    long compareAndSwap(long offset, long expected, long desired) {
        synchronized (lock) {
            checkServing();
            // Every change of this region takes the lock, so the word cannot change between this read and the swap.
            long found = region.getLongVolatile(offset);
            if (found != expected || expected == desired) {
                return region.compareAndSwapLong(offset, expected, desired);
            }
            long number = next();
            long swapped = region.compareAndSwapLong(offset, expected, desired);
            word(number, offset, desired);
            return swapped;
        }
    }

    long fetchAndAdd(long offset, long delta) {
        synchronized (lock) {
            long number = next();
            long previous = region.getAndAddLong(offset, delta);
            word(number, offset, previous + delta);
            return previous;
        }
    }

    /**
     * A change made by code on the memory node (an offloaded write): {@code apply} changes only
     * {@code [offset, offset + length)}, and its bytes go to the backups as they are after it.
     */
    void change(long offset, int length, Runnable apply) {
        synchronized (lock) {
            long number = next();
            apply.run();
            ByteBuf frame = frame(number, 0, offset, length);
            copyInto(frame, region, offset, length);
            broadcast(frame);
        }
    }

    /** A fence of {@code client}: the backups refuse it from now on too. Returns its number. */
    long fence(long client) {
        synchronized (lock) {
            long number = next();
            ByteBuf frame = frame(number, APPLY_FENCE, 0, Long.BYTES);
            frame.writeLongLE(client);
            broadcast(frame);
            return number;
        }
    }

    /** Under the lock: the next number, published before the region changes (see the class comment). */
    private long next() {
        checkServing();
        long number = assigned + 1;
        assigned = number;
        VarHandle.fullFence();
        return number;
    }

    private void checkServing() {
        String reason = demoted;
        if (reason != null) {
            throw new NotPrimaryException("memory server " + serverId + " is no longer primary: " + reason);
        }
        if (closed) {
            throw new NotPrimaryException("memory server " + serverId + " is closing");
        }
    }

    private void word(long number, long offset, long value) {
        ByteBuf frame = frame(number, 0, offset, Long.BYTES);
        frame.writeLongLE(value);
        broadcast(frame);
    }

    private void broadcast(ByteBuf frame) {
        for (ReplicaLink link : links) {
            if (link.broken() == null) {
                link.send(frame.retainedDuplicate(), 0, 0);
            }
        }
        frame.release();
    }

    /** An APPLY frame's header for {@code count} payload bytes, which the caller writes. */
    private ByteBuf frame(long number, long flags, long offset, int count) {
        return header(allocate(count), number, flags, offset, count);
    }

    /** A buffer for an APPLY frame of {@code count} payload bytes. */
    private static ByteBuf allocate(int count) {
        return PooledByteBufAllocator.DEFAULT.directBuffer(LENGTH_FIELD_LENGTH + REQUEST_HEADER_LENGTH + count);
    }

    /**
     * The copy's pause: sleeps a millisecond at a time while {@code condition} holds and the link, the stream and this
     * primary's role last; an interrupt breaks the link.
     */
    private void waitWhile(ReplicaLink link, java.util.function.BooleanSupplier condition) {
        try {
            while (link.broken() == null && !closed && demoted == null && condition.getAsBoolean()) {
                Thread.sleep(1);
            }
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            link.breakWith("the copy was interrupted");
        }
    }

    private ByteBuf header(ByteBuf out, long number, long flags, long offset, int count) {
        out.writeIntLE(REQUEST_HEADER_LENGTH + count);
        out.writeByte(OP_APPLY);
        out.writeZero(3);
        out.writeIntLE(count);
        out.writeLongLE(number);
        out.writeLongLE(GlobalAddress.of(serverId, offset));
        out.writeLongLE(number);
        out.writeLongLE(flags);
        return out;
    }

    /** Appends {@code src}'s bytes to {@code frame}; under the lock. */
    private void copyInto(ByteBuf frame, DirectBuffer src, int srcIndex, int length) {
        frame.ensureWritable(length);
        ByteBufViews.wrap(frameView, frame, frame.writerIndex(), length);
        frameView.putBytes(0, src, srcIndex, length);
        frame.writerIndex(frame.writerIndex() + length);
    }

    /** Appends the region's bytes {@code [offset, offset + length)} to {@code frame}; under the lock. */
    private void copyInto(ByteBuf frame, Region region, long offset, int length) {
        frame.ensureWritable(length);
        ByteBufViews.wrap(frameView, frame, frame.writerIndex(), length);
        region.readVerb(offset, frameView, 0, length);
        frame.writerIndex(frame.writerIndex() + length);
    }

    private void heartbeat() {
        if (links.isEmpty() || closed) {
            return;
        }
        long silence = Math.max(4 * settings.lease().toNanos(), 2_000_000_000L);
        synchronized (lock) {
            for (ReplicaLink link : links) {
                if (link.broken() == null) {
                    link.send(frame(assigned, 0, 0, 0), 0, 0);
                    link.checkSilence(silence);
                }
            }
        }
    }

    // ---- membership

    /**
     * Adds the backup at {@code endpoint} to the stream: it gets every change from now on, and a copy of the region
     * when its greeting says it does not hold the stream up to now. Throws {@link IllegalStateException} when it
     * cannot be reached.
     */
    void addBackup(String endpoint) {
        synchronized (lock) {
            if (liveLink(endpoint) != null) {
                return;
            }
        }
        ReplicaLink link = ReplicaLink.connect(endpoint, serverId, this, tcp, io);
        synchronized (lock) {
            if (liveLink(endpoint) != null || demoted != null || closed) {
                link.breakWith("another link to this backup is open, or the primary stopped"); // not in links: no regreet
                checkServing();
                return;
            }
            long now = assigned;
            link.startAt(now);
            ByteBuf hello = PooledByteBufAllocator.DEFAULT.directBuffer(LENGTH_FIELD_LENGTH + REQUEST_HEADER_LENGTH + Long.BYTES);
            hello.writeIntLE(REQUEST_HEADER_LENGTH + Long.BYTES);
            hello.writeByte(OP_STREAM);
            hello.writeZero(3);
            hello.writeIntLE(Long.BYTES);
            hello.writeLongLE(0);
            hello.writeLongLE(GlobalAddress.of(serverId, 0));
            hello.writeLongLE(view);
            hello.writeLongLE(streamId);
            hello.writeLongLE(now);
            links.add(link);
            link.send(hello, GREETING, 0);
        }
        if (link.broken() != null) {
            linkLost(link, link.broken()); // it broke before it was in the list: nobody greets it again otherwise
        }
        LOG.info("memory server {}: backup {} joins the stream in view {} at change {}", serverId, endpoint, view, assigned);
    }

    /**
     * The group's new view: the backups at {@code keep} stay, every other link is closed and no longer holds
     * answers back. Answers held for a removed backup go out now.
     */
    void installView(long newView, Set<String> keep) {
        List<ReplicaLink> removed = new ArrayList<>();
        synchronized (lock) {
            if (newView < view) {
                throw new IllegalArgumentException("memory server " + serverId + " is in view " + view + ", not going back to " + newView);
            }
            view = newView;
            for (ReplicaLink link : links) {
                if (!keep.contains(link.endpoint)) {
                    links.remove(link);
                    removed.add(link);
                }
            }
        }
        for (ReplicaLink link : removed) {
            link.breakWith("left out of view " + newView);
        }
        progressed();
    }

    /** The backup at the other end of {@code link} holds another prefix: it gets the whole region, throttled. */
    void copyNeeded(ReplicaLink link) {
        link.gating = false;
        link.copyLeft = region.length();
        Thread copier = new Thread(() -> copy(link), "dex-replica-copy-" + serverId);
        copier.setDaemon(true);
        copier.start();
    }

    private void copy(ReplicaLink link) {
        long length = region.length();
        int chunk = Math.min(settings.copyChunk(), tcp.maxTransfer());
        long start = System.nanoTime();
        long reported = 0;
        LOG.info("memory server {}: copying its region ({} MiB) to backup {} at up to {} MiB/s", serverId, length >> 20,
                link.endpoint, settings.copyRate() >> 20);
        for (long offset = 0; offset < length; offset += chunk) {
            int count = (int) Math.min(chunk, length - offset);
            long due = start + (long) (offset * 1e9 / settings.copyRate());
            waitWhile(link, () -> System.nanoTime() - due < 0 || !link.writable());
            if (link.broken() != null || closed || demoted != null) {
                LOG.warn("memory server {}: the copy to backup {} stopped at {} of {} bytes: {}", serverId, link.endpoint,
                        offset, length, link.broken() != null ? link.broken() : "the primary stopped");
                return;
            }
            // Allocated outside the lock (a new pool chunk is zeroed, which would hold every change back meanwhile); only
            // the number, the region's bytes and the send are under it, so the chunk lands in the stream's order.
            ByteBuf frame = allocate(count);
            synchronized (lock) {
                header(frame, assigned, APPLY_COPY, offset, count);
                copyInto(frame, region, offset, count);
                link.send(frame, APPLY_COPY, count);
            }
            if ((offset + count) * 10 / length > reported) {
                reported = (offset + count) * 10 / length;
                LOG.info("memory server {}: copy to backup {}: {}% ({} of {} MiB)", serverId, link.endpoint, reported * 10,
                        (offset + count) >> 20, length >> 20);
            }
        }
        // The backup applies what is queued to it before it acknowledges the last frame: were it to gate answers now, every
        // answer would wait for the megabytes still in the sockets. So it gates once it has caught up with the copy.
        waitWhile(link, () -> link.copyLeft > 0);
        synchronized (lock) {
            // From this frame on the backup's acknowledgements hold answers back; once this frame is acknowledged it holds
            // every change answered (ReplicaLink#complete).
            link.gating = true;
            link.send(frame(assigned, APPLY_COPY_DONE, 0, 0), APPLY_COPY_DONE, 0);
        }
        LOG.info("memory server {}: copied {} MiB to backup {} in {} ms", serverId, length >> 20, link.endpoint,
                (System.nanoTime() - start) / 1_000_000);
    }

    /**
     * A link broke. While it is in the view, its backup may still count on getting every change, so answers wait:
     * the primary greets the backup again every 200 ms. A backup that answers says where it stands (it holds the
     * stream up to now, or it marks itself incomplete and is copied), so the broken link stops holding answers back
     * ({@link #greeted}); one in a newer view demotes this primary. Until one of these, or a view without that backup,
     * nothing more is answered.
     */
    /** A link to {@code endpoint} that is not broken, or null. */
    private ReplicaLink liveLink(String endpoint) {
        for (ReplicaLink link : links) {
            if (link.endpoint.equals(endpoint) && link.broken() == null) {
                return link;
            }
        }
        return null;
    }

    void linkLost(ReplicaLink link, String reason) {
        ReplicaLink live = liveLink(link.endpoint);
        if (live != null && live.greetingAnswered) {
            // The backup answered a newer link's greeting already: it said where it stands there (greeted).
            links.remove(link);
            progressed();
            return;
        }
        if (!closed && demoted == null && links.contains(link)) {
            LOG.warn("memory server {}: lost backup {}: {}; changes wait until it answers again or a view without it is installed",
                    serverId, link.endpoint, reason);
            scheduleRegreet(link);
        }
        progressed();
    }

    private void scheduleRegreet(ReplicaLink lost) {
        try {
            io.group().next().schedule(() -> {
                Thread regreet = new Thread(() -> regreet(lost), "dex-replica-regreet-" + serverId);
                regreet.setDaemon(true);
                regreet.start();
            }, 200, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closing) {
            // the fabric is closing
        }
    }

    private void regreet(ReplicaLink lost) {
        if (closed || demoted != null || !links.contains(lost) || liveLink(lost.endpoint) != null) {
            return; // a live link's greeting will say where the backup stands
        }
        try {
            addBackup(lost.endpoint);
        } catch (RuntimeException unreachable) {
            scheduleRegreet(lost);
        }
    }

    /**
     * {@code link}'s backup answered its greeting: it holds the stream up to now ({@code complete}), or it marked itself
     * incomplete and gets a copy. Either way, broken links to the same backup stop holding answers back.
     */
    void greeted(ReplicaLink link, boolean complete) {
        for (ReplicaLink other : links) {
            if (other != link && other.endpoint.equals(link.endpoint) && other.broken() != null) {
                links.remove(other);
            }
        }
        if (!complete) {
            copyNeeded(link);
        }
        progressed();
    }

    void refusedByView(ReplicaLink link, String reason) {
        if (demoted == null) {
            demoted = "backup " + link.endpoint + " is in a newer view: " + reason;
            LOG.warn("memory server {}: {}; this replica stops serving", serverId, demoted);
            onDemoted.run();
        }
        progressed();
    }

    /** The backups as this primary sees them. */
    List<ReplicaStatus.Backup> backups() {
        List<ReplicaStatus.Backup> list = new ArrayList<>();
        for (ReplicaLink link : links) {
            list.add(new ReplicaStatus.Backup(link.endpoint, link.acked, link.gating, link.complete, Math.max(0, link.copyLeft),
                    link.broken()));
        }
        return list;
    }

    void close() {
        closed = true;
        heartbeat.cancel(false);
        for (ReplicaLink link : links) {
            link.breakWith("the primary is closing");
        }
        progressed();
    }
}
