package dev.dex.rdma;

import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Objects;

import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * A memory server's region: up to 2^48 bytes of off-heap memory, addressed by a {@code long} offset.
 *
 * <p>Java buffers are limited to 2 GiB, so a region is a list of equally sized segments (a power of two);
 * reads and writes that cross a segment boundary are split. Chunks never cross a segment boundary
 * (the chunk length divides the segment length), so a tree node always lies in one segment.
 *
 * <p>Concurrency: a region is shared by every client and, for the {@code shm} transport, by every
 * process that maps it. Bulk copies are plain; 8-byte aligned words are accessed with volatile
 * semantics or atomically ({@link #compareAndSwapLong}, {@link #getAndAddLong}). Ordering between verbs
 * is imposed by {@link DirectRemoteMemory}, not here. Words are in native byte order, which the fabric
 * requires to be little-endian.
 */
public final class Region {
    /** Segments of 1 GiB keep every segment within a Java buffer's 2 GiB limit. */
    public static final int DEFAULT_SEGMENT_SHIFT = 30;

    private final AtomicBuffer[] segments;
    private final int segmentShift;
    private final long segmentMask;
    private final long length;

    /**
     * @param segments      every segment but the last has length {@code 1 << segmentShift}
     * @param segmentShift  log2 of the segment length
     */
    public Region(AtomicBuffer[] segments, int segmentShift) {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
            throw new IllegalStateException("the fabric requires a little-endian platform");
        }
        this.segments = Objects.requireNonNull(segments).clone();
        this.segmentShift = segmentShift;
        this.segmentMask = (1L << segmentShift) - 1;
        long total = 0;
        for (int i = 0; i < segments.length; i++) {
            int capacity = segments[i].capacity();
            if (i < segments.length - 1 && capacity != (1L << segmentShift)) {
                throw new IllegalArgumentException("segment " + i + " has " + capacity + " bytes, expected " + (1L << segmentShift));
            }
            total += capacity;
        }
        this.length = total;
    }

    /** A zeroed region of {@code length} bytes in this process's off-heap memory, 64-byte aligned segments. */
    public static Region offHeap(long length) {
        return offHeap(length, DEFAULT_SEGMENT_SHIFT);
    }

    /** As {@link #offHeap(long)}, in segments of {@code 2^segmentShift} bytes (at most 1 GiB). */
    public static Region offHeap(long length, int segmentShift) {
        if (length <= 0) {
            throw new IllegalArgumentException("region length must be > 0: " + length);
        }
        if (segmentShift < 6 || segmentShift > DEFAULT_SEGMENT_SHIFT) {
            throw new IllegalArgumentException("segment shift must be in [6, " + DEFAULT_SEGMENT_SHIFT + "]: " + segmentShift);
        }
        int count = (int) ((length + (1L << segmentShift) - 1) >>> segmentShift);
        AtomicBuffer[] segments = new AtomicBuffer[count];
        for (int i = 0; i < count; i++) {
            int segmentLength = (int) Math.min(1L << segmentShift, length - ((long) i << segmentShift));
            segments[i] = new UnsafeBuffer(BufferUtil.allocateDirectAligned(segmentLength, 64));
        }
        return new Region(segments, segmentShift);
    }

    public long length() {
        return length;
    }

    /** Number of segments; each is one contiguous piece of memory (for example to register with a NIC). */
    public int segmentCount() {
        return segments.length;
    }

    /** Segment {@code index}, which starts at region offset {@code index << segmentShift()}. */
    public AtomicBuffer segment(int index) {
        return segments[index];
    }

    /** log2 of the segment length. */
    public int segmentShift() {
        return segmentShift;
    }

    /**
     * Copies {@code len} bytes at {@code offset} into {@code dst} as a one-sided read does: an 8-byte aligned
     * read of one or two words loads whole words (never torn), anything else is a plain copy. Ends with a
     * full fence, so the reads and writes a serving thread executes take effect in order.
     */
    public void readVerb(long offset, MutableDirectBuffer dst, int dstIndex, int len) {
        if (len == Long.BYTES && (offset & 7) == 0) {
            dst.putLong(dstIndex, getLongVolatile(offset));
        } else if (len == 2 * Long.BYTES && (offset & 7) == 0) {
            dst.putLong(dstIndex, getLongVolatile(offset));
            dst.putLong(dstIndex + Long.BYTES, getLongVolatile(offset + Long.BYTES));
        } else {
            getBytes(offset, dst, dstIndex, len);
        }
        VarHandle.fullFence();
    }

    /**
     * Copies {@code len} bytes of {@code src} to {@code offset} as a one-sided write does: an 8-byte aligned
     * word is one volatile store (never torn), anything else a plain copy; fenced on both sides.
     */
    public void writeVerb(long offset, DirectBuffer src, int srcIndex, int len) {
        VarHandle.fullFence();
        if (len == Long.BYTES && (offset & 7) == 0) {
            putLongVolatile(offset, src.getLong(srcIndex));
        } else {
            putBytes(offset, src, srcIndex, len);
        }
        VarHandle.fullFence();
    }

    /** Copies {@code len} bytes at {@code offset} into {@code dst}. */
    public void getBytes(long offset, MutableDirectBuffer dst, int dstIndex, int len) {
        checkRange(offset, len);
        while (len > 0) {
            AtomicBuffer segment = segments[(int) (offset >>> segmentShift)];
            int inSegment = (int) (offset & segmentMask);
            int n = Math.min(len, segment.capacity() - inSegment);
            segment.getBytes(inSegment, dst, dstIndex, n);
            offset += n;
            dstIndex += n;
            len -= n;
        }
    }

    /** Copies {@code len} bytes of {@code src} to {@code offset}. */
    public void putBytes(long offset, DirectBuffer src, int srcIndex, int len) {
        checkRange(offset, len);
        while (len > 0) {
            AtomicBuffer segment = segments[(int) (offset >>> segmentShift)];
            int inSegment = (int) (offset & segmentMask);
            int n = Math.min(len, segment.capacity() - inSegment);
            segment.putBytes(inSegment, src, srcIndex, n);
            offset += n;
            srcIndex += n;
            len -= n;
        }
    }

    public long getLongVolatile(long offset) {
        checkWord(offset);
        return segments[(int) (offset >>> segmentShift)].getLongVolatile((int) (offset & segmentMask));
    }

    public void putLongVolatile(long offset, long value) {
        checkWord(offset);
        segments[(int) (offset >>> segmentShift)].putLongVolatile((int) (offset & segmentMask), value);
    }

    /** Returns the value found; the swap happened exactly when it equals {@code expected}. */
    public long compareAndSwapLong(long offset, long expected, long desired) {
        checkWord(offset);
        AtomicBuffer segment = segments[(int) (offset >>> segmentShift)];
        int index = (int) (offset & segmentMask);
        while (true) {
            long current = segment.getLongVolatile(index);
            if (current != expected) {
                return current;
            }
            if (segment.compareAndSetLong(index, expected, desired)) {
                return expected;
            }
        }
    }

    public long getAndAddLong(long offset, long delta) {
        checkWord(offset);
        return segments[(int) (offset >>> segmentShift)].getAndAddLong((int) (offset & segmentMask), delta);
    }

    /** Stores {@code value} in the word at {@code offset} atomically and returns the word it replaced. */
    public long getAndSetLong(long offset, long value) {
        checkWord(offset);
        return segments[(int) (offset >>> segmentShift)].getAndSetLong((int) (offset & segmentMask), value);
    }

    /** True when {@code [offset, offset + len)} lies inside this region. */
    public boolean contains(long offset, int len) {
        return offset >= 0 && len >= 0 && offset <= length - len;
    }

    private void checkRange(long offset, int len) {
        if (!contains(offset, len)) {
            throw new IllegalArgumentException("range [" + offset + ", " + offset + " + " + len + ") outside region of " + length + " bytes");
        }
    }

    private void checkWord(long offset) {
        checkRange(offset, Long.BYTES);
        if ((offset & 7) != 0) {
            throw new IllegalArgumentException("atomic word at offset " + offset + " is not 8-byte aligned");
        }
    }
}
