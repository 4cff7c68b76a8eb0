package dev.dex.rdma.disni;

import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.FencedException;
import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.replica.StaleViewException;

/**
 * The RDMA keys of one exported region: every client gets a registration of the region's segments of its own
 * (a <em>grant</em>), asked for by its fabric identity over the control transport, so that fencing a client
 * revokes exactly its keys. This is how the {@code disni} fabric fences one-sided access: once
 * {@link #fence} returns, the device refuses every READ and WRITE with that client's keys and applies none
 * that arrives later, and the client gets no new keys.
 *
 * <p>Messages, on the control transport's two-sided channel ({@link MessageHandler}; little-endian):
 * <pre>
 *  request                                 answer
 *  0      4     5       8        16        0      4       8        16                16 + 4 * count
 *  +------+-----+-------+--------+         +------+-------+--------+------ ... ------+
 *  |MAGIC |KIND | 0 0 0 | GRANT  |         |MAGIC | COUNT | GRANT  | RKEY[0..COUNT)  |
 *  |      |     |       | ID     |         |      |       | ID     |                 |
 *  +------+-----+-------+--------+         +------+-------+--------+------ ... ------+
 *  KIND 1 (GRANT): 8 bytes, no id          GRANT: COUNT keys, one per segment in region order
 *  KIND 2 (RELEASE): 16 bytes              RELEASE: COUNT 1 if the grant was the sender's and open, else 0
 *  KIND 3 (GRANT IN VIEW): 16 bytes, the   GRANT IN VIEW: as GRANT; or COUNT -1 and, in place of the grant id,
 *         view in place of the grant id            the view the region is in, when that is newer than the asked one
 *  KIND 4 (VIEW): 8 bytes                  VIEW: COUNT 0 and the region's view in place of the grant id
 * </pre>
 * A plain GRANT asks for keys of view 0, the view of a region that is no replica.
 *
 * <p><b>Views</b> (a replica of a group, docs/replication.md): every grant belongs to a view of the replica group, and
 * {@link #advanceView} revokes every grant of an older view before it returns, so that the device refuses every READ
 * and WRITE a client sends in a view the replica has left, and applies none that arrives later: the gate a NIC enforces,
 * as {@link dev.dex.rdma.replica.ViewGate} is the gate of a replica whose clients share its process. A grant is refused
 * for a view older than the region's ({@link StaleViewException}); a grant for a newer view is given, and lasts until the
 * region moves past that view. A client whose verb failed asks the region's view ({@link #requestView}) to tell a
 * view change (run the verb again in the newer view) from a fence or a failure.
 * The identity is the one the sender's control connection greeted with; a fenced identity cannot greet, and
 * {@link #grant} refuses it as well. Anonymous clients (identity 0) get grants too, which nothing but
 * {@link #close()} revokes.
 *
 * <p>Limits: {@link #MAX_SEGMENTS} segments per region (what one answer holds) and {@link #MAX_GRANTS} grants
 * open at once per region (each costs the device translation entries for the whole region); a client
 * releases its grants when it closes, and a downed compute node's are revoked by its fence.
 *
 * <p>Concurrency: thread-safe. The book (open grants, fenced identities, the view) is guarded by this object's lock;
 * registering and deregistering, which take a system call each, run outside it. A grant is registered first
 * and then entered in the book under the lock, where a fence of its client that came first makes it close
 * again; a fence enters the identity under the lock and collects that client's grants. So of a grant and a
 * fence of the same client, either the fence finds the grant and closes it, or the grant sees the fence and
 * is refused: no key of a fenced client outlives a fence that returned. A grant leaves the book only once its
 * keys are revoked (by a release, a fence or the close), so a fence that failed to revoke one (and said so)
 * finds it again the next time, and a fence racing the close or a release finds the grant still there and
 * closes it too; a grant's close waits for another close of it in progress, so the fence returns only once
 * the keys are revoked. A view change is a fence of every client of the older views: {@link #advanceView} sets
 * the view under the lock and collects the older grants, and a grant entering the book sees a view that moved past
 * its own and closes again, so no key of an older view outlives an advance that returned. Messages are
 * {@link #blocking()}: the transport runs them off its I/O threads.
 */
