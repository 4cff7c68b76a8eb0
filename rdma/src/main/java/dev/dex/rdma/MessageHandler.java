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
}
