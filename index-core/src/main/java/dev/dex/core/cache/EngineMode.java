package dev.dex.core.cache;

import java.util.Arrays;
import java.util.stream.Collectors;

import dev.dex.core.offload.OffloadSettings;

/**
 * How a compute node's {@link DexEngine} caches and offloads: the one list of engine modes, read by
 * {@link DexEngineSettings}, the cluster's settings ({@code dex.compute.mode}) and the benchmark ({@code --mode}).
 *
 * <p>Immutable; thread-safe.
 */
public enum EngineMode {
    /** Cache inner nodes and, lazily, leaves; offload a miss when the cost model says it is cheaper (the paper's DEX). */
    DEX("dex", OffloadSettings.Policy.COST_MODEL),
    /** The DEX cache, and every eligible miss offloaded. */
    OFFLOAD_ONLY("offload-only", OffloadSettings.Policy.ALWAYS),
    /** The DEX cache, never offloading. */
    NO_OFFLOAD("no-offload", OffloadSettings.Policy.NEVER),
    /** Inner nodes cached, leaves always remote (Sherman's cache, on logical partitions). */
    SHERMAN("sherman", OffloadSettings.Policy.NEVER),
    /** No cache: logical partitions alone. */
    PARTITIONED("partitioned", OffloadSettings.Policy.NEVER);

    private final String label;
    private final OffloadSettings.Policy policy;

    EngineMode(String label, OffloadSettings.Policy policy) {
        this.label = label;
        this.policy = policy;
    }

    /** The name settings and the command line use. */
    public String label() {
        return label;
    }

    /** How this mode offloads. */
    public OffloadSettings.Policy policy() {
        return policy;
    }

    /** Whether this mode offloads at all. */
    public boolean offloads() {
        return policy != OffloadSettings.Policy.NEVER;
    }

    /** The mode named {@code label}; an unknown name fails naming the known ones. */
    public static EngineMode of(String label) {
        for (EngineMode mode : values()) {
            if (mode.label.equals(label)) {
                return mode;
            }
        }
        throw new IllegalArgumentException("engine mode must be one of " + labels() + ": " + label);
    }

    /** The labels of every mode, comma-separated, in declaration order. */
    public static String labels() {
        return Arrays.stream(values()).map(EngineMode::label).collect(Collectors.joining(", "));
    }

    @Override
    public String toString() {
        return label;
    }
}
