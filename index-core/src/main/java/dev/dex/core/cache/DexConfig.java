package dev.dex.core.cache;

import dev.dex.core.offload.OffloadSettings;

/**
 * Settings of one compute node's {@link DexEngine}.
 *
 * @param mode          how the engine caches and offloads ({@link EngineMode})
 * @param cacheBytes    bytes of the frame arena; each frame takes 1088 bytes (0 for no cache)
 * @param coolingRatio  fraction of the frames the cooling map holds (default 0.1)
 * @param leafAdmission probability P_A that a leaf read from remote memory is admitted (default 0.1)
 * @param offload       offloading policy and cost-model parameters; offloading also needs an
 *                      {@code OffloadChannel} when the engine is opened
 */
public record DexConfig(EngineMode mode, long cacheBytes, double coolingRatio, double leafAdmission, OffloadSettings offload) {
    public static final double DEFAULT_COOLING_RATIO = 0.1;
    public static final double DEFAULT_LEAF_ADMISSION = 0.1;

    public DexConfig {
        if (mode == null) {
            throw new IllegalArgumentException("engine mode must be one of " + EngineMode.labels() + ": null");
        }
        if (offload == null) {
            offload = OffloadSettings.of(mode.policy());
        } else if (offload.policy() != mode.policy()) {
            throw new IllegalArgumentException("mode " + mode + " offloads by policy " + mode.policy() + ", not " + offload.policy());
        }
        if (cacheBytes < 0) {
            throw new IllegalArgumentException("cache bytes must be >= 0: " + cacheBytes);
        }
        if (!(coolingRatio > 0 && coolingRatio < 1)) {
            throw new IllegalArgumentException("cooling ratio must be in (0, 1): " + coolingRatio);
        }
        if (!(leafAdmission >= 0 && leafAdmission <= 1)) {
            throw new IllegalArgumentException("leaf admission probability must be in [0, 1]: " + leafAdmission);
        }
        if (mode == EngineMode.PARTITIONED) {
            cacheBytes = 0;
        }
        if (mode == EngineMode.SHERMAN) {
            leafAdmission = 0;
        }
    }

    /** Settings of the mode labelled {@code mode} ({@link EngineMode#of}). */
    public DexConfig(String mode, long cacheBytes, double coolingRatio, double leafAdmission, OffloadSettings offload) {
        this(EngineMode.of(mode), cacheBytes, coolingRatio, leafAdmission, offload);
    }

    /** Settings with the mode's default offloading. */
    public DexConfig(String mode, long cacheBytes, double coolingRatio, double leafAdmission) {
        this(mode, cacheBytes, coolingRatio, leafAdmission, null);
    }

    public static DexConfig dex(long cacheBytes) {
        return withCache(EngineMode.DEX, cacheBytes);
    }

    public static DexConfig sherman(long cacheBytes) {
        return new DexConfig(EngineMode.SHERMAN, cacheBytes, DEFAULT_COOLING_RATIO, 0, null);
    }

    public static DexConfig partitioned() {
        return new DexConfig(EngineMode.PARTITIONED, 0, DEFAULT_COOLING_RATIO, 0, null);
    }

    /** {@code mode} with a cache of {@code cacheBytes} and the default cooling ratio and leaf admission. */
    public static DexConfig withCache(EngineMode mode, long cacheBytes) {
        return new DexConfig(mode, cacheBytes, DEFAULT_COOLING_RATIO, DEFAULT_LEAF_ADMISSION, null);
    }

    /** As {@link #withCache(EngineMode, long)}, for the mode labelled {@code mode}. */
    public static DexConfig withCache(String mode, long cacheBytes) {
        return withCache(EngineMode.of(mode), cacheBytes);
    }

    public DexConfig withLeafAdmission(double probability) {
        return new DexConfig(mode, cacheBytes, coolingRatio, probability, offload);
    }

    public DexConfig withCoolingRatio(double ratio) {
        return new DexConfig(mode, cacheBytes, ratio, leafAdmission, offload);
    }

    public DexConfig withOffload(OffloadSettings settings) {
        return new DexConfig(mode, cacheBytes, coolingRatio, leafAdmission, settings);
    }

    /** Whether inner nodes are cached at all. */
    boolean cachesInner() {
        return cacheBytes > 0;
    }
}
