package dev.dex.core.cache;

import java.util.function.Supplier;

import dev.dex.rdma.VerbSnapshot;

/**
 * P_A, the probability that a leaf read on a miss is admitted into the cache (paper §4.3): fixed, or, with
 * {@code dex.compute.leaf-admission = auto}, tuned while the engine runs (docs/dex-cache.md, "P_A that tunes
 * itself").
 *
 * <p>Tuning measures, per period of {@link #periodOperations} operations, what an operation cost:
 * <pre>
 *   cost = (remote verbs / operation) x t_verb + (admissions / operation) x t_admission
 * </pre>
 * The verbs are every verb of the engine's memory connection (misses, write-throughs, write-backs of evicted
 * frames, locks, offloads), so a higher hit ratio lowers the first term; {@code t_verb} is the sampled time of a
 * remote read. An admission costs a frame: taking it from the free list, or cooling and evicting one (the cooling
 * map's work, and the write-back of a dirty victim), then copying the node in; {@code t_admission} is its sampled
 * time less {@code t_verb} for each write-back in it (those are among the verbs already), so the cooling rate is
 * what the second term prices. Both times are moving averages over periods. A
 * {@link HillClimber} over log2(P_A), from the paper's 0.1 in [1/512, 1], moves P_A towards the lower cost. It
 * compares a period with the one before at the same prices (today's), so that only the counts, which P_A changes,
 * decide the direction, not the noise of the sampled times.
 *
 * <p>Sessions report to the tuner every {@link #REPORT_EVERY} operations ({@link #report}); a fixed P_A costs them
 * a counter per operation and a call that returns at once every REPORT_EVERY operations.
 *
 * <pre>
 * Concurrency: the settings are final. Sessions call {@link #report} from their own threads; its state (the
 * period's sums, the climber, the averages) is guarded by this object's monitor, taken once per REPORT_EVERY
 * operations of a session. {@link #probability()} is a volatile read, for statistics; sessions take the new P_A
 * from report's answer, so a change reaches each session within REPORT_EVERY of its operations.
 * </pre>
 */
final class AdmissionTuner {
    /** Operations a session counts before it reports them. */
    static final int REPORT_EVERY = 256;
    /** One read in this many of a session's is timed, and one admission in this many. */
    static final int SAMPLE_EVERY = 16;
    /** The shortest period, in operations; longer with a bigger cache ({@link #periodOperations}). */
    static final long MIN_PERIOD = 16_384;
    /** log2 of the lowest P_A tuning tries; 0 (never admit) is left to a fixed setting. */
    static final double LOG2_MIN = -9;
    /** Where tuning starts: the paper's P_A. */
    static final double START = 0.1;
    /** Weight of a period's sampled times in their moving averages. */
    private static final double AVERAGE_WEIGHT = 0.3;

    private final boolean auto;
    private final Supplier<VerbSnapshot> verbs;
    private final long periodOperations;
    private final HillClimber climber;
    private volatile double probability;

    /**
     * What happened since a point: operations, admissions, the sampled times of reads and admissions, and the writes
     * made within the timed admissions (write-backs). A session keeps one (its thread alone touches it) and hands it to
     * {@link #report}; the tuner sums them into its period's, under its monitor.
     */
    static final class Counts {
        long operations;
        long admissions;
        long readNanos;
        long reads;
        long admissionNanos;
        long admissionsTimed;
        long writesInAdmissions;

        private void add(Counts c) {
            operations += c.operations;
            admissions += c.admissions;
            readNanos += c.readNanos;
            reads += c.reads;
            admissionNanos += c.admissionNanos;
            admissionsTimed += c.admissionsTimed;
            writesInAdmissions += c.writesInAdmissions;
        }

        void clear() {
            operations = 0;
            admissions = 0;
            readNanos = 0;
            reads = 0;
            admissionNanos = 0;
            admissionsTimed = 0;
            writesInAdmissions = 0;
        }
    }

    // guarded by this
    private final Counts period = new Counts();
    private VerbSnapshot periodStart;
    private double verbNanos = Double.NaN;
    private double admissionCost = Double.NaN;
    private long periods;
    private long readsTimed;
    /** The last period's verbs and admissions per operation, priced again at the next period's prices. */
    private double lastVerbsPerOp = Double.NaN;
    private double lastAdmissionsPerOp = Double.NaN;

