package dev.dex.core.offload;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.core.tree.TreeSettings;

/**
 * An {@link OffloadRequest} phase as a two-sided fabric message, and its answer ({@link MessageOffloadChannel},
 * {@link OffloadMessageHandler}). Little-endian, as every fabric layout.
 *
 * <p>Request:
 * <pre>
 *   0       1    2     4           8          16          24        32            40         48              40 + W
 *  +-------+----+-----+-----------+----------+-----------+---------+-------------+----------+---------------+
 *  | phase | op | pad | partition | key word | new value |  start  | owner epoch | deadline | key words 1.. |
 *  |       |    |     |           |    0     |           |         |             |          | (W - 8 bytes) |
 *  +-------+----+-----+-----------+----------+-----------+---------+-------------+----------+---------------+
 * </pre>
 * A key of W bytes is W / 8 words ({@code KeyFormat}): the first at 8, the others after the deadline, so a request
 * of an 8-byte key is 48 bytes as it always was, and one of a wider key {@code 40 + W}.
 * Answer:
 * <pre>
 *   0        1       2             3     8       16
 *  +--------+-------+-------------+-----+-------+-----------------------------------
 *  | status | found | path length | pad | value | path length x (address, version)
 *  +--------+-------+-------------+-----+-------+-----------------------------------
 * </pre>
 * An answer carries the path only for a request that ran ({@code OK}). A path is at most
 * {@link TreeSettings#MAX_HEIGHT} long, so an answer fits in {@link #MAX_LENGTH} bytes (272 with 16 levels).
 * The partition and the owner epoch say whose the request is; the memory server checks them (OwnershipTable).
 * The deadline (wall-clock milliseconds, 0 for none) is when the memory server must no longer start it: half the
 * sender's timeout after sending, so a request never runs after its sender gave up on it and fell back (a write
 * that ran late could undo later writes; the hosts' clocks must agree within half the timeout, as for the
 * cluster's channel).
 */
final class OffloadMessageDescriptor {
    static final int PHASE_OFFSET = 0;
    static final int OP_OFFSET = 1;
    static final int PATH_LENGTH_OFFSET = 2;
    static final int PARTITION_OFFSET = 4;
    static final int KEY_OFFSET = 8;
    static final int NEW_VALUE_OFFSET = 16;
    static final int START_OFFSET = 24;
    static final int EPOCH_OFFSET = 32;
    static final int DEADLINE_OFFSET = 40;
    static final int REQUEST_LENGTH = 48;
    /** Where a wider key's further words start. */
    static final int MORE_KEY_OFFSET = 48;
    static final int MAX_REQUEST_LENGTH = 40 + dev.dex.core.node.KeyFormat.MAX_BYTES;

    static final int STATUS_OFFSET = 0;
    static final int FOUND_OFFSET = 1;
    static final int VALUE_OFFSET = 8;
    static final int ANSWER_PATH_OFFSET = 16;

    static final int PATH_ENTRY_LENGTH = 16;
    static final int MAX_LENGTH = Math.max(MAX_REQUEST_LENGTH, ANSWER_PATH_OFFSET + TreeSettings.MAX_HEIGHT * PATH_ENTRY_LENGTH);

    private OffloadMessageDescriptor() {
    }

    /** Writes {@code request} with {@code deadline} (wall-clock milliseconds, 0 for none); returns the message length. */
    static int encodeRequest(OffloadRequest request, long deadline, MutableDirectBuffer out) {
        out.putByte(PHASE_OFFSET, (byte) request.phase());
        out.putByte(OP_OFFSET, (byte) request.op());
        out.putShort(OP_OFFSET + 1, (short) 0);
        out.putInt(PARTITION_OFFSET, request.partition());
        long[] key = request.key();
        out.putLong(KEY_OFFSET, key[0]);
        out.putLong(NEW_VALUE_OFFSET, request.newValue());
        out.putLong(START_OFFSET, request.start());
        out.putLong(EPOCH_OFFSET, request.epoch());
        out.putLong(DEADLINE_OFFSET, deadline);
        for (int w = 1; w < key.length; w++) {
            out.putLong(MORE_KEY_OFFSET + (w - 1) * Long.BYTES, key[w]);
        }
        return REQUEST_LENGTH + (key.length - 1) * Long.BYTES;
    }

