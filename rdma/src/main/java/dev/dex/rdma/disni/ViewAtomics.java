package dev.dex.rdma.disni;

import java.nio.ByteOrder;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.MessageHandler;
import dev.dex.rdma.MessageSender;
import dev.dex.rdma.Region;
import dev.dex.rdma.replica.ReplicaGoneException;
import dev.dex.rdma.replica.StaleViewException;
import dev.dex.rdma.replica.ViewGate;

/**
 * The compare-and-swaps and fetch-and-adds of a {@code disni} replica, run by its memory node in a view of the replica
 * group: the half of a replica's gate that its CPU enforces, beside the keys its NIC enforces ({@link RdmaGrants}). An
 * atomic sent in a view older than the replica's is refused and takes no effect ({@link StaleViewException}); the
 * replica's {@link ViewGate} drains the atomics of an older view before a view change returns, so none of them runs
 * after it. Atomics of a region that is no replica go over the control fabric as before; these are for clients
 * connected in a view ({@link DisniFabric#connect(java.util.Map, long, long)}).
 *
 * <p>Messages, on the control transport's two-sided channel, beside the key requests (same magic; little-endian):
 * <pre>
 *  request                                                 answer
 *  0      4     5       8        16        24     32     40  0      4       8        16
 *  +------+-----+-------+--------+---------+------+------+   +------+-------+--------+
 *  |MAGIC |KIND | 0 0 0 | VIEW   | OFFSET  | A    | B    |   |MAGIC | COUNT | VALUE  |
 *  +------+-----+-------+--------+---------+------+------+   +------+-------+--------+
 *  KIND 5 (CAS): swap the word at OFFSET for B if it is A     COUNT 0: VALUE is the word found (CAS) or before
 *  KIND 6 (ADD): add A to the word at OFFSET, B unused                 (ADD, SET)
 *  KIND 7 (SET): store B in the word at OFFSET, A unused      COUNT -1: refused; VALUE is the replica's newer view
 * </pre>
 * An offset that is not an aligned word inside the region is refused with the reason, as is a fenced client.
 *
 * <p>Why a word's write goes here and not as an RDMA WRITE: a WRITE the device refuses may still have landed (its
 * acknowledgement lost, its retransmission refused by the revoked key), and a client told "stale" runs it again in the
 * next view. For a lock's release that could free a lock another node took meanwhile. Here a refusal is exact: the
 * memory node checks the view and stores the word under the gate's lock, or does nothing.
 *
 * <p>A fence of a client marks it in the grant book, then waits for the atomics in progress ({@link #drainFenced}); its later ones are refused:
 * atomics run on the control transport's blocking pool, which a closed connection does not stop.
 *
 * <p>Why a memory node's compare-and-swap is atomic with the clients' one-sided verbs: the NIC performs an aligned
 * 8-byte READ or WRITE as one PCIe transaction (docs/rdma-disni.md), as for the control fabric's atomics.
 *
 * <p>Concurrency: thread-safe; atomics of one view run in parallel under the gate's read lock, and a view change waits
 * for them ({@link ViewGate#run}).
 */
final class ViewAtomics {
    static final byte CAS = 5;
    static final byte ADD = 6;
    /** Stores B in the word at OFFSET (A unused) and answers the word before: a word's write (a lock's release). */
    static final byte SET = 7;
    static final int LENGTH = 40;
    /** The answer's status when the replica's region is closed: the atomic did not run ({@link ReplicaGoneException}). */
    static final int GONE = -2;
    /** The answer's status when the client is fenced: the atomic did not run ({@link dev.dex.rdma.FencedException}). */
    static final int FENCED = -3;
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    /** How a client runs atomics and asks views on the replicas it is connected to in a view. */
    interface Client {
        /**
         * Runs a {@link #CAS} or {@link #ADD} at memory server {@code serverId}'s replica in {@code view}.
         *
         * @throws StaleViewException when the replica is in a newer view; nothing was changed
         */
        long atomic(int serverId, byte kind, long view, long offset, long a, long b);

