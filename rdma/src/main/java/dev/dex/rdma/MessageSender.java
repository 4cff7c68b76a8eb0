package dev.dex.rdma;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/** A client that can send two-sided messages to a memory server's {@link MessageHandler}, besides its verbs. */
public interface MessageSender {
    /**
     * Sends {@code message[offset, offset + length)} to memory server {@code serverId} and waits for the answer,
     * which is written at {@code reply[replyOffset, replyOffset + n)}.
     *
     * @return n, the answer's length
     * @throws IllegalArgumentException for a message longer than {@link MessageHandler#MAX_MESSAGE}, an
     *                                  unconnected server, or one that refuses the message (no handler,
     *                                  malformed)
     * @throws FabricException          when the transport fails
     */
    int send(int serverId, DirectBuffer message, int offset, int length, MutableDirectBuffer reply, int replyOffset);

    /** How long {@link #send} waits for an answer before it gives up on it (and throws {@link FabricException}). */
    java.time.Duration timeout();
}
