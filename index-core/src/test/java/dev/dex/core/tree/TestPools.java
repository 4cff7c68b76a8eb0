package dev.dex.core.tree;

import java.util.ArrayList;
import java.util.List;

import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/** A local memory pool of several servers for tree tests; closes everything it made. */
final class TestPools implements AutoCloseable {
    private final LocalFabric fabric;
    private final List<RemoteMemory> clients = new ArrayList<>();
    private final int[] serverIds;

    /** {@code servers} regions of {@code regionMiB} MiB each, with 64 KiB chunks. */
    TestPools(int servers, int regionMiB) {
        this(servers, regionMiB, 0);
    }

    /** As above, with {@code latencyNs} spun before every verb, which widens every race window. */
    TestPools(int servers, int regionMiB, long latencyNs) {
        fabric = new LocalFabric(latencyNs);
        serverIds = new int[servers];
        for (int i = 0; i < servers; i++) {
            serverIds[i] = i;
            fabric.export(i, (long) regionMiB << 20, 64 << 10);
        }
    }

    /** A new compute-side client (each has its own verb counters). */
    RemoteMemory connect() {
        RemoteMemory memory = fabric.connect(serverIds);
        clients.add(memory);
        return memory;
    }

    @Override
    public void close() {
        clients.forEach(RemoteMemory::close);
        fabric.close();
    }
}