        /** The view memory server {@code serverId}'s replica is in. */
        long view(int serverId);
    }

    private final int serverId;
    private final Region region;
    private final ViewGate gate;
    /** Whether a client is fenced: the region's grant book ({@link RdmaGrants#isFenced}), which a fence marks first. */
    private final java.util.function.LongPredicate fenced;
    /** Atomics hold the read lock while they check their client and run; {@link #drainFenced} takes the write lock. */
    private final java.util.concurrent.locks.ReentrantReadWriteLock fences = new java.util.concurrent.locks.ReentrantReadWriteLock();

    ViewAtomics(int serverId, Region region, ViewGate gate, java.util.function.LongPredicate fenced) {
        this.serverId = serverId;
        this.region = region;
        this.gate = gate;
        this.fenced = fenced;
    }

    /**
     * Called by a fence once it marked its client fenced: returns once no atomic that passed the check before the mark is
     * still running, so none of the client's atomics lands after the fence returns.
     */
    void drainFenced() {
        fences.writeLock().lock();
        fences.writeLock().unlock();
    }

    /**
     * Runs an atomic of {@code client} sent in {@code view}.
     *
     * @throws StaleViewException        when the replica is in a newer view; nothing was changed
     * @throws dev.dex.rdma.FencedException when the client is fenced; nothing was changed
     * @throws IllegalArgumentException for an offset that is no aligned word of the region, or an unknown kind
     */
    long run(long client, byte kind, long view, long offset, long a, long b) {
        if ((offset & (Long.BYTES - 1)) != 0 || !region.contains(offset, Long.BYTES)) {
            throw new IllegalArgumentException("an atomic at offset " + offset + " is no aligned word of a region of "
                    + region.length() + " bytes");
        }
        if (kind != CAS && kind != ADD && kind != SET) {
            throw new IllegalArgumentException("atomic of kind " + kind + ": kind 5 swaps, kind 6 adds, kind 7 sets");
        }
        fences.readLock().lock();
        try {
            if (client != 0 && fenced.test(client)) {
                throw new dev.dex.rdma.FencedException("memory server " + serverId + " fenced client " + Long.toHexString(client)
                        + ": its atomics are refused");
            }
            return gate.run(view, () -> switch (kind) {
                case CAS -> region.compareAndSwapLong(offset, a, b);
                case ADD -> region.getAndAddLong(offset, a);
                default -> region.getAndSetLong(offset, b);
            });
        } finally {
            fences.readLock().unlock();
        }
    }

    /** Whether a message is an atomic (else a key request, {@link RdmaGrants}). */
    static boolean isAtomic(DirectBuffer message, int offset, int length) {
        if (length < 5) {
            return false;
        }
        byte kind = message.getByte(offset + 4);
        return kind == CAS || kind == ADD || kind == SET;
    }

    /**
     * Answers an atomic's message.
     *
     * @throws IllegalArgumentException for a malformed request, which the sender gets with the reason
     */
    int handle(long client, DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
        if (length != LENGTH || message.getInt(offset, ORDER) != RdmaGrants.MAGIC) {
            throw new IllegalArgumentException("an atomic's request has " + LENGTH + " bytes and the key requests' magic, not "
                    + length + " bytes");
        }
        byte kind = message.getByte(offset + 4);
        long view = message.getLong(offset + 8, ORDER);
        reply.putInt(0, RdmaGrants.MAGIC, ORDER);
        try {
            long value = run(client, kind, view, message.getLong(offset + 16, ORDER), message.getLong(offset + 24, ORDER),
                    message.getLong(offset + 32, ORDER));
            reply.putInt(4, 0, ORDER);
            reply.putLong(8, value, ORDER);
        } catch (StaleViewException stale) {
            reply.putInt(4, RdmaGrants.STALE_VIEW, ORDER);
            reply.putLong(8, stale.replicaView(), ORDER);
        } catch (ReplicaGoneException gone) {
            // The region closed (its memory node stops): the atomic did not run, and the client may run it in a newer view.
            return refusal(GONE, gone, reply);
        } catch (dev.dex.rdma.FencedException fenced) {
            // Fenced while the request was on its way: the client must learn it is fenced, as from its connection.
            return refusal(FENCED, fenced, reply);
        }
        return RdmaGrants.ANSWER_HEADER;
    }