final class RdmaGrants implements MessageHandler, AutoCloseable {
    static final int MAGIC = 0x474B_5844; // "DXKG" in little-endian bytes
    static final byte GRANT = 1;
    static final byte RELEASE = 2;
    static final byte GRANT_IN_VIEW = 3;
    static final byte VIEW = 4;
    static final int GRANT_IN_VIEW_LENGTH = 16;
    static final int VIEW_LENGTH = 8;
    /** The COUNT of an answer that refuses a grant for an older view than the region's. */
    static final int STALE_VIEW = -1;
    static final int GRANT_LENGTH = 8;
    static final int RELEASE_LENGTH = 16;
    static final int ANSWER_HEADER = 16;
    /** Segments whose keys fit one answer. */
    static final int MAX_SEGMENTS = (MessageHandler.MAX_MESSAGE - ANSWER_HEADER) / Integer.BYTES;
    /** Grants open at once per region. */
    static final int MAX_GRANTS = 1024;
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    /** A client's keys to a region, and the id it releases them by. */
    record Granted(long id, int[] rkeys) {
    }

    private record Held(long client, long view, RdmaTransport.Grant grant) {
    }

    private final int serverId;
    private final RdmaTransport.Registration registration;
    private final Map<Long, Held> open = new HashMap<>();
    /** Written under this object's lock; a concurrent set, so that {@link #isFenced} reads it without the lock. */
    private final Set<Long> fenced = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** The view of the replica group the region is in; 0 for a region that is no replica. */
    private long view;
    private long nextId = 1;
    private boolean closed;

    RdmaGrants(int serverId, RdmaTransport.Registration registration) {
        this.serverId = serverId;
        this.registration = registration;
    }

    /** Registers the region's segments for client {@code client}, in view 0: see {@link #grant(long, long)}. */
    Granted grant(long client) {
        return grant(client, 0);
    }

    /**
     * Registers the region's segments for client {@code client}, in view {@code inView}: the keys are revoked when the
     * region moves past that view.
     *
     * @throws FencedException          when the client is fenced
     * @throws StaleViewException       when the region is in a newer view than {@code inView}
     * @throws IllegalStateException    when {@link #MAX_GRANTS} grants are open, or after {@link #close()}
     * @throws dev.dex.rdma.FabricException when the device refuses the registration
     */
    Granted grant(long client, long inView) {
        synchronized (this) {
            checkCanGrant(client, inView);
        }
        RdmaTransport.Grant grant = registration.grant();
        RuntimeException refused;
        synchronized (this) {
            try {
                checkCanGrant(client, inView);
                long id = nextId++;
                open.put(id, new Held(client, inView, grant));
                return new Granted(id, grant.rkeys());
            } catch (RuntimeException e) {
                refused = e;
            }
        }
        try {
            grant.close();
        } catch (RuntimeException stillRegistered) {
            // Kept in the book, so that the next fence of this client (or the close) tries again.
            refused.addSuppressed(stillRegistered);
            synchronized (this) {
                open.put(nextId++, new Held(client, inView, grant));
            }
        }
        throw refused;
    }

    private void checkCanGrant(long client, long inView) {
        if (closed) {
            throw new IllegalStateException("memory server " + serverId + " no longer exports its region over RDMA");
        }
        if (fenced.contains(client)) {
            throw new FencedException("memory server " + serverId + " fenced client " + Long.toHexString(client)
                    + ": it gets no RDMA keys any more");
        }
        if (inView < view) {
            throw new StaleViewException(serverId, "RDMA keys", inView, view);
        }
        if (open.size() >= MAX_GRANTS) {
            throw new IllegalStateException("memory server " + serverId + " has " + MAX_GRANTS
                    + " RDMA key grants open, its limit; clients release theirs when they close");
        }
    }

    /** Revokes grant {@code id} if it is {@code client}'s and open; returns whether it was. */
    boolean release(long client, long id) {
        Held held;
        synchronized (this) {
            held = open.get(id);
            if (held == null || held.client() != client) {
                return false;
            }
        }
        held.grant().close();
        synchronized (this) {
            return open.remove(id) != null;
        }
    }

    /**
     * Fences {@code client}: revokes every key it holds, and refuses it keys from now on.
     *
     * @throws IllegalArgumentException for client 0 (anonymous)
     * @throws RuntimeException         when a key could not be revoked (the others are)
     */
    void fence(long client) {
        if (client == 0) {
            throw new IllegalArgumentException("client 0 (anonymous) cannot be fenced");
        }
        Map<Long, RdmaTransport.Grant> revoke = new HashMap<>();
        synchronized (this) {
            fenced.add(client);
            open.forEach((id, held) -> {
                if (held.client() == client) {
                    revoke.put(id, held.grant());
                }
            });
        }
        revokeAll(revoke);
    }

