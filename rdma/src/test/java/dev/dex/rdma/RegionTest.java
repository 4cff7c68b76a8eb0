package dev.dex.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.agrona.BufferUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A region of small segments (4 KiB, the last 1000 bytes) so that copies cross segment boundaries. */
class RegionTest {
    private static final int SHIFT = 12;
    private static final int SEGMENT = 1 << SHIFT;
    private static final int LAST = 1000;
    private static final long LENGTH = 3L * SEGMENT + LAST;

    private AtomicBuffer[] segments;
    private Region region;

    @BeforeEach
    void newRegion() {
        segments = new AtomicBuffer[] {segment(SEGMENT), segment(SEGMENT), segment(SEGMENT), segment(LAST)};
        region = new Region(segments, SHIFT);
    }

    @Test
    void lengthIsTheSumOfTheSegments() {
        assertEquals(LENGTH, region.length());
    }

    @Test
    void copySpanningThreeSegmentsLandsInEachOfThem() {
        int offset = SEGMENT - 96;
        int length = 96 + SEGMENT + 104;
        byte[] bytes = RemoteMemoryContractTest.pattern(length, 4);

        region.putBytes(offset, new UnsafeBuffer(bytes), 0, length);

        assertArrayEquals(slice(bytes, 0, 96), bytesOf(segments[0], SEGMENT - 96, 96));
        assertArrayEquals(slice(bytes, 96, SEGMENT), bytesOf(segments[1], 0, SEGMENT));
        assertArrayEquals(slice(bytes, 96 + SEGMENT, 104), bytesOf(segments[2], 0, 104));
        assertEquals(0, segments[0].getByte(SEGMENT - 97), "byte before the copy");
        assertEquals(0, segments[2].getByte(104), "byte after the copy");
        UnsafeBuffer back = new UnsafeBuffer(new byte[length + 2]);
        region.getBytes(offset, back, 1, length);
        assertArrayEquals(bytes, slice(back.byteArray(), 1, length));
    }

    @Test
    void copyReachesTheEndOfTheShorterLastSegment() {
        byte[] bytes = RemoteMemoryContractTest.pattern(LAST + 10, 6);

        region.putBytes(LENGTH - bytes.length, new UnsafeBuffer(bytes), 0, bytes.length);

        assertArrayEquals(slice(bytes, 10, LAST), bytesOf(segments[3], 0, LAST));
        assertArrayEquals(slice(bytes, 0, 10), bytesOf(segments[2], SEGMENT - 10, 10));
    }

    @Test
    void wordsResolveToTheirSegment() {
        region.putLongVolatile(2L * SEGMENT + 8, 0x1122334455667788L);
        assertEquals(0x1122334455667788L, segments[2].getLongVolatile(8));

        assertEquals(0, region.getAndAddLong(3L * SEGMENT + LAST - 8, 5));
        assertEquals(5, segments[3].getLongVolatile(LAST - 8));

        assertEquals(5, region.compareAndSwapLong(3L * SEGMENT + LAST - 8, 4, 9), "a miss returns the current value");
        assertEquals(5, region.compareAndSwapLong(3L * SEGMENT + LAST - 8, 5, 9), "a hit returns the expected value");
        assertEquals(9, region.getLongVolatile(3L * SEGMENT + LAST - 8));
    }

    @Test
    void rangeOutsideTheRegionIsRejectedAndCopiesNothing() {
        UnsafeBuffer ones = new UnsafeBuffer(RemoteMemoryContractTest.pattern(16, 1));

        assertThrows(IllegalArgumentException.class, () -> region.putBytes(LENGTH - 8, ones, 0, 16));
        assertThrows(IllegalArgumentException.class, () -> region.putBytes(-1, ones, 0, 4));
        assertThrows(IllegalArgumentException.class, () -> region.getBytes(LENGTH, ones, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> region.getBytes(0, ones, 0, -1));
        assertThrows(IllegalArgumentException.class, () -> region.getLongVolatile(LENGTH));
        assertThrows(IllegalArgumentException.class, () -> region.putLongVolatile(-8, 1));

        assertArrayEquals(new byte[8], bytesOf(segments[3], LAST - 8, 8));
        assertArrayEquals(new byte[4], bytesOf(segments[0], 0, 4));
    }

    @Test
    void misalignedWordIsRejected() {
        assertThrows(IllegalArgumentException.class, () -> region.getLongVolatile(SEGMENT + 4));
        assertThrows(IllegalArgumentException.class, () -> region.putLongVolatile(1, 1));
        assertThrows(IllegalArgumentException.class, () -> region.compareAndSwapLong(SEGMENT - 4, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> region.getAndAddLong(2, 1));
        assertEquals(0, segments[1].getLongVolatile(0));
    }

    @Test
    void containsChecksBothEndsOfTheRange() {
        assertTrue(region.contains(0, 0));
        assertTrue(region.contains(0, (int) LENGTH));
        assertTrue(region.contains(LENGTH, 0));
        assertFalse(region.contains(LENGTH, 1));
        assertFalse(region.contains(1, (int) LENGTH));
        assertFalse(region.contains(-1, 1));
        assertFalse(region.contains(0, -1));
    }

    @Test
    void constructorRejectsAnInnerSegmentOfTheWrongLength() {
        AtomicBuffer[] bad = {segment(SEGMENT), segment(SEGMENT / 2), segment(SEGMENT)};

        assertThrows(IllegalArgumentException.class, () -> new Region(bad, SHIFT));
    }

    private static AtomicBuffer segment(int length) {
        return new UnsafeBuffer(BufferUtil.allocateDirectAligned(length, 64));
    }

    private static byte[] bytesOf(AtomicBuffer buffer, int index, int length) {
        byte[] bytes = new byte[length];
        buffer.getBytes(index, bytes);
        return bytes;
    }

    private static byte[] slice(byte[] bytes, int from, int length) {
        byte[] slice = new byte[length];
        System.arraycopy(bytes, from, slice, 0, length);
        return slice;
    }
}
