package dev.dex.actors.partition;

import java.util.List;

/**
 * The bounds of the binary batch layout ({@link BatchSerializer}) that the senders of batches keep to: the client
 * splits its bundles by them, and a compute node's {@link PartitionRouter} its bundles of answers. The serializer
 * enforces the same bounds when it writes and reads.
 *
 * <p>Why a class of its own: the senders size their messages by these numbers without needing the codec, and the
 * codec, which reads and writes the senders' messages, would otherwise be depended on by the very classes whose
 * messages it encodes.
 */
public final class WireLimits {
    /** Most batches one bundle, or answers one answer bundle, may carry. */
    public static final int MAX_BUNDLE = 1024;
    /** Longest string accepted (an actor path, a host address, an error message). */
    static final int MAX_STRING = 16 * 1024;
    /** An operation's fixed fields; a wider key adds 8 bytes per further word. */
    public static final int OP_BYTES = 4 + 1 + 8 + 8 + 4;

    private WireLimits() {
    }

    /** The bytes {@code ops} take on the wire. */
    public static int opBytes(List<Ops.Op> ops) {
        int bytes = ops.size() * OP_BYTES;
        for (Ops.Op op : ops) {
            bytes += (op.key().length - 1) * Long.BYTES;
        }
        return bytes;
    }
}