    /** Rebuilds a request from a message; a malformed one throws {@link IllegalArgumentException} saying why. */
    static OffloadRequest decodeRequest(DirectBuffer message, int offset, int length) {
        if (length < REQUEST_LENGTH || length > MAX_REQUEST_LENGTH || (length - REQUEST_LENGTH) % Long.BYTES != 0) {
            throw new IllegalArgumentException("an offload message of " + length + " bytes, where one has " + REQUEST_LENGTH
                    + " plus 8 per key word after the first, up to " + MAX_REQUEST_LENGTH);
        }
        long[] key = new long[1 + (length - REQUEST_LENGTH) / Long.BYTES];
        key[0] = message.getLong(offset + KEY_OFFSET);
        for (int w = 1; w < key.length; w++) {
            key[w] = message.getLong(offset + MORE_KEY_OFFSET + (w - 1) * Long.BYTES);
        }
        return OffloadRequest.received(message.getByte(offset + PHASE_OFFSET), message.getByte(offset + OP_OFFSET),
                message.getInt(offset + PARTITION_OFFSET), message.getLong(offset + EPOCH_OFFSET), key,
                message.getLong(offset + NEW_VALUE_OFFSET), message.getLong(offset + START_OFFSET));
    }

    /** The deadline of a request message that {@link #decodeRequest} accepted. */
    static long deadline(DirectBuffer message, int offset) {
        return message.getLong(offset + DEADLINE_OFFSET);
    }

    /** Writes the memory side's outcome of {@code request}; returns the answer's length. */
    static int encodeAnswer(OffloadRequest request, MutableDirectBuffer out) {
        int status = request.status();
        int pathLength = status == OffloadRequest.OK ? request.pathLength() : 0;
        out.putByte(STATUS_OFFSET, (byte) status);
        out.putByte(FOUND_OFFSET, (byte) (request.found() ? 1 : 0));
        out.putByte(PATH_LENGTH_OFFSET, (byte) pathLength);
        out.putLong(VALUE_OFFSET, request.value());
        for (int i = 0; i < pathLength; i++) {
            out.putLong(ANSWER_PATH_OFFSET + i * PATH_ENTRY_LENGTH, request.pathNode(i));
            out.putLong(ANSWER_PATH_OFFSET + i * PATH_ENTRY_LENGTH + Long.BYTES, request.pathVersion(i));
        }
        return ANSWER_PATH_OFFSET + pathLength * PATH_ENTRY_LENGTH;
    }

    /** Fills {@code request}'s outcome from an answer and completes it; a malformed answer throws. */
    static void decodeAnswer(DirectBuffer answer, int length, OffloadRequest request) {
        if (length < ANSWER_PATH_OFFSET) {
            throw new IllegalArgumentException("an offload answer of " + length + " bytes is shorter than its header");
        }
        int pathLength = answer.getByte(PATH_LENGTH_OFFSET) & 0xFF;
        if (pathLength > TreeSettings.MAX_HEIGHT || length != ANSWER_PATH_OFFSET + pathLength * PATH_ENTRY_LENGTH) {
            throw new IllegalArgumentException("an offload answer of " + length + " bytes claims a path of " + pathLength + " nodes");
        }
        long[] path = new long[pathLength];
        long[] versions = new long[pathLength];
        for (int i = 0; i < pathLength; i++) {
            path[i] = answer.getLong(ANSWER_PATH_OFFSET + i * PATH_ENTRY_LENGTH);
            versions[i] = answer.getLong(ANSWER_PATH_OFFSET + i * PATH_ENTRY_LENGTH + Long.BYTES);
        }
        request.answer(answer.getByte(STATUS_OFFSET), answer.getByte(FOUND_OFFSET) != 0, answer.getLong(VALUE_OFFSET), path,
                versions, pathLength);
    }
}