    /**
     * Moves the region to view {@code next} of its replica group: revokes every grant of an older view, and refuses
     * grants for one from now on. Once it returns, the device applies no READ or WRITE sent with a key of an older view;
     * a grant that could not be revoked stays in the book and is tried again by the next advance, fence or close, and
     * this throws. Moving to the view the region is in revokes what a failed advance left.
     *
     * @throws IllegalArgumentException when {@code next} is older than the region's view
     * @throws RuntimeException         when a key could not be revoked (the others are)
     */
    void advanceView(long next) {
        Map<Long, RdmaTransport.Grant> revoke = new HashMap<>();
        synchronized (this) {
            if (next < view) {
                throw new IllegalArgumentException("memory server " + serverId + "'s RDMA keys are in view " + view
                        + ", not going back to " + next);
            }
            view = next;
            open.forEach((id, held) -> {
                if (held.view() < next) {
                    revoke.put(id, held.grant());
                }
            });
        }
        revokeAll(revoke);
    }

    /** The view of the replica group the region is in (0 for a region that is no replica). */
    synchronized long view() {
        return view;
    }

    /** Whether {@code client} is fenced here; without the lock (every atomic in a view asks, {@link ViewAtomics}). */
    boolean isFenced(long client) {
        return fenced.contains(client);
    }

    /** Grants open now. */
    synchronized int openGrants() {
        return open.size();
    }

    /** Revokes every grant; later grants are refused. Idempotent. */
    @Override
    public void close() {
        Map<Long, RdmaTransport.Grant> revoke = new HashMap<>();
        synchronized (this) {
            closed = true;
            open.forEach((id, held) -> revoke.put(id, held.grant()));
        }
        revokeAll(revoke);
    }

