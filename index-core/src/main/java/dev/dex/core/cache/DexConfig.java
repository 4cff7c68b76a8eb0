package dev.dex.core.cache;

import dev.dex.core.offload.OffloadSettings;

/**
 * Settings of one compute node's {@link DexEngine}.
 *
 * @param mode          {@code dex} (cache inner nodes and, lazily, leaves; offload by the cost model),
 *                      {@code offload-only} (the same cache, but offload every eligible miss),
 *                      {@code no-offload} (the same cache, never offload), {@code sherman} (cache inner
 *                      nodes only; leaves always remote), {@code partitioned} (no cache)
 * @param cacheBytes    bytes of the frame arena; each frame takes 1088 bytes (0 for no cache)
 * @param coolingRatio  fraction of the frames the cooling map holds (default 0.1)
 * @param leafAdmission probability P_A that a leaf read from remote memory is admitted (default 0.1)
 * @param offload       offloading policy and cost-model parameters; offloading also needs an
 *                      {@code OffloadChannel} when the engine is opened
 */
public record DexConfig(String mode, long cacheBytes, double coolingRatio, double leafAdmission, OffloadSettings offload) {
    public static final double DEFAULT_COOLING_RATIO = 0.1;
    public static final double DEFAULT_LEAF_ADMISSION = 0.1;

    public DexConfig {
        OffloadSettings.Policy policy = switch (mode) {
            case "dex" -> OffloadSettings.Policy.COST_MODEL;
            case "offload-only" -> OffloadSettings.Policy.ALWAYS;
            case "no-offload", "sherman", "partitioned" -> OffloadSettings.Policy.NEVER;
            default -> throw new IllegalArgumentException(
                    "engine mode must be dex, offload-only, no-offload, sherman or partitioned: " + mode);
        };
        if (offload == null) {
            offload = OffloadSettings.of(policy);
        } else if (offload.policy() != policy) {
            throw new IllegalArgumentException("mode " + mode + " offloads by policy " + policy + ", not " + offload.policy());
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
        if (mode.equals("partitioned")) {
            cacheBytes = 0;
        }
        if (mode.equals("sherman")) {
            leafAdmission = 0;
        }
    }

    /** Settings with the mode's default offloading. */
    public DexConfig(String mode, long cacheBytes, double coolingRatio, double leafAdmission) {
        this(mode, cacheBytes, coolingRatio, leafAdmission, null);
    }

    public static DexConfig dex(long cacheBytes) {
        return new DexConfig("dex", cacheBytes, DEFAULT_COOLING_RATIO, DEFAULT_LEAF_ADMISSION);
    }

    public static DexConfig sherman(long cacheBytes) {
        return new DexConfig("sherman", cacheBytes, DEFAULT_COOLING_RATIO, 0);
    }

    public static DexConfig partitioned() {
        return new DexConfig("partitioned", 0, DEFAULT_COOLING_RATIO, 0);
    }

    /** The DEX cache with another offloading mode: {@code dex}, {@code offload-only}, {@code no-offload}. */
    public static DexConfig withCache(String mode, long cacheBytes) {
        return new DexConfig(mode, cacheBytes, DEFAULT_COOLING_RATIO, DEFAULT_LEAF_ADMISSION);
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
