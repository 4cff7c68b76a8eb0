package dev.dex.rdma.tcp;

/**
 * The frames of the {@code tcp} fabric's wire protocol. Every frame is a 4-byte length (of the rest of the
 * frame) followed by a fixed header and an optional payload; all integers are little-endian.
 *
 * <p>A request, compute side to memory node:
 * <pre>
 *   0        4     5       8        16                24               32        40        48
 *  +--------+-----+-------+--------+-----------------+----------------+---------+---------+-------------
 *  | length | op  | (pad) | count  |   request id    |    address     | operand | operand |  payload
 *  |  u32   | u8  |  3    |  u32   |      u64        |  global, u64   |  1, u64 |  2, u64 |  (WRITE)
 *  +--------+-----+-------+--------+-----------------+----------------+---------+---------+-------------
 * </pre>
 * {@code count} is the bytes to read ({@link #OP_READ}) or written ({@link #OP_WRITE}, then exactly that many
 * payload bytes follow); operand 1 is the expected value of {@link #OP_CAS} or the delta of {@link #OP_FAA};
 * operand 2 the desired value of {@link #OP_CAS}. {@link #OP_HELLO} names the memory server the client
 * expects in the address's server id, and the client's fabric identity in operand 1 (0: none, cannot be
 * fenced); every connection says HELLO before anything else. {@link #OP_MESSAGE} carries {@code count}
 * payload bytes for the memory server's message handler, whose answer is the response's payload.
 * {@link #OP_FENCE} fences the client named in operand 1: its answer comes once every connection of that
 * client is closed, and the requests after it on the same connection wait for it.
 *
 * <p>A response, memory node to compute side, one per request and in request order on each connection:
 * <pre>
 *   0        4        5       8        16                24              32
 *  +--------+--------+-------+--------+-----------------+---------------+-------------
 *  | length | status | (pad) | count  |   request id    |     value     |  payload
 *  |  u32   |   u8   |   3   |  u32   |      u64        |      u64      |  count bytes
 *  +--------+--------+-------+--------+-----------------+---------------+-------------
 * </pre>
 * {@link #STATUS_OK}: value is the word found by CAS/FAA, the region length for HELLO (with the chunk length
 * and the server's largest transfer, its {@code max-transfer}, as two 8-byte payload words; the client splits
 * its transfers by the smaller of its own and the server's); a READ's payload is the bytes read. {@link #STATUS_REFUSED}: the request named
 * memory outside the region, a misaligned word or another server; the payload is the reason in UTF-8 and
 * the connection stays open. {@link #STATUS_FENCED}: the client was fenced; the memory node closes the
 * connection after this answer; a fenced client's open connections get one such answer unasked, with request
 * id {@link #FENCE_NOTICE_ID}, just before they are closed. A frame that breaks the layout (unknown op, wrong payload length, longer than
 * the maximum) is never answered: the memory node logs it and closes that connection.
 *
 * <p>A replica group's stream (docs/replication.md), primary to backup, on a connection of its own: {@link #OP_STREAM}
 * first (the view in operand 1, the stream's identity in operand 2, and as an 8-byte payload the number of the last
 * change the primary applied; the answer's value is 1 when the backup holds exactly that prefix of the stream and 0
 * when it must be copied), then {@link #OP_APPLY} frames in stream order: {@code count} payload bytes for the region at
 * the address's offset, operand 1 the number of the last change applied at the primary when the frame was made
 * (the backup answers with it), operand 2 flags ({@link #APPLY_COPY}, {@link #APPLY_COPY_DONE},
 * {@link #APPLY_FENCE}: the payload is the fenced client's identity). {@link #STATUS_NOT_PRIMARY}: the replica
 * refuses a client because it is not its server's primary, or a stream because it belongs to a newer view; the
 * payload says why and the connection is closed after the answer.
 */
final class TcpFrameDescriptor {
    /** The length prefix, not counted in itself. */
    static final int LENGTH_FIELD_LENGTH = 4;

    static final int OP_OFFSET = 0;
    static final int COUNT_OFFSET = 4;
    static final int REQUEST_ID_OFFSET = 8;
    static final int ADDRESS_OFFSET = REQUEST_ID_OFFSET + 8;
    static final int OPERAND1_OFFSET = ADDRESS_OFFSET + 8;
    static final int OPERAND2_OFFSET = OPERAND1_OFFSET + 8;
    /** Request header length after the length prefix; a WRITE's payload starts here. */
    static final int REQUEST_HEADER_LENGTH = OPERAND2_OFFSET + 8;

    static final int STATUS_OFFSET = 0;
    static final int RESPONSE_ID_OFFSET = 8;
    static final int VALUE_OFFSET = RESPONSE_ID_OFFSET + 8;
    /** Response header length after the length prefix; the payload starts here. */
    static final int RESPONSE_HEADER_LENGTH = VALUE_OFFSET + 8;

    static final byte OP_HELLO = 1;
    static final byte OP_READ = 2;
    static final byte OP_WRITE = 3;
    static final byte OP_CAS = 4;
    static final byte OP_FAA = 5;
    /** A two-sided message for the memory server's {@link dev.dex.rdma.MessageHandler}: count payload bytes. */
    static final byte OP_MESSAGE = 6;
    /** Fences the client whose identity is operand 1 on this memory server. */
    static final byte OP_FENCE = 7;
    /** Opens a replication stream: primary to backup (operand 1 view, operand 2 stream identity, payload: last change). */
    static final byte OP_STREAM = 8;
    /** One frame of a replication stream: bytes for the backup's region, or a fence, or the end of a copy. */
    static final byte OP_APPLY = 9;

    /** OP_APPLY flag: a chunk of a copy of the whole region (not a change). */
    static final long APPLY_COPY = 1;
    /** OP_APPLY flag: the copy is complete; the backup holds the stream's prefix from now on. */
    static final long APPLY_COPY_DONE = 2;
    /** OP_APPLY flag: fence the client whose identity is the 8-byte payload. */
    static final long APPLY_FENCE = 4;

    static final byte STATUS_OK = 0;
    static final byte STATUS_REFUSED = 1;
    static final byte STATUS_FENCED = 2;
    /** This replica does not serve clients (it is a backup, or a primary that was replaced), or the stream is of an older view. */
    static final byte STATUS_NOT_PRIMARY = 3;
    /** The request id of the FENCED answer a fenced client's connections get before they are closed. */
    static final long FENCE_NOTICE_ID = -1;

    /** Longest reason text a memory node sends with a refusal. */
    static final int MAX_REASON_BYTES = 512;

    private TcpFrameDescriptor() {
    }

    /** Longest frame, length prefix included, either side accepts for transfers of {@code maxTransfer} bytes. */
    static int maxFrameLength(int maxTransfer) {
        return LENGTH_FIELD_LENGTH + Math.max(REQUEST_HEADER_LENGTH, RESPONSE_HEADER_LENGTH)
                + Math.max(maxTransfer, Math.max(MAX_REASON_BYTES, dev.dex.rdma.MessageHandler.MAX_MESSAGE));
    }

    static String opName(int op) {
        return switch (op) {
            case OP_HELLO -> "HELLO";
            case OP_READ -> "READ";
            case OP_WRITE -> "WRITE";
            case OP_CAS -> "CAS";
            case OP_FAA -> "FAA";
            case OP_MESSAGE -> "MESSAGE";
            case OP_FENCE -> "FENCE";
            case OP_STREAM -> "STREAM";
            case OP_APPLY -> "APPLY";
            default -> "op " + op;
        };
    }
}
