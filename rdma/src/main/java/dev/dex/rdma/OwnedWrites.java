package dev.dex.rdma;

import org.agrona.DirectBuffer;

/**
 * Writes of bytes that only the writing client changes while it holds what they belong to, such as a partition's redo
 * log records and checkpoint: no other client writes them, and the owner writes them one after the other. Over a
 * fabric with a failover wait ({@code tcp} with replica groups, docs/replication.md), such a write that fails because
 * its server's primary died runs once more on the new primary. A plain {@link RemoteMemory#write} never runs twice: its
 * bytes may have been changed by another client in between (a lock word released, then taken by someone else), and a
 * second run would undo that.
 *
 * <p>Concurrency: the mark is per thread (a write's retry happens on the thread that made it, inside the call), so
 * wrappers of a {@link RemoteMemory} pass it through unchanged.
 */
public final class OwnedWrites {
    private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);

    private OwnedWrites() {
    }

    /** {@code memory.write(...)} of bytes only this client writes (see the class comment). */
    public static void write(RemoteMemory memory, long address, DirectBuffer src, int srcOffset, int length) {
        int[] depth = DEPTH.get();
        depth[0]++;
        try {
            memory.write(address, src, srcOffset, length);
        } finally {
            depth[0]--;
        }
    }

    /** Whether the calling thread is inside {@link #write}. */
    public static boolean active() {
        return DEPTH.get()[0] > 0;
    }
}
