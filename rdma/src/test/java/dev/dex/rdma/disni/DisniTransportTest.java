package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import com.ibm.disni.verbs.IbvMr;

/** What of the device transport can be checked without a device; {@link DisniDeviceTest} runs the rest. */
class DisniTransportTest {

    @Test
    void segmentsAreRegisteredForLocalWriteAndRemoteReadWriteAndAtomics() {
        assertEquals(IbvMr.IBV_ACCESS_LOCAL_WRITE | IbvMr.IBV_ACCESS_REMOTE_READ | IbvMr.IBV_ACCESS_REMOTE_WRITE
                | IbvMr.IBV_ACCESS_REMOTE_ATOMIC, DisniTransport.SEGMENT_ACCESS);
        assertEquals(0b1111, DisniTransport.SEGMENT_ACCESS, "the ibv_access_flags bits 0 to 3 of verbs.h");
    }

    @Test
    void completionStatusesAreNamedAsVerbsNamesThem() {
        assertEquals("IBV_WC_SUCCESS (0)", DisniOneSidedVerbs.describe(0));
        assertEquals("IBV_WC_REM_ACCESS_ERR (10)", DisniOneSidedVerbs.describe(10));
        assertEquals("IBV_WC_RETRY_EXC_ERR (12)", DisniOneSidedVerbs.describe(12));
        assertEquals("status 99", DisniOneSidedVerbs.describe(99));
        assertEquals("status -3", DisniOneSidedVerbs.describe(-3));
    }
}
