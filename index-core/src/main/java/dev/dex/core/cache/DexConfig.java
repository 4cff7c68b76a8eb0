package dev.dex.core.cache;

/**
 * Settings of one compute node's {@link DexEngine}.
 *
 * @param mode          {@code dex} (cache inner nodes and, lazily, leaves), {@code sherman} (cache inner
 *                      nodes only; leaves always remote), {@code partitioned} (no cache)
 * @param cacheBytes    bytes of the frame arena; each frame takes 1088 bytes (0 for no cache)
 * @param coolingRatio  fraction of the frames the cooling map holds (default 0.1)
 * @param leafAdmission probability P_A that a leaf read from remote memory is admitted (default 0.1)
 */
public record DexConfig(String mode, long cacheBytes, double coolingRatio, double leafAdmission) {
    public static final double DEFAULT_COOLING_RATIO = 0.1;
    public static final double DEFAULT_LEAF_ADMISSION = 0.1;

    public DexConfig {
        if (!mode.equals("dex") && !mode.equals("sherman") && !mode.equals("partitioned")) {
            throw new IllegalArgumentException("engine mode must be dex, sherman or partitioned: " + mode);
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

    public static DexConfig dex(long cacheBytes) {
        return new DexConfig("dex", cacheBytes, DEFAULT_COOLING_RATIO, DEFAULT_LEAF_ADMISSION);
    }

    public static DexConfig sherman(long cacheBytes) {
        return new DexConfig("sherman", cacheBytes, DEFAULT_COOLING_RATIO, 0);
    }

    public static DexConfig partitioned() {
        return new DexConfig("partitioned", 0, DEFAULT_COOLING_RATIO, 0);
    }

    public DexConfig withLeafAdmission(double probability) {
        return new DexConfig(mode, cacheBytes, coolingRatio, probability);
    }

    public DexConfig withCoolingRatio(double ratio) {
        return new DexConfig(mode, cacheBytes, ratio, leafAdmission);
    }

    /** Whether inner nodes are cached at all. */
    boolean cachesInner() {
        return cacheBytes > 0;
    }
}