    private static int refusal(int status, RuntimeException why, MutableDirectBuffer reply) {
        byte[] text = String.valueOf(why.getMessage()).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        int length = Math.min(text.length, MessageHandler.MAX_MESSAGE - RdmaGrants.ANSWER_HEADER);
        reply.putInt(4, status, ORDER);
        reply.putLong(8, length, ORDER);
        reply.putBytes(RdmaGrants.ANSWER_HEADER, text, 0, length);
        return RdmaGrants.ANSWER_HEADER + length;
    }

    /**
     * Sends an atomic to memory server {@code serverId} over {@code control}.
     *
     * @throws StaleViewException                 when the replica is in a newer view than {@code view}; nothing was changed
     * @throws ReplicaGoneException                when the replica's region is closed; nothing was changed
     * @throws dev.dex.rdma.FencedException        when the server fenced this client; nothing was changed
     * @throws dev.dex.rdma.FabricException        when the server refuses the message or answers something else: the
     *                                             outcome is unknown, as for any failed verb (never another exception,
     *                                             which the engine's repair of a failed verb would not take)
     */
    static long request(MessageSender control, int serverId, byte kind, long view, long offset, long a, long b) {
        UnsafeBuffer request = new UnsafeBuffer(new byte[LENGTH]);
        request.putInt(0, RdmaGrants.MAGIC, ORDER);
        request.putByte(4, kind);
        request.putLong(8, view, ORDER);
        request.putLong(16, offset, ORDER);
        request.putLong(24, a, ORDER);
        request.putLong(32, b, ORDER);
        UnsafeBuffer answer = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        int n;
        try {
            n = control.send(serverId, request, 0, LENGTH, answer, 0);
        } catch (dev.dex.rdma.FabricException failed) {
            throw failed;
        } catch (RuntimeException refused) {
            // The server refused the message (its region is gone from the control fabric, say), or the connection is
            // closed. A verb fails with a FabricException, whatever broke, so that the engine's repair of a failed verb
            // (a lock's release left pending, a partition given up) takes it; anything else would leave a lock taken.
            throw new dev.dex.rdma.FabricException("memory server " + serverId + " refused an atomic: " + refused.getMessage(), refused);
        }
        if (n >= RdmaGrants.ANSWER_HEADER && answer.getInt(0, ORDER) == RdmaGrants.MAGIC) {
            int status = answer.getInt(4, ORDER);
            if (status == GONE || status == FENCED) {
                String why = answer.getStringWithoutLengthUtf8(RdmaGrants.ANSWER_HEADER, n - RdmaGrants.ANSWER_HEADER);
                throw status == GONE ? new ReplicaGoneException(why) : new dev.dex.rdma.FencedException(why);
            }
        }
        if (n != RdmaGrants.ANSWER_HEADER || answer.getInt(0, ORDER) != RdmaGrants.MAGIC) {
            throw new dev.dex.rdma.FabricException("memory server " + serverId + " answered an atomic with " + n + " bytes that are no answer");
        }
        int count = answer.getInt(4, ORDER);
        if (count == RdmaGrants.STALE_VIEW) {
            throw new StaleViewException(serverId, "atomics", view, answer.getLong(8, ORDER));
        }
        if (count != 0) {
            throw new dev.dex.rdma.FabricException("memory server " + serverId + " answered an atomic with status " + count);
        }
        return answer.getLong(8, ORDER);
    }
}
