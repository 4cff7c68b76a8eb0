package dev.dex.core.cache;

import dev.dex.core.partition.PartitionTable;

/**
 * The partition table a {@link DexEngine} serves ({@code engine.partitions}) and its version, and the adoption of a
 * newer stored one: after this engine's own split ({@link #adopt}, PartitionSplits), or when an acquire finds the stored
 * version moved ({@link #adoptIfMoved}: another compute node's split).
 *
 * <pre>
 * Concurrency: adoptions are serialized on this object's monitor and only ever move the version forward; the table
 *   reference is volatile, and every operation reads it once per use. A table is adopted only if no partition this
 *   engine holds (but the one being acquired, which has nothing cached yet) has another range in it; this engine's own
 *   split adopts its table while the split partition is paused.
 * </pre>
 */
final class ServedTable {
    private final DexEngine engine;
    /** The table served and its version, one snapshot (engine.partitions is the same table, for the operations). */
    private volatile PartitionTable.Versioned current;

    ServedTable(DexEngine engine, PartitionTable.Versioned current) {
        this.engine = engine;
        this.current = current;
    }

    /** The version of the table this engine serves. */
    long version() {
        return current.version();
    }

    /**
     * The table served and its version, one snapshot; {@code refresh}: first the stored one if its version moved and
     * this engine may serve it (else, or when it cannot be read now, the one served).
     */
    PartitionTable.Versioned current(boolean refresh) {
        if (refresh) {
            try {
                adoptIfMoved(-1);
            } catch (IllegalStateException | dev.dex.rdma.FabricException notNow) {
                // a held partition's range changed (it is to be given up first), or the memory server did not answer
            }
        }
        return current;
    }

    /**
     * Serves the stored table from now on if its version moved, unless a partition this engine holds, other than
     * {@code recovering} (-1: none), has another range in it: this engine's cache and operations would then hold keys
     * another owner may serve. Returns whether the version had moved.
     *
     * @throws IllegalStateException when a held partition's range changed
     */
    boolean adoptIfMoved(int recovering) {
        if ((PartitionTable.storedVersion(engine.memory) & ~1L) == version()) {
            return false;
        }
        adoptStored(recovering);
        return true;
    }

    /** {@link #adoptIfMoved} without the first look at the version. */
    synchronized void adoptStored(int recovering) {
        PartitionTable.Versioned stored = PartitionTable.loadVersioned(engine.memory);
        long version = version();
        if (stored.version() == version) {
            return;
        }
        PartitionTable current = engine.partitions;
        for (int p = 0; p < current.idLimit(); p++) {
            if (p != recovering && !engine.held.notHeld(p) && (!stored.table().exists(p)
                    || stored.table().lowerExclusive(p) != current.lowerExclusive(p)
                    || stored.table().upperInclusive(p) != current.upperInclusive(p))) {
                throw new IllegalStateException("the partition table was rewritten (version " + version + " -> "
                        + stored.version() + ") and changed partition " + p + ", which this compute node holds; it refuses to"
                        + " serve from the new table until it gave that partition up");
            }
        }
        adopt(stored);
    }

    /** Serves {@code stored} from now on, if it is newer (the split of a partition this engine holds, paused). */
    synchronized void adopt(PartitionTable.Versioned stored) {
        if (stored.version() > version()) {
            engine.partitions = stored.table();
            current = stored;
        }
    }
}
