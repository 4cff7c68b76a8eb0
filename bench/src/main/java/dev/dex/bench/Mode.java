package dev.dex.bench;

import java.util.Arrays;
import java.util.Iterator;

/**
 * The engine a run measures. {@code baseline}: the baseline B+-tree, no cache. {@code partitioned},
 * {@code sherman}, {@code dex}: the DEX engine's modes, each compute node serving its logical partitions;
 * {@code dex} offloads misses by the cost model, {@code offload-only} offloads every eligible miss,
 * {@code no-offload} never offloads.
 * {@code skiplist}: a {@code ConcurrentSkipListMap} in this JVM, the no-fabric reference point.
 */
enum Mode {
    BASELINE("baseline", false),
    PARTITIONED("partitioned", true),
    SHERMAN("sherman", true),
    DEX("dex", true),
    OFFLOAD_ONLY("offload-only", true),
    NO_OFFLOAD("no-offload", true),
    SKIPLIST("skiplist", false);

    private final String cliName;
    private final boolean partitioned;

    Mode(String cliName, boolean partitioned) {
        this.cliName = cliName;
        this.partitioned = partitioned;
    }

    String cliName() {
        return cliName;
    }

    /** True for the modes whose engines serve logical partitions ({@code PartitionedEngine}). */
    boolean partitioned() {
        return partitioned;
    }

    /** True for the modes that offload to memory-side threads. */
    boolean offloads() {
        return this == DEX || this == OFFLOAD_ONLY;
    }

    /** True for the modes that run on the fabric (all but skiplist). */
    boolean usesFabric() {
        return this != SKIPLIST;
    }

    static Mode fromCliName(String name) {
        return CliNames.find(values(), Mode::cliName, name, "mode");
    }

    static final class Names implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            return Arrays.stream(values()).map(Mode::cliName).iterator();
        }
    }
}
