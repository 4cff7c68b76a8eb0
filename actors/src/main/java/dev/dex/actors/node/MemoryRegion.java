package dev.dex.actors.node;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.dex.core.offload.OffloadMessageHandler;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.replica.GroupFabric;
import dev.dex.rdma.replica.GroupReplica;
import dev.dex.rdma.tcp.TcpFabric;

/**
 * A memory server's region as one process serves it: exported (reattached or formatted) once, and kept while the
 * process runs, whatever happens to the cluster membership of the actor system around it. A memory node whose
 * actor system the cluster downs (a network partition, a pause) starts a new actor system on the same
 * {@code MemoryRegion} and rejoins (docs/replication.md, "Downing"): the compute nodes' fabric connections to the
 * region never notice, and no data moves.
 *
 * <p>Memory server 0 also formats the tree here (an empty root and the partition table) in a fresh region; a
 * reattached one keeps the tree and the table it holds. Over {@code tcp}, offloads arriving on the compute nodes'
 * fabric connections are handed to the region server's event loops from here on.
 *
 * <p>Concurrency: opened and closed by one thread (the process's start and end); the region and the connection
 * are thread-safe and shared by every actor of the memory node.
 */
public final class MemoryRegion implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(MemoryRegion.class);

    private final MemoryNode.Settings settings;
    private final Fabric fabric;
    private final ExportedRegion region;
    private final RemoteMemory own;

    private MemoryRegion(MemoryNode.Settings settings, Fabric fabric, ExportedRegion region, RemoteMemory own) {
        this.settings = settings;
        this.fabric = fabric;
        this.region = region;
        this.own = own;
    }

    /**
     * Exports server {@code settings.serverId()}'s region: a fresh one with {@code settings.format()}, otherwise the
     * one the fabric kept ({@link Fabric#attach}). A format takes the server id's lock like a reattach does, before it
     * replaces the kept region: a second memory node of a served id is refused before it could format the region
     * under the first.
     */
    public static MemoryRegion open(MemoryNode.Settings settings, Fabric fabric) {
        ExportedRegion region;
        RemoteMemory own;
        if (settings.replicas() > 1 && fabric instanceof GroupFabric groups) {
            // One replica of the server among several memory nodes (of this JVM on local, of other hosts on disni); the
            // coordinator gives it its part.
            GroupReplica replica = groups.exportReplica(settings.serverId(), settings.regionBytes(), settings.chunkBytes());
            region = replica;
            own = replica.connectOwn();
        } else {
            region = settings.format() ? fabric.reformat(settings.serverId(), settings.regionBytes(), settings.chunkBytes())
                    : fabric.attach(settings.serverId(), settings.regionBytes(), settings.chunkBytes());
            try {
                own = fabric.connect(settings.serverId());
            } catch (RuntimeException e) {
                region.detach();
                throw e;
            }
        }
        MemoryRegion opened = new MemoryRegion(settings, fabric, region, own);
        try {
            if (settings.serverId() == 0) {
                opened.formatUnlessHeld();
            } else if (!region.fresh()) {
                LOG.info("memory node {} reattached to its region and keeps its data", settings.serverId());
            }
            if (settings.replicas() > 1) {
                if (!(fabric instanceof TcpFabric) && !(fabric instanceof GroupFabric)) {
                    throw new IllegalArgumentException("dex.memory.replicas = " + settings.replicas() + " needs the tcp, disni or"
                            + " local fabric; this memory node uses " + fabric.transport() + (fabric.transport().equals("shm")
                            ? ", whose region outlives its memory node already and dies only with its host, with every replica"
                            + " on it" : "") + " (docs/replication.md)");
                }
                if (fabric instanceof TcpFabric tcp) {
                    // Not served before the group says what it is: a kept region may be older than what the group answered.
                    tcp.standBy(settings.serverId());
                }
            }
            if (fabric instanceof TcpFabric tcp) {
                // Compute nodes send offloads as messages on their fabric connections; the region server's event
                // loops run them.
                tcp.handleMessages(settings.serverId(), new OffloadMessageHandler(settings.serverId(), region.region(),
                        region.memorySideWrites()));
            }
        } catch (RuntimeException e) {
            opened.close();
            throw e;
        }
        return opened;
    }

    /**
     * Memory server 0 holds the superblock: a fresh region gets an empty tree and the configured partition
     * table; a reattached one keeps the tree and the table it holds (a restart never formats over live data).
     */
    private void formatUnlessHeld() {
        if (!region.fresh()) {
            try {
                Superblock.Contents tree = Superblock.read(own);
                PartitionTable stored = PartitionTable.load(own);
                LOG.info("memory node 0 reattached to its region and keeps its tree (root {}, {}) and its partition table of {}"
                        + " partitions", GlobalAddress.toString(tree.root()), tree.keyFormat(), stored.count());
                if (tree.keyFormat().bytes() != settings.keyBytes()) {
                    LOG.warn("the tree on memory node 0 has {}, not the {} bytes of dex.tree.key-bytes: the tree's width holds,"
                            + " and clients must use it", tree.keyFormat(), settings.keyBytes());
                }
                return;
            } catch (IllegalStateException noTreeYet) {
                LOG.info("memory node 0 reattached to a region without a complete tree ({}); formatting it", noTreeYet.getMessage());
            }
        }
        try {
            Superblock.format(own, TreeSettings.defaults().withSubtreeLevel(settings.subtreeLevel()).withKeyBytes(settings.keyBytes()));
        } catch (IllegalStateException treeWithoutTable) {
            // A tree whose table was never stored (a crash between the two): keep the tree, store the table.
        }
        PartitionTable.store(own, settings.partitions());
    }

    public MemoryNode.Settings settings() {
        return settings;
    }

    public Fabric fabric() {
        return fabric;
    }

    public ExportedRegion region() {
        return region;
    }

    /** This memory node's own client of its region (chunk grants, the tree's format). */
    public RemoteMemory own() {
        return own;
    }

    /** Whether the region was made new at {@link #open} rather than reattached with its data. */
    public boolean fresh() {
        return region.fresh();
    }

    /** Keeps the region's data where the fabric can ({@code shm}, {@code tcp} with a region directory) for the next start. */
    @Override
    public void close() {
        own.close();
        region.detach();
    }
}