    /**
     * @param settings the engine's settings: a fixed P_A, or {@link DexEngineSettings#AUTO_LEAF_ADMISSION}
     * @param frames   the cache's frames: a period is at least 8 times as many operations
     * @param verbs    the engine's verbs since start ({@code VerbCounters#sinceStart})
     */
    AdmissionTuner(DexEngineSettings settings, int frames, Supplier<VerbSnapshot> verbs) {
        this.auto = settings.tunesLeafAdmission() && settings.cachesInner();
        this.verbs = verbs;
        this.periodOperations = Math.max(MIN_PERIOD, 8L * frames);
        double start = auto ? START : settings.tunesLeafAdmission() ? 0 : settings.leafAdmission();
        this.climber = new HillClimber(LOG2_MIN, 0, Math.max(LOG2_MIN, Math.min(0, log2(start))), -1, 1.0, 0.25, 0.9, 0.25);
        this.probability = auto ? Math.pow(2, climber.x()) : start;
    }

    /** Whether P_A is tuned ({@code leaf-admission = auto} with a cache). */
    boolean tunes() {
        return auto;
    }

    /** P_A now. */
    double probability() {
        return probability;
    }

    /** Periods measured so far (0 when P_A is fixed). */
    synchronized long periods() {
        return periods;
    }

    /** Reads the sessions timed and reported so far (0 when P_A is fixed). */
    synchronized long readsTimed() {
        return readsTimed;
    }

    /** Operations per period. */
    long periodOperations() {
        return periodOperations;
    }

    /**
     * A session's report of what happened since its last one; {@code counts} is cleared. Returns P_A for the session's
     * next operations.
     */
    double report(Counts counts) {
        if (!auto) {
            counts.clear();
            return probability;
        }
        synchronized (this) {
            if (periodStart == null) {
                periodStart = verbs.get();
                counts.clear();
                return probability;
            }
            period.add(counts);
            readsTimed += counts.reads;
            counts.clear();
            if (period.operations >= periodOperations) {
                endPeriod();
            }
            return probability;
        }
    }

    /** Prices the period that ended, moves P_A, and starts the next period. Called holding the monitor. */
    private void endPeriod() {
        VerbSnapshot now = verbs.get();
        long verbCount = now.minus(periodStart).verbs();
        if (period.reads > 0) {
            verbNanos = average(verbNanos, (double) period.readNanos / period.reads);
        }
        if (Double.isNaN(verbNanos)) {
            // No read timed yet: nothing can be priced, so P_A stays; the next period starts here.
            startPeriod(now);
            return;
        }
        double verbPrice = verbNanos;
        if (period.admissionsTimed > 0) {
            admissionCost = average(admissionCost,
                    Math.max(0, period.admissionNanos - period.writesInAdmissions * verbPrice) / period.admissionsTimed);
        }
        double admissionPrice = Double.isNaN(admissionCost) ? 0 : admissionCost;
        double verbsPerOp = (double) verbCount / period.operations;
        double admissionsPerOp = (double) period.admissions / period.operations;
        double cost = verbsPerOp * verbPrice + admissionsPerOp * admissionPrice;
        double before = lastVerbsPerOp * verbPrice + lastAdmissionsPerOp * admissionPrice;
        lastVerbsPerOp = verbsPerOp;
        lastAdmissionsPerOp = admissionsPerOp;
        periods++;
        probability = Math.pow(2, climber.next(cost, before));
        startPeriod(now);
    }

    private void startPeriod(VerbSnapshot now) {
        periodStart = now;
        period.clear();
    }

    private static double average(double previous, double sample) {
        return Double.isNaN(previous) ? sample : previous + AVERAGE_WEIGHT * (sample - previous);
    }

    private static double log2(double p) {
        return p <= 0 ? LOG2_MIN : Math.log(p) / Math.log(2);
    }

    @Override
    public String toString() {
        return auto ? String.format(java.util.Locale.ROOT, "auto, now %.4f after %d periods", probability, periods())
                : String.format(java.util.Locale.ROOT, "%.4f", probability);
    }
}
