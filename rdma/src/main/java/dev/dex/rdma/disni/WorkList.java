package dev.dex.rdma.disni;

import java.util.Arrays;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * One-sided work requests to post together ({@link OneSidedVerbs#postAll}): each a READ into a buffer or a WRITE from
 * one, of at most the transport's maximum transfer inside one registered segment, with the caller's tag (the verb
 * of a {@link dev.dex.rdma.VerbBatch} it is a piece of) and, once posted, its failure or null.
 *
 * <p>Reused: {@link #clear()} empties it, and the arrays it grew stay. Not thread-safe: one thread fills it, posts it
 * and reads the outcomes.
 */
final class WorkList {
    private int size;
    private int[] serverIds = new int[16];
    private boolean[] reads = new boolean[16];
    private long[] remoteAddresses = new long[16];
    private int[] rkeys = new int[16];
    private Object[] buffers = new Object[16];
    private int[] offsets = new int[16];
    private int[] lengths = new int[16];
    private int[] tags = new int[16];
    private RuntimeException[] failures = new RuntimeException[16];

    /** Adds a READ of {@code length} bytes at {@code remoteAddress} into {@code dst[dstOffset..]}. */
    void read(int tag, int serverId, long remoteAddress, int rkey, MutableDirectBuffer dst, int dstOffset, int length) {
        add(tag, serverId, true, remoteAddress, rkey, dst, dstOffset, length);
    }

    /** Adds a WRITE of {@code src[srcOffset..srcOffset+length)} to {@code remoteAddress}. */
    void write(int tag, int serverId, long remoteAddress, int rkey, DirectBuffer src, int srcOffset, int length) {
        add(tag, serverId, false, remoteAddress, rkey, src, srcOffset, length);
    }

    private void add(int tag, int serverId, boolean read, long remoteAddress, int rkey, Object buffer, int offset, int length) {
        if (size == tags.length) {
            int grown = size * 2;
            serverIds = Arrays.copyOf(serverIds, grown);
            reads = Arrays.copyOf(reads, grown);
            remoteAddresses = Arrays.copyOf(remoteAddresses, grown);
            rkeys = Arrays.copyOf(rkeys, grown);
            buffers = Arrays.copyOf(buffers, grown);
            offsets = Arrays.copyOf(offsets, grown);
            lengths = Arrays.copyOf(lengths, grown);
            tags = Arrays.copyOf(tags, grown);
            failures = Arrays.copyOf(failures, grown);
        }
        serverIds[size] = serverId;
        reads[size] = read;
        remoteAddresses[size] = remoteAddress;
        rkeys[size] = rkey;
        buffers[size] = buffer;
        offsets[size] = offset;
        lengths[size] = length;
        tags[size] = tag;
        failures[size] = null;
        size++;
    }

    void clear() {
        Arrays.fill(buffers, 0, size, null);
        Arrays.fill(failures, 0, size, null);
        size = 0;
    }

    int size() {
        return size;
    }

    int serverId(int i) {
        return serverIds[i];
    }

    boolean isRead(int i) {
        return reads[i];
    }

    long remoteAddress(int i) {
        return remoteAddresses[i];
    }

    int rkey(int i) {
        return rkeys[i];
    }

    MutableDirectBuffer destination(int i) {
        return (MutableDirectBuffer) buffers[i];
    }

    DirectBuffer source(int i) {
        return (DirectBuffer) buffers[i];
    }

    int offset(int i) {
        return offsets[i];
    }

    int length(int i) {
        return lengths[i];
    }

    int tag(int i) {
        return tags[i];
    }

    /** The failure of request {@code i} once posted, or null when it completed. */
    RuntimeException failure(int i) {
        return failures[i];
    }

    void fail(int i, RuntimeException failure) {
        failures[i] = failure;
    }
}