    /**
     * Closes each grant and takes it out of the book once its keys are revoked: a grant that failed stays, for
     * the next fence; a fence that runs meanwhile waits for a close in progress (grants close one at a time).
     */
    private void revokeAll(Map<Long, RdmaTransport.Grant> grants) {
        RuntimeException failure = null;
        for (Map.Entry<Long, RdmaTransport.Grant> entry : grants.entrySet()) {
            try {
                entry.getValue().close();
                synchronized (this) {
                    open.remove(entry.getKey());
                }
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public int handle(DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
        return handle(0, message, offset, length, reply);
    }

    /** Registering and deregistering take system calls, proportional to the region: not on an I/O thread. */
    @Override
    public boolean blocking() {
        return true;
    }

    /**
     * A GRANT or RELEASE from {@code client}.
     *
     * @throws IllegalArgumentException for a malformed request, or one the book refuses (the sender gets why)
     */
    @Override
    public int handle(long client, DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
        if (length < GRANT_LENGTH || message.getInt(offset, ORDER) != MAGIC) {
            throw new IllegalArgumentException("not an RDMA key request (" + length + " bytes)");
        }
        byte kind = message.getByte(offset + 4);
        if (kind == VIEW && length == VIEW_LENGTH) {
            reply.putInt(0, MAGIC, ORDER);
            reply.putInt(4, 0, ORDER);
            reply.putLong(8, view(), ORDER);
            return ANSWER_HEADER;
        }
        boolean inView = kind == GRANT_IN_VIEW && length == GRANT_IN_VIEW_LENGTH;
        if (kind == GRANT && length == GRANT_LENGTH || inView) {
            Granted granted;
            try {
                granted = grant(client, inView ? message.getLong(offset + 8, ORDER) : 0);
            } catch (StaleViewException stale) {
                reply.putInt(0, MAGIC, ORDER);
                reply.putInt(4, STALE_VIEW, ORDER);
                reply.putLong(8, stale.replicaView(), ORDER);
                return ANSWER_HEADER;
            } catch (IllegalStateException | dev.dex.rdma.FabricException refused) {
                throw new IllegalArgumentException(refused.getMessage(), refused);
            }
            int[] rkeys = granted.rkeys();
            reply.putInt(0, MAGIC, ORDER);
            reply.putInt(4, rkeys.length, ORDER);
            reply.putLong(8, granted.id(), ORDER);
            for (int i = 0; i < rkeys.length; i++) {
                reply.putInt(ANSWER_HEADER + i * Integer.BYTES, rkeys[i], ORDER);
            }
            return ANSWER_HEADER + rkeys.length * Integer.BYTES;
        }
        if (kind == RELEASE && length == RELEASE_LENGTH) {
            boolean released;
            try {
                released = release(client, message.getLong(offset + 8, ORDER));
            } catch (RuntimeException stillRegistered) {
                released = false; // the grant stays in the book; its client is told it was not given back
            }
            reply.putInt(0, MAGIC, ORDER);
            reply.putInt(4, released ? 1 : 0, ORDER);
            reply.putLong(8, 0, ORDER);
            return ANSWER_HEADER;
        }
        throw new IllegalArgumentException("RDMA key request of kind " + kind + " and " + length + " bytes: kind 1 has "
                + GRANT_LENGTH + " bytes, kind 2 " + RELEASE_LENGTH + ", kind 3 " + GRANT_IN_VIEW_LENGTH + ", kind 4 " + VIEW_LENGTH);
    }

    /**
     * Asks memory server {@code serverId} for keys over {@code control}, as the identity its connection greeted with.
     *
     * @param segments the segment count the client expects
     * @throws IllegalArgumentException when the server refuses or answers something else
     */
    static Granted request(MessageSender control, int serverId, int segments) {
        return request(control, serverId, segments, -1);
    }

    /**
     * Asks memory server {@code serverId} for keys of view {@code inView} of its replica group (-1: a plain GRANT, of
     * view 0) over {@code control}, as the identity its connection greeted with.
     *
     * @throws StaleViewException       when the region is in a newer view than {@code inView}
     * @throws IllegalArgumentException when the server refuses or answers something else
     */
    static Granted request(MessageSender control, int serverId, int segments, long inView) {
        int length = inView < 0 ? GRANT_LENGTH : GRANT_IN_VIEW_LENGTH;
        UnsafeBuffer request = new UnsafeBuffer(new byte[length]);
        request.putInt(0, MAGIC, ORDER);
        request.putByte(4, inView < 0 ? GRANT : GRANT_IN_VIEW);
        if (inView >= 0) {
            request.putLong(8, inView, ORDER);
        }
        UnsafeBuffer answer = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        int n = control.send(serverId, request, 0, length, answer, 0);
        if (n < ANSWER_HEADER || answer.getInt(0, ORDER) != MAGIC) {
            throw new IllegalArgumentException("memory server " + serverId + " answered an RDMA key request with " + n
                    + " bytes that are no grant");
        }
        int count = answer.getInt(4, ORDER);
        if (count == STALE_VIEW) {
            // Refused, so there is no grant to give back (the id field holds the region's view).
            throw new StaleViewException(serverId, "RDMA keys", Math.max(inView, 0), answer.getLong(8, ORDER));
        }
        if (count != segments || n != ANSWER_HEADER + count * Integer.BYTES) {
            try {
                requestRelease(control, serverId, answer.getLong(8, ORDER));
            } catch (RuntimeException unreachable) {
                // the server keeps the grant until this client is fenced
            }
            throw new IllegalArgumentException("memory server " + serverId + " granted " + count + " keys in " + n
                    + " bytes for a region of " + segments + " segments");
        }
        int[] rkeys = new int[count];
        for (int i = 0; i < count; i++) {
            rkeys[i] = answer.getInt(ANSWER_HEADER + i * Integer.BYTES, ORDER);
        }
        return new Granted(answer.getLong(8, ORDER), rkeys);
    }

    /** The view of its replica group that memory server {@code serverId}'s region is in, asked over {@code control}. */
    static long requestView(MessageSender control, int serverId) {
        UnsafeBuffer request = new UnsafeBuffer(new byte[VIEW_LENGTH]);
        request.putInt(0, MAGIC, ORDER);
        request.putByte(4, VIEW);
        UnsafeBuffer answer = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        int n = control.send(serverId, request, 0, VIEW_LENGTH, answer, 0);
        if (n != ANSWER_HEADER || answer.getInt(0, ORDER) != MAGIC || answer.getInt(4, ORDER) != 0) {
            throw new IllegalArgumentException("memory server " + serverId + " answered a view request with " + n
                    + " bytes that are no view");
        }
        return answer.getLong(8, ORDER);
    }

    /** Gives grant {@code id} back to memory server {@code serverId} over {@code control}; returns whether it was open. */
    static boolean requestRelease(MessageSender control, int serverId, long id) {
        UnsafeBuffer request = new UnsafeBuffer(new byte[RELEASE_LENGTH]);
        request.putInt(0, MAGIC, ORDER);
        request.putByte(4, RELEASE);
        request.putLong(8, id, ORDER);
        UnsafeBuffer answer = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        int n = control.send(serverId, request, 0, RELEASE_LENGTH, answer, 0);
        return n == ANSWER_HEADER && answer.getInt(0, ORDER) == MAGIC && answer.getInt(4, ORDER) == 1;
    }
}
