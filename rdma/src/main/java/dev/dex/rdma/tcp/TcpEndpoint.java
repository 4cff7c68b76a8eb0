package dev.dex.rdma.tcp;

import java.net.InetSocketAddress;

/** {@code host:port} endpoints as memory nodes advertise them; IPv6 hosts in brackets. */
final class TcpEndpoint {
    private TcpEndpoint() {
    }

    static String format(String host, int port) {
        return (host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port;
    }

    /** Parses {@code host:port}; a malformed endpoint throws {@link IllegalArgumentException} naming it. */
    static InetSocketAddress parse(int serverId, String endpoint) {
        if (endpoint == null || endpoint.isBlank()) {
            throw new IllegalArgumentException("memory server " + serverId + " has no tcp endpoint");
        }
        int colon = endpoint.lastIndexOf(':');
        if (colon <= 0 || colon == endpoint.length() - 1) {
            throw new IllegalArgumentException("memory server " + serverId + ": tcp endpoint '" + endpoint + "' is not host:port");
        }
        String host = endpoint.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = Integer.parseInt(endpoint.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("memory server " + serverId + ": tcp endpoint '" + endpoint + "' has no port number");
        }
        if (port < 1 || port > 65535 || host.isBlank()) {
            throw new IllegalArgumentException("memory server " + serverId + ": tcp endpoint '" + endpoint + "' is not host:port");
        }
        return InetSocketAddress.createUnresolved(host, port);
    }
}
