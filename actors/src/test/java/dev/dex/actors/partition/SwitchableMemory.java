package dev.dex.actors.partition;

import org.agrona.DirectBuffer;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/** A connection to the memory pool that counts remote writes and fails them all while told to (an unreachable memory node). */
final class SwitchableMemory extends ForwardingRemoteMemory {
    volatile boolean failWrites;
    volatile int writes;

    SwitchableMemory(RemoteMemory delegate) {
        super(delegate);
    }

    /** A connection to a fresh one-partition tree on memory server 0 of {@code fabric} (16 MiB region). */
    static SwitchableMemory onFreshTree(LocalFabric fabric) {
        fabric.export(0, 16L << 20, 64 << 10);
        RemoteMemory admin = fabric.connect(0);
        Superblock.format(admin, TreeSettings.defaults());
        PartitionTable.store(admin, PartitionTable.equalWidth(1, 0, 1_000_000));
        return new SwitchableMemory(fabric.connect(0));
    }

    /** An engine over this connection with its redo log on: no offloading, an 8 MiB cache that admits every leaf. */
    DexEngine openLoggedEngine() {
        return DexEngine.open(this, DexEngineSettings.withCache("no-offload", 8L << 20).withLeafAdmission(1.0), null, RedoLogSettings.ON);
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        if (failWrites) {
            throw new FabricException("memory node unreachable");
        }
        writes++;
        super.write(address, src, srcOffset, length);
    }
}
