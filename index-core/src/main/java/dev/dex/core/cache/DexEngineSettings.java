package dev.dex.core.cache;

import dev.dex.core.offload.OffloadSettings;

/**
 * Settings of one compute node's {@link DexEngine}.
 *
 * @param mode          how the engine caches and offloads ({@link EngineMode})
 * @param cacheBytes    bytes of the frame arena; each frame takes 1088 bytes (0 for no cache)
 * @param coolingRatio  fraction of the frames the cooling map holds
 * @param leafAdmission probability P_A that a leaf read from remote memory is admitted, or {@link #AUTO_LEAF_ADMISSION}
 *                      for a P_A that the engine tunes itself ({@link AdmissionTuner})
 * @param offload       offloading policy and cost-model parameters; offloading also needs an
 *                      {@code OffloadChannel} when the engine is opened
 */
public record DexEngineSettings(EngineMode mode, long cacheBytes, double coolingRatio, double leafAdmission, OffloadSettings offload) {
    /** {@code dex.compute.cooling-ratio} of index-core's reference.conf, its one home. */
    public static final double DEFAULT_COOLING_RATIO = com.typesafe.config.ConfigFactory.defaultReferenceUnresolved().getDouble("dex.compute.cooling-ratio");
    /** {@code dex.compute.leaf-admission} of index-core's reference.conf, its one home. */
    public static final double DEFAULT_LEAF_ADMISSION =
            parseLeafAdmission(com.typesafe.config.ConfigFactory.defaultReferenceUnresolved().getString("dex.compute.leaf-admission"));
    /** {@code leafAdmission} of an engine that tunes P_A itself ({@code leaf-admission = auto}). */
    public static final double AUTO_LEAF_ADMISSION = -1;

    /**
     * P_A as a setting or an option gives it: {@code auto}, or a probability in [0, 1].
     *
     * @throws IllegalArgumentException naming what was given and what is accepted
     */
    public static double parseLeafAdmission(String value) {
        if ("auto".equals(value.trim())) {
            return AUTO_LEAF_ADMISSION;
        }
        try {
            return Double.parseDouble(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("leaf admission must be auto or a probability in [0, 1]: " + value, e);
        }
    }

    /**
     * The engine of a {@code dex.compute} section: {@code mode}, {@code cache-size}, {@code cooling-ratio},
     * {@code leaf-admission} and {@code offload}; a bad value fails naming its key.
     */
    public static DexEngineSettings fromConfig(com.typesafe.config.Config compute) {
        EngineMode mode;
        try {
            mode = EngineMode.of(compute.getString("mode"));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("dex.compute.mode: " + e.getMessage(), e);
        }
        try {
            return new DexEngineSettings(mode, compute.getBytes("cache-size"), compute.getDouble("cooling-ratio"),
                    parseLeafAdmission(compute.getString("leaf-admission")), OffloadSettings.fromConfig(mode.policy(), compute.getConfig("offload")));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("dex.compute: " + e.getMessage(), e);
        }
    }

    public DexEngineSettings {
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
        if (!(leafAdmission >= 0 && leafAdmission <= 1) && leafAdmission != AUTO_LEAF_ADMISSION) {
            throw new IllegalArgumentException("leaf admission probability must be auto or in [0, 1]: " + leafAdmission);
        }
        if (mode == EngineMode.PARTITIONED) {
            cacheBytes = 0;
        }
        if (mode == EngineMode.SHERMAN) {
            leafAdmission = 0;
        }
    }

    /** Settings of the mode labelled {@code mode} ({@link EngineMode#of}). */
    public DexEngineSettings(String mode, long cacheBytes, double coolingRatio, double leafAdmission, OffloadSettings offload) {
        this(EngineMode.of(mode), cacheBytes, coolingRatio, leafAdmission, offload);
    }

    /** Settings with the mode's default offloading. */
    public DexEngineSettings(String mode, long cacheBytes, double coolingRatio, double leafAdmission) {
        this(mode, cacheBytes, coolingRatio, leafAdmission, null);
    }

    public static DexEngineSettings dex(long cacheBytes) {
        return withCache(EngineMode.DEX, cacheBytes);
    }

    public static DexEngineSettings sherman(long cacheBytes) {
        return new DexEngineSettings(EngineMode.SHERMAN, cacheBytes, DEFAULT_COOLING_RATIO, 0, null);
    }

    public static DexEngineSettings partitioned() {
        return new DexEngineSettings(EngineMode.PARTITIONED, 0, DEFAULT_COOLING_RATIO, 0, null);
    }

    /** {@code mode} with a cache of {@code cacheBytes} and the default cooling ratio and leaf admission. */
    public static DexEngineSettings withCache(EngineMode mode, long cacheBytes) {
        return new DexEngineSettings(mode, cacheBytes, DEFAULT_COOLING_RATIO, DEFAULT_LEAF_ADMISSION, null);
    }

    /** As {@link #withCache(EngineMode, long)}, for the mode labelled {@code mode}. */
    public static DexEngineSettings withCache(String mode, long cacheBytes) {
        return withCache(EngineMode.of(mode), cacheBytes);
    }

    public DexEngineSettings withLeafAdmission(double probability) {
        return new DexEngineSettings(mode, cacheBytes, coolingRatio, probability, offload);
    }

    public DexEngineSettings withCoolingRatio(double ratio) {
        return new DexEngineSettings(mode, cacheBytes, ratio, leafAdmission, offload);
    }

    public DexEngineSettings withOffload(OffloadSettings settings) {
        return new DexEngineSettings(mode, cacheBytes, coolingRatio, leafAdmission, settings);
    }

    /** Whether the engine tunes P_A itself ({@code leaf-admission = auto}). */
    public boolean tunesLeafAdmission() {
        return leafAdmission == AUTO_LEAF_ADMISSION;
    }

    /** Whether inner nodes are cached at all. */
    boolean cachesInner() {
        return cacheBytes > 0;
    }
}
