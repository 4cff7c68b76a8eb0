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
 *                                                            (answers of kinds 5-7 carry STAMP VIEW 16, STAMP SEQ 24)
 *  0      4     5       8        16        24      32          40          48
 *  +------+-----+-------+--------+---------+-------+-----------+-----------+
 *  |MAGIC |KIND | 0 0 0 | VIEW   | OFFSET  | VALUE | STAMP VIEW| STAMP SEQ |   KIND 11 (NEWER): COUNT 0, VALUE 1 if
 *  +------+-----+-------+--------+---------+-------+-----------+-----------+   stored, 0 if the word holds a later one
 * </pre>
 * An offset that is not an aligned word inside the region is refused with the reason, as is a fenced client.
 *
 * <p><b>Stamps: one order per word across processes</b> (docs/replication.md, "Known races", race 2). The primary's
 * memory node runs every atomic of a replica group, so it stamps each change of a word with (its view, a sequence of
 * the word's stripe), under the stripe's monitor: the stamps of one word grow in the order its changes took effect.
 * A compute node converges its change onto each backup with {@link #NEWER}, which stores the value only if its stamp is
 * later than the last one the backup stored for that word. So a convergence that stalls can never move a backup's word
 * back, whatever values came back meanwhile, and no read of the primary is needed after it. The view leads the stamp:
 * a new primary's view is newer than every stamp of the old one. A backup keeps (view, sequence) per word it was sent,
 * which bounds its book by the words that change by atomics (one lock word per 1 KiB node, and a few counters), and
 * drops the book when it becomes a backup anew. Stamps of a view older than the one it became a backup in are the
 * copy's: the copy began after the primary left that view, so it carries them or later values, and they are not stored.
 * Words written in place (a locked node's image over its lock word, by its holder, with the same value) and a copy's
 * pieces take no stamp; the copy reads the primary again after each piece ({@link dev.dex.rdma.replica.RegionCopier}).
 * So a backup holds every acknowledged change of a word or a later one. (Right after a copy it may briefly store an
 * older change than the copy wrote, one whose convergence stalled; the later change's own convergence follows.) This
 * needs one rule of the engine: no word is changed both by atomics and by a multi-word write of another value. A
 * stalled convergence would win over such a write for good. Memory given back and reused would have to keep it too.
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
    /** Stores VALUE in the word at OFFSET of a backup if STAMP is later than the last stored there (see "Stamps"). */
    static final byte NEWER = 11;
    static final int LENGTH = 40;
    static final int NEWER_LENGTH = 48;
    /** An atomic's answer: the header, then the change's stamp (view, sequence; 0, 0 when it changed nothing). */
    static final int STAMPED_ANSWER = RdmaGrants.ANSWER_HEADER + 2 * Long.BYTES;
    private static final int STRIPES = 256;
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
        default long atomic(int serverId, byte kind, long view, long offset, long a, long b) {
            return atomic(serverId, kind, view, offset, a, b, null);
        }

        /**
         * As above; {@code stamp} (two longs, or null) gets the change's stamp: the primary's view and the sequence of
         * the word's stripe, or 0, 0 when the word did not change.
         */
        long atomic(int serverId, byte kind, long view, long offset, long a, long b, long[] stamp);

        /**
         * Stores {@code value} in the word at {@code offset} of memory server {@code serverId}'s backup in {@code view} if
         * the stamp is later than the last one stored there ({@link #NEWER}).
         *
         * @return whether it was stored (false: the word holds a later change, or the copy carried this one)
         * @throws StaleViewException when the replica is in a newer view; nothing was changed
         */
        boolean setIfNewer(int serverId, long view, long offset, long value, long stampView, long stampSeq);

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
    /** A word's stripe: its monitor orders the word's changes and their stamps, and guards the stripe's books. */
    private final Stripe[] stripes = new Stripe[STRIPES];
    /** Stamps of views older than this are the copy's ({@link #stampsFrom}). */
    private volatile long stampFloor;

    /** One stripe of words; every field under its monitor. */
    private static final class Stripe {
        /** The last sequence given to a change of a word of this stripe, as primary. */
        long sequence;
        /** As a backup: the stamp last stored in each word of the stripe, by offset (view, then sequence). */
        final org.agrona.collections.Long2LongHashMap views = new org.agrona.collections.Long2LongHashMap(-1);
        final org.agrona.collections.Long2LongHashMap sequences = new org.agrona.collections.Long2LongHashMap(-1);
    }

    ViewAtomics(int serverId, Region region, ViewGate gate, java.util.function.LongPredicate fenced) {
        this.serverId = serverId;
        this.region = region;
        this.gate = gate;
        this.fenced = fenced;
        for (int i = 0; i < STRIPES; i++) {
            stripes[i] = new Stripe();
        }
    }

    private Stripe stripe(long offset) {
        long word = offset >>> 3;
        return stripes[(int) ((word ^ (word >>> 11)) & (STRIPES - 1))];
    }

    /**
     * The replica becomes a backup in {@code view}: its copy starts after its primary left every older view, so stamps
     * of those are the copy's; the book of stamps stored before is dropped. Called before its gate moves to {@code view}.
     * A call for the floor's view or an older one changes nothing: a backup asked again in its view (its first answer
     * failed) still needs the stamps it stored since, and a late call must not lower the floor.
     */
    synchronized void stampsFrom(long view) {
        if (view <= stampFloor) {
            return;
        }
        stampFloor = view;
        for (Stripe stripe : stripes) {
            synchronized (stripe) {
                stripe.views.clear();
                stripe.sequences.clear();
            }
        }
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
        return run(client, kind, view, offset, a, b, 0, null);
    }

    /**
     * Runs an atomic of {@code client} sent in {@code view}: for {@link #CAS}, {@link #ADD} and {@link #SET},
     * {@code stamp} (or null) gets the change's stamp; for {@link #NEWER}, {@code a} is the value and {@code b},
     * {@code c} its stamp, and the answer is 1 if it was stored, else 0.
     */
    long run(long client, byte kind, long view, long offset, long a, long b, long c, long[] stamp) {
        if ((offset & (Long.BYTES - 1)) != 0 || !region.contains(offset, Long.BYTES)) {
            throw new IllegalArgumentException("an atomic at offset " + offset + " is no aligned word of a region of "
                    + region.length() + " bytes");
        }
        if (kind != CAS && kind != ADD && kind != SET && kind != NEWER) {
            throw new IllegalArgumentException("atomic of kind " + kind + ": kind 5 swaps, kind 6 adds, kind 7 sets, kind 11"
                    + " stores a later change");
        }
        fences.readLock().lock();
        try {
            if (client != 0 && fenced.test(client)) {
                throw new dev.dex.rdma.FencedException("memory server " + serverId + " fenced client " + Long.toHexString(client)
                        + ": its atomics are refused");
            }
            return gate.run(view, () -> {
                Stripe stripe = stripe(offset);
                synchronized (stripe) {
                    return kind == NEWER ? storeIfNewer(stripe, offset, a, b, c) : change(stripe, kind, offset, a, b, stamp);
                }
            });
        } finally {
            fences.readLock().unlock();
        }
    }

    /** Under the stripe's monitor and the gate's read lock (the view cannot move): runs a change and stamps it. */
    private long change(Stripe stripe, byte kind, long offset, long a, long b, long[] stamp) {
        long found = switch (kind) {
            case CAS -> region.compareAndSwapLong(offset, a, b);
            case ADD -> region.getAndAddLong(offset, a);
            default -> region.getAndSetLong(offset, b);
        };
        // A word's write is stamped even when it stores the value it found: its convergence brings the backups along.
        boolean changed = kind == SET || kind == CAS && found == a && a != b || kind == ADD && a != 0;
        long sequence = changed ? ++stripe.sequence : 0;
        if (stamp != null) {
            stamp[0] = changed ? gate.view() : 0;
            stamp[1] = sequence;
        }
        return found;
    }

    /** Under the stripe's monitor: stores {@code value} if its stamp is later than the word's last (see "Stamps"). */
    private long storeIfNewer(Stripe stripe, long offset, long value, long stampView, long stampSeq) {
        if (stampView < stampFloor) {
            return 0; // of a view before this backup's copy began: the copy carried it or a later value
        }
        long lastView = stripe.views.get(offset);
        if (stampView < lastView || stampView == lastView && stampSeq <= stripe.sequences.get(offset)) {
            return 0;
        }
        region.putLongVolatile(offset, value);
        stripe.views.put(offset, stampView);
        stripe.sequences.put(offset, stampSeq);
        return 1;
    }

    /** Whether a message is an atomic (else a key request, {@link RdmaGrants}). */
    static boolean isAtomic(DirectBuffer message, int offset, int length) {
        if (length < 5) {
            return false;
        }
        byte kind = message.getByte(offset + 4);
        return kind == CAS || kind == ADD || kind == SET || kind == NEWER;
    }

    /**
     * Answers an atomic's message.
     *
     * @throws IllegalArgumentException for a malformed request, which the sender gets with the reason
     */
    int handle(long client, DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
        byte kind = length >= 5 ? message.getByte(offset + 4) : 0;
        int expected = kind == NEWER ? NEWER_LENGTH : LENGTH;
        if (length != expected || message.getInt(offset, ORDER) != RdmaGrants.MAGIC) {
            throw new IllegalArgumentException("an atomic's request of kind " + kind + " has " + expected + " bytes and the key"
                    + " requests' magic, not " + length + " bytes");
        }
        long view = message.getLong(offset + 8, ORDER);
        reply.putInt(0, RdmaGrants.MAGIC, ORDER);
        try {
            long[] stamp = kind == NEWER ? null : new long[2];
            long value = run(client, kind, view, message.getLong(offset + 16, ORDER), message.getLong(offset + 24, ORDER),
                    message.getLong(offset + 32, ORDER), kind == NEWER ? message.getLong(offset + 40, ORDER) : 0, stamp);
            reply.putInt(4, 0, ORDER);
            reply.putLong(8, value, ORDER);
            if (stamp != null) {
                reply.putLong(16, stamp[0], ORDER);
                reply.putLong(24, stamp[1], ORDER);
                return STAMPED_ANSWER;
            }
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
        return request(control, serverId, kind, view, offset, a, b, 0, null);
    }

    /**
     * As above, for every kind: {@code stamp} (or null) gets the change's stamp ({@link #CAS}, {@link #ADD}, {@link #SET});
     * for {@link #NEWER}, {@code a} is the value and {@code b}, {@code c} its stamp.
     */
    static long request(MessageSender control, int serverId, byte kind, long view, long offset, long a, long b, long c,
                        long[] stamp) {
        int length = kind == NEWER ? NEWER_LENGTH : LENGTH;
        UnsafeBuffer request = new UnsafeBuffer(new byte[length]);
        request.putInt(0, RdmaGrants.MAGIC, ORDER);
        request.putByte(4, kind);
        request.putLong(8, view, ORDER);
        request.putLong(16, offset, ORDER);
        request.putLong(24, a, ORDER);
        request.putLong(32, b, ORDER);
        if (kind == NEWER) {
            request.putLong(40, c, ORDER);
        }
        UnsafeBuffer answer = new UnsafeBuffer(new byte[MessageHandler.MAX_MESSAGE]);
        int n;
        try {
            n = control.send(serverId, request, 0, length, answer, 0);
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
        if (n < RdmaGrants.ANSWER_HEADER || answer.getInt(0, ORDER) != RdmaGrants.MAGIC) {
            throw new dev.dex.rdma.FabricException("memory server " + serverId + " answered an atomic with " + n + " bytes that are no answer");
        }
        int count = answer.getInt(4, ORDER);
        if (count == RdmaGrants.STALE_VIEW && n == RdmaGrants.ANSWER_HEADER) {
            throw new StaleViewException(serverId, "atomics", view, answer.getLong(8, ORDER));
        }
        int expected = kind == NEWER ? RdmaGrants.ANSWER_HEADER : STAMPED_ANSWER;
        if (count != 0 || n != expected) {
            throw new dev.dex.rdma.FabricException("memory server " + serverId + " answered an atomic with status " + count
                    + " in " + n + " bytes");
        }
        if (stamp != null) {
            stamp[0] = answer.getLong(16, ORDER);
            stamp[1] = answer.getLong(24, ORDER);
        }
        return answer.getLong(8, ORDER);
    }
}
