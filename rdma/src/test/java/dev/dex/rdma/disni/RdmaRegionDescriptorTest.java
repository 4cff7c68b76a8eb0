package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.disni.RdmaRegionDescriptor.RemoteSegment;

class RdmaRegionDescriptorTest {
    private static final String CANONICAL = "disni:2;server=3;rdma=10.0.0.5:7471;shift=30;"
            + "segments=0x7f3a00000000/1073741824,0x7f3b00000000/4096;control=10.0.0.5:7470";

    private static final RdmaRegionDescriptor DESCRIBED = new RdmaRegionDescriptor(3, "10.0.0.5", 7471, 30,
            List.of(new RemoteSegment(0x7f3a00000000L, 0, 1 << 30), new RemoteSegment(0x7f3b00000000L, 0, 4096)),
            "10.0.0.5:7470");

    @Test
    void encodesToTheDocumentedText() {
        assertEquals(CANONICAL, DESCRIBED.encode());
    }

    @Test
    void parsesTheDocumentedText() {
        RdmaRegionDescriptor parsed = RdmaRegionDescriptor.parse(CANONICAL);

        assertEquals(DESCRIBED, parsed);
        assertEquals((1L << 30) + 4096, parsed.regionLength());
        assertEquals(0, parsed.segments().get(1).rkey(), "the text names no key");
    }

    @Test
    void theClientsOwnKeysAreKeptBesideTheTextButNeverWritten() {
        RdmaRegionDescriptor granted = DESCRIBED.withRkeys(new int[] {0x1a2b, 0xfffffffe});

        assertEquals(0x1a2b, granted.segments().get(0).rkey());
        assertEquals(0xfffffffe, granted.segments().get(1).rkey(), "an rkey with the top bit set survives");
        assertEquals(DESCRIBED.segments().get(1).address(), granted.segments().get(1).address());
        assertEquals(CANONICAL, granted.encode(), "an advertised text never carries a key");
        IllegalArgumentException wrongCount = assertThrows(IllegalArgumentException.class, () -> DESCRIBED.withRkeys(new int[] {1}));
        assertTrue(wrongCount.getMessage().contains("granted 1 keys for 2 segments"), wrongCount.getMessage());
    }

    @Test
    void roundTripsEveryKindOfDescriptor() {
        List<RdmaRegionDescriptor> descriptors = List.of(
                DESCRIBED,
                new RdmaRegionDescriptor(0, "127.0.0.1", 1, 12, List.of(new RemoteSegment(1, 0, 1)), ""),
                new RdmaRegionDescriptor(GlobalAddress.MAX_SERVER_ID, "fe80::1%eth0", 65535, 13,
                        List.of(new RemoteSegment(-8192L * 2, 0, 8192), new RemoteSegment(0x1000, 0, 8192)), "tcp;host=a:1,b=c"),
                new RdmaRegionDescriptor(9, "rdma-node-1.example", 4791, 30, List.of(new RemoteSegment(0x10000, 0, 1 << 30)),
                        "control=looks;like=a;field"));

        for (RdmaRegionDescriptor descriptor : descriptors) {
            String text = descriptor.encode();
            assertEquals(descriptor, RdmaRegionDescriptor.parse(text), text);
            assertEquals(text, RdmaRegionDescriptor.parse(text).encode(), "one text per descriptor");
        }
    }

    @Test
    void ipv6HostIsBracketed() {
        RdmaRegionDescriptor descriptor = new RdmaRegionDescriptor(1, "fd00::7", 7471, 12, List.of(new RemoteSegment(0x1000, 2, 4096)), "");

        assertTrue(descriptor.encode().contains(";rdma=[fd00::7]:7471;"), descriptor.encode());
    }

