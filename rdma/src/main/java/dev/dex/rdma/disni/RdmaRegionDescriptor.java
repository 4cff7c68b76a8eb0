package dev.dex.rdma.disni;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import dev.dex.rdma.GlobalAddress;

/**
 * What a client needs to reach one exported region over RDMA, as the text a memory node advertises for it
 * ({@link dev.dex.rdma.ExportedRegion#endpoint()}): where to connect, and for each segment of the region its
 * remote virtual address and length; plus the endpoint of the control transport that carries compare-and-swap,
 * fetch-and-add and the key grants.
 *
 * <p>The text names no rkeys. Every client gets keys of its own from the memory node ({@link RdmaGrants}), so
 * that fencing a client revokes exactly its keys; an advertised key would let any reader of the text (a fenced
 * client among them) reach the region. A parsed descriptor therefore has rkey 0 in every segment until
 * {@link #withRkeys} gives it the client's keys, and {@link #encode()} never writes them.
 *
 * <pre>
 * disni:2;server=ID;rdma=HOST:PORT;shift=S;segments=SEG[,SEG...];control=CONTROL
 *
 *   ID       memory server id, decimal
 *   HOST     IP address of the memory node's RDMA interface; an IPv6 address in brackets
 *   PORT     RDMA connection manager port, decimal, 1..65535
 *   S        log2 of the segment length, decimal; region offset o lies in segment o &gt;&gt;&gt; S
 *   SEG      0xADDRESS/LENGTH: remote virtual address (hex), bytes (decimal); every segment but the
 *            last has 2^S bytes
 *   CONTROL  the control transport's own endpoint, verbatim to the end of the text (may be empty)
 *
 * disni:2;server=3;rdma=10.0.0.5:7471;shift=30;segments=0x7f3a00000000/1073741824,0x7f3b00000000/4096;control=10.0.0.5:7470
 * </pre>
 *
 * <p>{@link #parse} is strict: fields in this order, nothing missing or extra, numbers without signs, blanks
 * or leading zeros, hexadecimal in lower case; a malformed text throws {@link IllegalArgumentException} naming
 * what is wrong. So every descriptor has exactly one text: {@link #encode()} of a parsed descriptor gives back
 * the text it was parsed from. Version 1 texts, which carried a shared rkey, are refused.
 *
 * @param serverId        the memory server whose region this is
 * @param rdmaHost        IP address to connect to (IPv6 without brackets)
 * @param rdmaPort        port to connect to
 * @param segmentShift    log2 of the segment length
 * @param segments        the region's segments, in region order, with this client's rkeys once granted
 * @param controlEndpoint the control transport's endpoint for this server
 */
