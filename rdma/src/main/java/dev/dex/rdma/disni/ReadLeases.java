package dev.dex.rdma.disni;

import java.nio.ByteOrder;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.replica.ReadLease;

/**
 * Read leases of {@code disni} replica groups (docs/replication.md, "Read leases"): the compute side asks every backup
 * of its view for one, and reads the primary only while all of them granted it ({@link ReadLease}).
 *
 * <p>Why: a primary on {@code disni} serves one-sided READs with its NIC, so a replaced primary that its successor's
 * deposition did not reach (cut off, or paused: the NIC of a paused process still serves) could answer a compute node
 * that also missed the failover with bytes older than a change the new view acknowledged. A lease kept by the primary's
 * CPU cannot stop its NIC; a lease kept by the compute node can. A backup grants one only while it hears its primary's
 * beats, for no longer than a lease after the last beat, and refuses from the moment it is asked to become primary;
 * it becomes primary only once the last lease it granted ran out ({@link DisniReplicaRegion#becomePrimary}). So by the
 * time a newer view can count its first change, no compute node of an older view still reads: a read whose lease ran out
 * while in flight runs again.
 *
 * <p>The message, on the control fabric's two-sided channel beside the key requests (same magic; little-endian):
 * <pre>
 *  request                          answer
 *  0      4     5       8      16   0      4       8        16
 *  +------+-----+-------+------+    +------+-------+--------+-----------+
 *  |MAGIC |KIND | 0 0 0 | VIEW |    |MAGIC |STATUS | VALUE  | WHY (utf8)|
 *  +------+-----+-------+------+    +------+-------+--------+-----------+
 *  KIND 10 (LEASE)                  STATUS 0: granted for VALUE ns from the request's sending
 *                                   STATUS -1: the replica is in the newer view VALUE
 *                                   STATUS -4: not now, WHY says why (no recent beat, becoming primary, ...)
 * </pre>
 * Any client may ask (a lease gives no access, only the knowledge that the group did not move on without it).
 *
 * <p>The compute side: one keeper per {@link DisniFabric}, with a control link per client and backup endpoint, shared
 * by the live leases that name it and closed with the last of them (a backup dropped from the group is asked no more). Every
 * quarter lease it asks each backup of each live lease again, one message in flight per backup and lease, each on a
 * pool thread of its own so that a backup that hangs holds up no other.
 *
 * <p>Concurrency: the live leases are a concurrent set; the links and their counts of leases change under this
 * object's monitor (a lease takes its links when made and gives them back when closed); a lease's grants change on the
 * send pool under the lease's monitor, and {@link Lease#held} reads one volatile word.
 */
final class ReadLeases implements AutoCloseable {
    static final byte LEASE = 10;
    static final int LENGTH = 16;
    static final int NOT_NOW = -4;
    /** A grant's share of its length the client counts on: room for clocks that run at different rates. */
    static final double CLOCK_MARGIN = 0.9;
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    /** A backup's answer: granted for {@code nanos}, or refused ({@code newerView} >= 0 when it is in a newer view). */
    record Grant(long nanos, long newerView, String why) {
        static Grant granted(long nanos) {
            return new Grant(nanos, -1, null);
        }

        static Grant notNow(String why) {
            return new Grant(0, -1, why);
        }

        static Grant newer(long view) {
            return new Grant(0, view, "it is in view " + view);
        }

        boolean isGranted() {
            return why == null;
        }
    }

    private final DisniFabric fabric;
    private final long leaseNanos;
    private final ScheduledExecutorService timer;
    private final ExecutorService sends;
    private final Set<Lease> live = ConcurrentHashMap.newKeySet();
    /** The links by client and endpoint, with the number of live leases using each; under this object's monitor. */
    private final Map<String, Shared> links = new java.util.HashMap<>();
    private volatile boolean closed;

    /** A link and the number of live leases that use it. */
    private static final class Shared {
        final ControlLink link;
        int leases;

        Shared(ControlLink link) {
            this.link = link;
        }
    }

    ReadLeases(DisniFabric fabric, java.time.Duration lease) {
        this.fabric = fabric;
        this.leaseNanos = lease.toNanos();
        this.timer = Executors.newSingleThreadScheduledExecutor(daemon("dex-disni-read-leases"));
        this.sends = Executors.newCachedThreadPool(daemon("dex-disni-read-lease-ask"));
        long period = Math.max(1, lease.toMillis() / 4);
        timer.scheduleWithFixedDelay(() -> live.forEach(Lease::renewSoon), period, period, TimeUnit.MILLISECONDS);
    }