    @ParameterizedTest(name = "{1}")
    @CsvSource(delimiter = '|', quoteCharacter = '"', value = {
        "disni:1;server=3;rdma=h:1;shift=12;segments=0x1/0x1/1;control=                          | does not start with",
        "DISNI:2;server=3;rdma=h:1;shift=12;segments=0x1/1;control=                          | does not start with",
        "disni:2;                                                                                | expected field 'server='",
        "disni:2;rdma=h:1;server=3;shift=12;segments=0x1/1;control=                          | expected field 'server='",
        "disni:2;server=3                                                                        | not followed by ';'",
        "disni:2;server=;rdma=h:1;shift=12;segments=0x1/1;control=                           | server id ''",
        "disni:2;server=+3;rdma=h:1;shift=12;segments=0x1/1;control=                         | server id '+3'",
        "disni:2;server=03;rdma=h:1;shift=12;segments=0x1/1;control=                         | server id '03'",
        "disni:2;server= 3;rdma=h:1;shift=12;segments=0x1/1;control=                         | server id ' 3'",
        "disni:2;server=-1;rdma=h:1;shift=12;segments=0x1/1;control=                         | server id '-1'",
        "disni:2;server=32768;rdma=h:1;shift=12;segments=0x1/1;control=                      | memory server id 32768 outside",
        "disni:2;server=99999999999;rdma=h:1;shift=12;segments=0x1/1;control=                | server id '99999999999'",
        "disni:2;server=3;host=h:1;shift=12;segments=0x1/1;control=                          | expected field 'rdma='",
        "disni:2;server=3;rdma=h;shift=12;segments=0x1/1;control=                            | must be HOST:PORT",
        "disni:2;server=3;rdma=fe80::1:7471;shift=12;segments=0x1/1;control=                 | must be HOST:PORT",
        "disni:2;server=3;rdma=[fe80::1:7471;shift=12;segments=0x1/1;control=                | must be [IPV6]:PORT",
        "disni:2;server=3;rdma=[fe80::1]7471;shift=12;segments=0x1/1;control=                | must be [IPV6]:PORT",
        "disni:2;server=3;rdma=[host]:7471;shift=12;segments=0x1/1;control=                  | is no IPv6 address",
        "disni:2;server=3;rdma=:1;shift=12;segments=0x1/1;control=                           | rdma host is empty",
        "disni:2;server=3;rdma=h h:1;shift=12;segments=0x1/1;control=                        | contains ' '",
        "disni:2;server=3;rdma=h:;shift=12;segments=0x1/1;control=                           | rdma port ''",
        "disni:2;server=3;rdma=h:0;shift=12;segments=0x1/1;control=                          | rdma port 0 outside",
        "disni:2;server=3;rdma=h:65536;shift=12;segments=0x1/1;control=                      | rdma port 65536 outside",
        "disni:2;server=3;rdma=h:1;segments=0x1/1;control=                                   | expected field 'shift='",
        "disni:2;server=3;rdma=h:1;shift=11;segments=0x1/1;control=                          | segment shift 11 outside",
        "disni:2;server=3;rdma=h:1;shift=31;segments=0x1/1;control=                          | segment shift 31 outside",
        "disni:2;server=3;rdma=h:1;shift=x;segments=0x1/1;control=                           | segment shift 'x'",
        "disni:2;server=3;rdma=h:1;shift=12;control=                                             | expected field 'segments='",
        "disni:2;server=3;rdma=h:1;shift=12;segments=;control=                                   | no segments",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1;control=                                | segment 0 '0x1' must be",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/1/2;control=                        | segment 0 '0x1/1/2' must be",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1000/4096,;control=                   | segment 1 '' must be",
        "disni:2;server=3;rdma=h:1;shift=12;segments=1000/1;control=                         | segment 0 address '1000'",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x/1;control=                           | segment 0 address '0x'",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0xAB/1;control=                         | segment 0 address '0xAB'",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x0ab/1;control=                        | segment 0 address '0x0ab'",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x10000000000000000/1;control=          | segment 0 address '0x10000000000000000'",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x0/1;control=                          | segment 0 address 0x0 is null",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0xfffffffffffff000/4096;control=        | wrap around",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/0x1/1;control=                          | segment 0 '0x1/0x1/1' must be",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/0;control=                          | segment 0 has 0 bytes",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/4097;control=                       | segment 0 has 4097 bytes",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/100,0x2000/100;control=         | segment 0 has 100 bytes",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/0x10;control=                       | segment 0 length '0x10'",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/1                                   | not followed by ';'",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/1;                                  | expected field 'control='",
        "disni:2;server=3;rdma=h:1;shift=12;segments=0x1/1;ctl=x                             | expected field 'control='",
    })
    void malformedTextIsRejectedNamingTheProblem(String text, String problem) {
        IllegalArgumentException failure = assertThrows(IllegalArgumentException.class, () -> RdmaRegionDescriptor.parse(text));

        assertTrue(failure.getMessage().startsWith("malformed disni region descriptor: "), failure.getMessage());
        assertTrue(failure.getMessage().contains(problem), "'" + failure.getMessage() + "' should mention " + problem);
    }

    @Test
    void nullOrEmptyTextIsRejected() {
        assertThrows(IllegalArgumentException.class, () -> RdmaRegionDescriptor.parse(null));
        IllegalArgumentException failure = assertThrows(IllegalArgumentException.class, () -> RdmaRegionDescriptor.parse(""));
        assertTrue(failure.getMessage().contains("does not start with 'disni:2;'"), failure.getMessage());
    }

    @Test
    void regionLongerThanTwoToTheFortyEightIsRejected() {
        int count = (1 << 18) + 1;
        RemoteSegment[] segments = new RemoteSegment[count];
        for (int i = 0; i < count; i++) {
            segments[i] = new RemoteSegment(0x1000_0000_0000L + ((long) i << 30), i, 1 << 30);
        }

        IllegalArgumentException failure = assertThrows(IllegalArgumentException.class,
                () -> new RdmaRegionDescriptor(0, "h", 1, 30, List.of(segments), ""));

        assertTrue(failure.getMessage().contains("more than a region's 2^48"), failure.getMessage());
    }

    @Test
    void constructorRejectsWhatNoTextCouldCarry() {
        List<RemoteSegment> one = List.of(new RemoteSegment(0x1000, 1, 4096));
        assertThrows(IllegalArgumentException.class, () -> new RdmaRegionDescriptor(0, "h;x", 1, 12, one, ""));
        assertThrows(IllegalArgumentException.class, () -> new RdmaRegionDescriptor(0, "[::1]", 1, 12, one, ""));
        assertThrows(IllegalArgumentException.class, () -> new RdmaRegionDescriptor(0, "", 1, 12, one, ""));
        assertThrows(IllegalArgumentException.class, () -> new RdmaRegionDescriptor(0, "h", 1, 12, List.of(), ""));
        assertThrows(NullPointerException.class, () -> new RdmaRegionDescriptor(0, "h", 1, 12, one, null));
    }
}
