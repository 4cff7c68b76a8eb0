package dev.dex.rdma;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * Runs on a memory server for each two-sided message a client sends (an offloaded operation, for example) and
 * writes the answer. Transports that carry messages call it from their own threads, one message at a time per
 * connection; an implementation used by several connections must be thread-safe.
 */
@FunctionalInterface
public interface MessageHandler {
    /** Largest message and largest answer, in bytes. */
    int MAX_MESSAGE = 4096;

    /**
     * Handles {@code message[offset, offset + length)} and writes the answer at {@code reply[0, n)}.
     *
     * @return n, the answer's length, at most {@link #MAX_MESSAGE}
     * @throws IllegalArgumentException for a malformed message; the sender gets the reason
     */
    int handle(DirectBuffer message, int offset, int length, MutableDirectBuffer reply);

    /**
     * As {@link #handle(DirectBuffer, int, int, MutableDirectBuffer)}, for a message from client {@code client}:
     * the identity the sender's connection greeted with (0: anonymous). Transports that know the sender call
     * this one; handlers that answer by who asks (the {@code disni} fabric's key grants) override it.
     */
    default int handle(long client, DirectBuffer message, int offset, int length, MutableDirectBuffer reply) {
        return handle(message, offset, length, reply);
    }

    /**
     * Whether handling a message may block (system calls, long work): a transport then runs it off its I/O
     * threads and holds back the sender's later requests until it answered. Offloaded operations do not block.
     */
    default boolean blocking() {
        return false;
    }
}
