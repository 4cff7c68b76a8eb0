package dev.dex.bench;

import java.util.Arrays;
import java.util.Iterator;

import dev.dex.core.cache.EngineMode;

/**
 * The engine a run measures. {@code baseline}: the baseline B+-tree, no cache. {@code partitioned},
 * {@code sherman}, {@code dex}: the DEX engine's modes, each compute node serving its logical partitions;
 * {@code dex} offloads misses by the cost model, {@code offload-only} offloads every eligible miss,
 * {@code no-offload} never offloads.
 * {@code skiplist}: a {@code ConcurrentSkipListMap} in this JVM, the no-fabric reference point.
 */
enum Mode {
    BASELINE("baseline", null),
    PARTITIONED(EngineMode.PARTITIONED),
    SHERMAN(EngineMode.SHERMAN),
    DEX(EngineMode.DEX),
    OFFLOAD_ONLY(EngineMode.OFFLOAD_ONLY),
    NO_OFFLOAD(EngineMode.NO_OFFLOAD),
    SKIPLIST("skiplist", null);

    private final String cliName;
    /** The DEX engine's mode this runs, or null (baseline, skiplist). */
    private final EngineMode engine;

    Mode(EngineMode engine) {
        this(engine.label(), engine);
    }

    Mode(String cliName, EngineMode engine) {
        this.cliName = cliName;
        this.engine = engine;
    }

    String cliName() {
        return cliName;
    }

    /** The DEX engine's mode, for the modes that run the DEX engine; null otherwise. */
    EngineMode engine() {
        return engine;
    }

    /** True for the modes whose engines serve logical partitions ({@code PartitionedEngine}): the DEX engine's. */
    boolean partitioned() {
        return engine != null;
    }

    /** True for the modes that offload to memory-side threads. */
    boolean offloads() {
        return engine != null && engine.offloads();
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