    private static java.util.concurrent.ThreadFactory daemon(String name) {
        return runnable -> {
            Thread thread = new Thread(runnable, name);
            thread.setDaemon(true);
            return thread;
        };
    }

    /** Whether a control message is a lease request. */
    static boolean isRequest(DirectBuffer message, int offset, int length) {
        return length == LENGTH && message.getInt(offset, ORDER) == RdmaGrants.MAGIC && message.getByte(offset + 4) == LEASE;
    }

    /** The view a lease request asks in. */
    static long view(DirectBuffer message, int offset) {
        return message.getLong(offset + 8, ORDER);
    }

    /** Writes {@code grant} as the answer; returns its length. */
    static int answer(Grant grant, MutableDirectBuffer reply) {
        reply.putInt(0, RdmaGrants.MAGIC, ORDER);
        if (grant.isGranted()) {
            reply.putInt(4, 0, ORDER);
            reply.putLong(8, grant.nanos(), ORDER);
            return RdmaGrants.ANSWER_HEADER;
        }
        reply.putInt(4, grant.newerView() >= 0 ? RdmaGrants.STALE_VIEW : NOT_NOW, ORDER);
        reply.putLong(8, grant.newerView(), ORDER);
        byte[] why = grant.why().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        int n = Math.min(why.length, MessageHandler.MAX_MESSAGE - RdmaGrants.ANSWER_HEADER);
        reply.putBytes(RdmaGrants.ANSWER_HEADER, why, 0, n);
        return RdmaGrants.ANSWER_HEADER + n;
    }

    /** Asks memory server {@code serverId}'s replica behind {@code control} for a lease in {@code view}. */
    static Grant request(MessageSender control, int serverId, long view) {
        UnsafeBuffer request = new UnsafeBuffer(new byte[LENGTH]);
        request.putInt(0, RdmaGrants.MAGIC, ORDER);
        request.putByte(4, LEASE);
        request.putLong(8, view, ORDER);
        UnsafeBuffer answer = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        int n = control.send(serverId, request, 0, LENGTH, answer, 0);
        if (n < RdmaGrants.ANSWER_HEADER || answer.getInt(0, ORDER) != RdmaGrants.MAGIC) {
            throw new IllegalArgumentException("memory server " + serverId + "'s replica answered a lease request with " + n + " bytes");
        }
        int status = answer.getInt(4, ORDER);
        if (status == 0) {
            return Grant.granted(answer.getLong(8, ORDER));
        }
        if (status == RdmaGrants.STALE_VIEW) {
            return Grant.newer(answer.getLong(8, ORDER));
        }
        return Grant.notNow(answer.getStringWithoutLengthUtf8(RdmaGrants.ANSWER_HEADER, n - RdmaGrants.ANSWER_HEADER));
    }

    /**
     * A lease to read server {@code serverId}'s primary in {@code view}, granted by each of {@code backups} (endpoints)
     * to client {@code clientId} (its control links greet as that client, so a fenced one is refused);
     * {@link ReadLease#NONE} without backups. Its first round of requests is sent at once.
     */
    ReadLease lease(int serverId, long view, List<String> backups, long clientId) {
        if (backups.isEmpty()) {
            return ReadLease.NONE;
        }
        List<String> keys = backups.stream().map(endpoint -> Long.toHexString(clientId) + "@" + endpoint).toList();
        List<ControlLink> used = new java.util.ArrayList<>(keys.size());
        synchronized (this) {
            if (closed) {
                throw new IllegalArgumentException("this disni fabric is closed");
            }
            for (int i = 0; i < keys.size(); i++) {
                String endpoint = backups.get(i);
                Shared shared = links.computeIfAbsent(keys.get(i), key -> new Shared(new ControlLink(fabric, serverId, endpoint, clientId)));
                shared.leases++;
                used.add(shared.link);
            }
        }
        Lease lease = new Lease(serverId, view, used, keys);
        live.add(lease);
        lease.renewSoon();
        return lease;
    }

    /** Gives back a closed lease's links; one no live lease uses any more is closed. */
    private void release(List<String> keys) {
        List<ControlLink> unused = new java.util.ArrayList<>();
        synchronized (this) {
            for (String key : keys) {
                Shared shared = links.get(key);
                if (shared != null && --shared.leases == 0) {
                    links.remove(key);
                    unused.add(shared.link);
                }
            }
        }
        unused.forEach(ControlLink::close);
    }

