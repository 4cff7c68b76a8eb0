package dev.dex.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class GlobalAddressTest {

    @Test
    void masksAreDisjointAndTogetherCoverTheWord() {
        assertEquals(0x0000_FFFF_FFFF_FFFFL, GlobalAddress.OFFSET_MASK);
        assertEquals(0x7FFF_0000_0000_0000L, GlobalAddress.SERVER_ID_MASK);
        assertEquals(0x8000_0000_0000_0000L, GlobalAddress.SWIZZLED_BIT);
        assertEquals(48, GlobalAddress.SERVER_ID_SHIFT);
        assertEquals(0, GlobalAddress.OFFSET_MASK & GlobalAddress.SERVER_ID_MASK);
        assertEquals(0, GlobalAddress.SERVER_ID_MASK & GlobalAddress.SWIZZLED_BIT);
        assertEquals(-1L, GlobalAddress.OFFSET_MASK | GlobalAddress.SERVER_ID_MASK | GlobalAddress.SWIZZLED_BIT);
        assertEquals(32_767, GlobalAddress.MAX_SERVER_ID);
        assertEquals((1L << 48) - 1, GlobalAddress.MAX_OFFSET);
    }

    @Test
    void ofRoundTripsServerIdAndOffsetAtTheEdges() {
        for (int serverId : new int[] {0, 1, 4096, GlobalAddress.MAX_SERVER_ID}) {
            for (long offset : new long[] {0, 1, 4096, 1L << 47, GlobalAddress.MAX_OFFSET}) {
                long address = GlobalAddress.of(serverId, offset);
                assertEquals(serverId, GlobalAddress.serverId(address), () -> GlobalAddress.toString(address));
                assertEquals(offset, GlobalAddress.offset(address), () -> GlobalAddress.toString(address));
                assertFalse(GlobalAddress.isSwizzled(address), () -> GlobalAddress.toString(address));
            }
        }
        assertEquals(0x0003_0000_0001_0400L, GlobalAddress.of(3, 0x10400));
        assertEquals(Long.MAX_VALUE, GlobalAddress.of(GlobalAddress.MAX_SERVER_ID, GlobalAddress.MAX_OFFSET));
    }

    @Test
    void ofRejectsAServerIdOrOffsetOutOfRange() {
        assertThrows(IllegalArgumentException.class, () -> GlobalAddress.of(-1, 0));
        assertThrows(IllegalArgumentException.class, () -> GlobalAddress.of(GlobalAddress.MAX_SERVER_ID + 1, 0));
        assertThrows(IllegalArgumentException.class, () -> GlobalAddress.of(0, -1));
        assertThrows(IllegalArgumentException.class, () -> GlobalAddress.of(0, GlobalAddress.MAX_OFFSET + 1));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> GlobalAddress.of(40_000, 0));
        assertTrue(e.getMessage().contains("40000"), e.getMessage());
    }

    @Test
    void nullIsOffsetZeroOfServerZero() {
        assertEquals(GlobalAddress.of(0, 0), GlobalAddress.NULL);
        assertEquals(0, GlobalAddress.serverId(GlobalAddress.NULL));
        assertEquals(0, GlobalAddress.offset(GlobalAddress.NULL));
        assertFalse(GlobalAddress.isSwizzled(GlobalAddress.NULL));
    }

    @Test
    void swizzleSetsTheTopBitAndUnswizzleRestoresThePayload() {
        for (long payload : new long[] {0, 1, 123_456_789, GlobalAddress.of(7, 4096), Long.MAX_VALUE}) {
            long swizzled = GlobalAddress.swizzle(payload);
            assertTrue(GlobalAddress.isSwizzled(swizzled));
            assertTrue(swizzled < 0, "the swizzled bit is the sign bit");
            assertEquals(payload, GlobalAddress.unswizzle(swizzled));
        }
        assertThrows(IllegalArgumentException.class, () -> GlobalAddress.swizzle(-1));
        assertThrows(IllegalArgumentException.class, () -> GlobalAddress.swizzle(Long.MIN_VALUE));
    }

    @Test
    void toStringNamesTheServerAndTheHexOffsetOrTheSwizzledPayload() {
        assertEquals("s3:0x10400", GlobalAddress.toString(GlobalAddress.of(3, 0x10400)));
        assertEquals("s0:0x0", GlobalAddress.toString(GlobalAddress.NULL));
        assertEquals("s32767:0xffffffffffff", GlobalAddress.toString(GlobalAddress.of(GlobalAddress.MAX_SERVER_ID, GlobalAddress.MAX_OFFSET)));
        assertEquals("swizzled:17", GlobalAddress.toString(GlobalAddress.swizzle(17)));
    }
}
