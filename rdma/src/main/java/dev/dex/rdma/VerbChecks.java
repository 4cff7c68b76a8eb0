package dev.dex.rdma;

/**
 * The argument checks and the injected latency that every {@link RemoteMemory} applies before a verb, in one
 * place, so that every transport refuses the same addresses with the same messages.
 */
public final class VerbChecks {
    private VerbChecks() {
    }

    /**
     * The entry of {@code byServer} for the memory server of {@code address}.
     *
     * @throws IllegalStateException    when the client is {@code closed}
     * @throws IllegalArgumentException for a swizzled pointer or a server this client is not connected to (a null
     *                                  entry, or an id past the array)
     */
    public static <T> T server(T[] byServer, long address, boolean closed) {
        if (closed) {
            throw new IllegalStateException("remote memory is closed");
        }
        if (GlobalAddress.isSwizzled(address)) {
            throw new IllegalArgumentException("swizzled pointer " + GlobalAddress.toString(address) + " is not a remote address");
        }
        int id = GlobalAddress.serverId(address);
        T server = id < byServer.length ? byServer[id] : null;
        if (server == null) {
            throw new IllegalArgumentException("address " + GlobalAddress.toString(address) + ": not connected to memory server " + id);
        }
        return server;
    }

    /** Rejects a negative length, or a range that does not lie inside a region of {@code regionLength} bytes. */
    public static void range(long address, int length, long regionLength) {
        long offset = GlobalAddress.offset(address);
        if (length < 0 || offset > regionLength - length) {
            throw new IllegalArgumentException("range [" + offset + ", " + offset + " + " + length + ") outside the region of "
                    + regionLength + " bytes of memory server " + GlobalAddress.serverId(address));
        }
    }

    /** Rejects an atomic's word that is not 8-byte aligned. */
    public static void aligned(long address) {
        if ((address & 7) != 0) {
            throw new IllegalArgumentException("atomic word at " + GlobalAddress.toString(address) + " is not 8-byte aligned");
        }
    }

    /** Spins for {@code latencyNs} (0: returns at once), the injected latency of one verb. */
    public static void spin(long latencyNs) {
        if (latencyNs > 0) {
            long deadline = System.nanoTime() + latencyNs;
            while (System.nanoTime() - deadline < 0) {
                Thread.onSpinWait();
            }
        }
    }
}