record RdmaRegionDescriptor(int serverId, String rdmaHost, int rdmaPort, int segmentShift, List<RemoteSegment> segments,
                            String controlEndpoint) {

    /** The prefix that names the format and its version. */
    static final String PREFIX = "disni:2;";
    /** Segments shorter than a page would be pointless: chunks are at least a page. */
    static final int MIN_SEGMENT_SHIFT = 12;
    /** Segments are Java buffers, which stop below 2 GiB. */
    static final int MAX_SEGMENT_SHIFT = 30;

    private static final String SERVER = "server=";
    private static final String RDMA = "rdma=";
    private static final String SHIFT = "shift=";
    private static final String SEGMENTS = "segments=";
    private static final String CONTROL = "control=";
    private static final String FORBIDDEN_HOST_CHARACTERS = ";,/=[]";

    /**
     * One segment of the region.
     *
     * @param address remote virtual address of the segment's first byte
     * @param rkey    the remote key of this client's registration of it; 0 before the grant
     * @param length  bytes in the segment
     */
    record RemoteSegment(long address, int rkey, int length) {
    }

    RdmaRegionDescriptor {
        if (serverId < 0 || serverId > GlobalAddress.MAX_SERVER_ID) {
            throw new IllegalArgumentException("memory server id " + serverId + " outside [0, " + GlobalAddress.MAX_SERVER_ID + "]");
        }
        checkHost(rdmaHost);
        if (rdmaPort < 1 || rdmaPort > 65535) {
            throw new IllegalArgumentException("rdma port " + rdmaPort + " outside [1, 65535]");
        }
        if (segmentShift < MIN_SEGMENT_SHIFT || segmentShift > MAX_SEGMENT_SHIFT) {
            throw new IllegalArgumentException("segment shift " + segmentShift + " outside [" + MIN_SEGMENT_SHIFT + ", "
                    + MAX_SEGMENT_SHIFT + "]");
        }
        segments = List.copyOf(segments);
        checkSegments(segments, segmentShift);
        Objects.requireNonNull(controlEndpoint, "control endpoint");
    }

    /** Bytes in the region: the sum of the segment lengths. */
    long regionLength() {
        long total = 0;
        for (RemoteSegment segment : segments) {
            total += segment.length();
        }
        return total;
    }

    /**
     * This descriptor with a client's own keys, one per segment in region order (what a grant answered).
     *
     * @throws IllegalArgumentException when the count differs from the segments'
     */
    RdmaRegionDescriptor withRkeys(int[] rkeys) {
        if (rkeys.length != segments.size()) {
            throw new IllegalArgumentException("memory server " + serverId + " granted " + rkeys.length + " keys for "
                    + segments.size() + " segments");
        }
        List<RemoteSegment> granted = new ArrayList<>(segments.size());
        for (int i = 0; i < rkeys.length; i++) {
            RemoteSegment segment = segments.get(i);
            granted.add(new RemoteSegment(segment.address(), rkeys[i], segment.length()));
        }
        return new RdmaRegionDescriptor(serverId, rdmaHost, rdmaPort, segmentShift, granted, controlEndpoint);
    }

    /** The canonical text of this descriptor; it names no rkeys. */
    String encode() {
        StringBuilder text = new StringBuilder(96 + 40 * segments.size() + controlEndpoint.length());
        text.append(PREFIX)
                .append(SERVER).append(serverId).append(';')
                .append(RDMA).append(rdmaHost.indexOf(':') >= 0 ? "[" + rdmaHost + "]" : rdmaHost).append(':').append(rdmaPort).append(';')
                .append(SHIFT).append(segmentShift).append(';')
                .append(SEGMENTS);
        for (int i = 0; i < segments.size(); i++) {
            RemoteSegment segment = segments.get(i);
            if (i > 0) {
                text.append(',');
            }
            text.append("0x").append(Long.toHexString(segment.address())).append('/').append(segment.length());
        }
        return text.append(';').append(CONTROL).append(controlEndpoint).toString();
    }

    /**
     * Reads a descriptor written by {@link #encode()}.
     *
     * @throws IllegalArgumentException naming what is malformed
     */
    static RdmaRegionDescriptor parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("malformed disni region descriptor: null");
        }
        if (!text.startsWith(PREFIX)) {
            throw malformed(text, "it does not start with '" + PREFIX + "'");
        }
        int position = PREFIX.length();
        int end = fieldEnd(text, position, SERVER);
        int serverId = decimalInt(text, "server id", text.substring(position + SERVER.length(), end));
        position = end + 1;

        end = fieldEnd(text, position, RDMA);
        String hostAndPort = text.substring(position + RDMA.length(), end);
        String host;
        String port;
        if (hostAndPort.startsWith("[")) {
            int close = hostAndPort.indexOf(']');
            if (close < 0 || close + 1 >= hostAndPort.length() || hostAndPort.charAt(close + 1) != ':') {
                throw malformed(text, "rdma address '" + hostAndPort + "' must be [IPV6]:PORT");
            }
            host = hostAndPort.substring(1, close);
            port = hostAndPort.substring(close + 2);
            if (host.indexOf(':') < 0) {
                throw malformed(text, "rdma host '" + host + "' is in brackets but is no IPv6 address");
            }
        } else {
            int colon = hostAndPort.indexOf(':');
            if (colon < 0 || hostAndPort.indexOf(':', colon + 1) >= 0) {
                throw malformed(text, "rdma address '" + hostAndPort + "' must be HOST:PORT, with an IPv6 host in brackets");
            }
            host = hostAndPort.substring(0, colon);
            port = hostAndPort.substring(colon + 1);
        }
        int rdmaPort = decimalInt(text, "rdma port", port);
        position = end + 1;

        end = fieldEnd(text, position, SHIFT);
        int shift = decimalInt(text, "segment shift", text.substring(position + SHIFT.length(), end));
        position = end + 1;

        end = fieldEnd(text, position, SEGMENTS);
        List<RemoteSegment> segments = segments(text, text.substring(position + SEGMENTS.length(), end));
        position = end + 1;

        if (!text.startsWith(CONTROL, position)) {
            throw malformed(text, "expected field '" + CONTROL + "' after the segments");
        }
        String control = text.substring(position + CONTROL.length());
        try {
            return new RdmaRegionDescriptor(serverId, host, rdmaPort, shift, segments, control);
        } catch (IllegalArgumentException e) {
            throw malformed(text, e.getMessage());
        }
    }

    private static List<RemoteSegment> segments(String text, String list) {
        if (list.isEmpty()) {
            throw malformed(text, "no segments");
        }
        String[] parts = list.split(",", -1);
        List<RemoteSegment> segments = new ArrayList<>(parts.length);
        for (int i = 0; i < parts.length; i++) {
            String[] fields = parts[i].split("/", -1);
            if (fields.length != 2) {
                throw malformed(text, "segment " + i + " '" + parts[i] + "' must be 0xADDRESS/LENGTH");
            }
            long address = hexLong(text, "segment " + i + " address", fields[0]);
            int length = decimalInt(text, "segment " + i + " length", fields[1]);
            segments.add(new RemoteSegment(address, 0, length));
        }
        return segments;
    }

    /** Index of the ';' that ends field {@code name}, which must start at {@code position}. */
    private static int fieldEnd(String text, int position, String name) {
        if (!text.startsWith(name, position)) {
            throw malformed(text, "expected field '" + name + "' at character " + position);
        }
        int end = text.indexOf(';', position);
        if (end < 0) {
            throw malformed(text, "field '" + name + "' is not followed by ';'");
        }
        return end;
    }

    private static int decimalInt(String text, String what, String digits) {
        if (digits.isEmpty() || digits.length() > 10 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')
                || digits.length() > 1 && digits.charAt(0) == '0') {
            throw malformed(text, what + " '" + digits + "' is not a decimal number without sign or leading zeros");
        }
        long value = Long.parseLong(digits);
        if (value > Integer.MAX_VALUE) {
            throw malformed(text, what + " " + digits + " is too large");
        }
        return (int) value;
    }

    private static long hexLong(String text, String what, String field) {
        String digits = field.startsWith("0x") ? field.substring(2) : "";
        if (digits.isEmpty() || digits.length() > 16 || digits.length() > 1 && digits.charAt(0) == '0'
                || !digits.chars().allMatch(c -> c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
            throw malformed(text, what + " '" + field + "' is not 0x and at most 16 lower-case hexadecimal digits without leading zeros");
        }
        return Long.parseUnsignedLong(digits, 16);
    }

    private static void checkHost(String host) {
        if (host == null || host.isEmpty()) {
            throw new IllegalArgumentException("rdma host is empty");
        }
        for (int i = 0; i < host.length(); i++) {
            char c = host.charAt(i);
            if (Character.isWhitespace(c) || Character.isISOControl(c) || FORBIDDEN_HOST_CHARACTERS.indexOf(c) >= 0) {
                throw new IllegalArgumentException("rdma host '" + host + "' contains '" + c + "'");
            }
        }
    }

    private static void checkSegments(List<RemoteSegment> segments, int segmentShift) {
        if (segments.isEmpty()) {
            throw new IllegalArgumentException("no segments");
        }
        long segmentLength = 1L << segmentShift;
        long total = 0;
        for (int i = 0; i < segments.size(); i++) {
            RemoteSegment segment = segments.get(i);
            boolean last = i == segments.size() - 1;
            if (segment.length() <= 0 || segment.length() > segmentLength || !last && segment.length() != segmentLength) {
                throw new IllegalArgumentException("segment " + i + " has " + segment.length() + " bytes; every segment but the last must have "
                        + segmentLength + " (2^" + segmentShift + ") and the last between 1 and " + segmentLength);
            }
            if (segment.address() == 0 || Long.compareUnsigned(segment.address(), -1L - segment.length()) > 0) {
                throw new IllegalArgumentException("segment " + i + " address 0x" + Long.toHexString(segment.address())
                        + " is null or its " + segment.length() + " bytes wrap around the address space");
            }
            total += segment.length();
        }
        if (total > GlobalAddress.MAX_OFFSET + 1) {
            throw new IllegalArgumentException("segments hold " + total + " bytes, more than a region's 2^48");
        }
    }

    private static IllegalArgumentException malformed(String text, String problem) {
        return new IllegalArgumentException("malformed disni region descriptor: " + problem + ": '" + text + "'");
    }
}