    /** The control links kept open for leases (for tests). */
    synchronized int links() {
        return links.size();
    }

    @Override
    public void close() {
        List<ControlLink> all;
        synchronized (this) {
            closed = true;
            all = links.values().stream().map(shared -> shared.link).toList();
            links.clear();
        }
        live.forEach(Lease::close);
        timer.shutdownNow();
        sends.shutdownNow();
        all.forEach(ControlLink::close);
    }

    /** One view's lease: a grant from each backup, held until the earliest runs out. */
    private final class Lease implements ReadLease {
        private final int serverId;
        private final long view;
        private final List<ControlLink> backups;
        /** The keys of {@link #backups} in the links' book, given back once at close. */
        private final List<String> keys;
        /** Per backup: until when its grant holds ({@link System#nanoTime}), whether a request is out, why it refused. */
        private final long[] until;
        private final AtomicBoolean[] asking;
        /** Per backup: when the request out was sent; one out for longer than a lease drops its link. */
        private final long[] askedAt;
        private final String[] why;
        private volatile long heldUntil;
        private volatile boolean leaseClosed;

        Lease(int serverId, long view, List<ControlLink> backups, List<String> keys) {
            this.serverId = serverId;
            this.view = view;
            this.backups = backups;
            this.keys = keys;
            this.until = new long[backups.size()];
            this.asking = new AtomicBoolean[backups.size()];
            this.askedAt = new long[backups.size()];
            this.why = new String[backups.size()];
            long now = System.nanoTime();
            for (int i = 0; i < until.length; i++) {
                until[i] = now;
                asking[i] = new AtomicBoolean();
                why[i] = "not asked yet";
            }
            this.heldUntil = now;
        }

        @Override
        public boolean held() {
            return !leaseClosed && System.nanoTime() - heldUntil < 0;
        }

        @Override
        public void renewSoon() {
            for (int i = 0; i < backups.size() && !leaseClosed; i++) {
                if (asking[i].get() && System.nanoTime() - askedAt[i] > leaseNanos) {
                    backups.get(i).drop(); // a request hung on a half-open connection: it fails, and the next connects anew
                }
                if (asking[i].compareAndSet(false, true)) {
                    askedAt[i] = System.nanoTime();
                    int backup = i;
                    try {
                        sends.execute(() -> ask(backup));
                    } catch (RejectedExecutionException closing) {
                        asking[i].set(false);
                    }
                }
            }
        }

        private void ask(int i) {
            ControlLink link = backups.get(i);
            long sentAt = System.nanoTime();
            try {
                Grant grant = request(link.sender(), serverId, view);
                if (grant.isGranted()) {
                    granted(i, sentAt + (long) (grant.nanos() * CLOCK_MARGIN));
                } else {
                    refused(i, grant.why());
                }
            } catch (RuntimeException unanswered) {
                refused(i, "did not answer: " + unanswered.getMessage());
                link.drop(); // connect again at the next request
            } finally {
                asking[i].set(false); // after the outcome is in: a later request's comes after it
            }
        }

        /** A grant given before still holds until it runs out; the refusal is kept for {@link #why}. */
        private synchronized void refused(int i, String reason) {
            why[i] = reason;
        }

        private synchronized void granted(int i, long end) {
            if (end - until[i] > 0) {
                until[i] = end;
            }
            why[i] = null;
            long earliest = until[0];
            for (long u : until) {
                earliest = u - earliest < 0 ? u : earliest;
            }
            heldUntil = earliest;
        }

        @Override
        public long patienceNanos() {
            return leaseNanos;
        }

        @Override
        public synchronized String why() {
            if (leaseClosed) {
                return "view " + view + " was replaced";
            }
            StringBuilder out = new StringBuilder();
            long now = System.nanoTime();
            for (int i = 0; i < until.length; i++) {
                if (until[i] - now <= 0) {
                    out.append(out.isEmpty() ? "" : "; ").append("backup ").append(backups.get(i).endpoint).append(' ')
                            .append(why[i] == null ? "granted none recently" : why[i]);
                }
            }
            return out.isEmpty() ? "a grant ran out as it was checked" : out.toString();
        }

        @Override
        public void close() {
            leaseClosed = true;
            if (live.remove(this)) {
                release(keys);
            }
        }
    }
}
