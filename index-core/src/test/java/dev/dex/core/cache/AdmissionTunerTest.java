package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.SplittableRandom;
import java.util.function.DoubleUnaryOperator;

import org.junit.jupiter.api.Test;

import dev.dex.rdma.VerbSnapshot;

/**
 * {@code leaf-admission = auto}: the tuner's price of an operation against a world whose best P_A is known, and an
 * engine that tunes P_A the way its workload needs, staying correct while P_A changes under it.
 */
class AdmissionTunerTest {
    private static final DexEngineSettings AUTO = DexEngineSettings.dex(100L * FrameHeaderDescriptor.FRAME_LENGTH)
            .withLeafAdmission(DexEngineSettings.AUTO_LEAF_ADMISSION);

    /**
     * Runs the tuner against a world where an operation at P_A {@code p} makes {@code verbs(p)} remote verbs of
     * {@code readNs} each and {@code admissions(p)} admissions of {@code admissionNs} each, plus, if
     * {@code writeBackNs} is not 0, a write-back of that long within each (a verb, counted among the verbs); returns
     * P_A after {@code periods} periods.
     */
    private static double tuneIn(DoubleUnaryOperator verbs, DoubleUnaryOperator admissions, long readNs, long admissionNs,
                                 long writeBackNs, int periods) {
        long[] verbCount = {0};
        AdmissionTuner tuner = new AdmissionTuner(AUTO, 100, () -> new VerbSnapshot(verbCount[0], 0, 0, 0, 0));
        double p = tuner.report(new AdmissionTuner.Counts());
        int reports = (int) (periods * tuner.periodOperations() / AdmissionTuner.REPORT_EVERY);
        double carried = 0;
        for (int i = 0; i < reports; i++) {
            int ops = AdmissionTuner.REPORT_EVERY;
            double made = ops * verbs.applyAsDouble(p) + carried;
            verbCount[0] += (long) made;
            carried = made - (long) made;
            int admitted = (int) Math.round(ops * admissions.applyAsDouble(p));
            p = tuner.report(counts(ops, admitted, readNs * 16, 16, admissionNs * 4 + writeBackNs * 4, admitted > 0 ? 4 : 0,
                    writeBackNs > 0 && admitted > 0 ? 4 : 0));
        }
        assertEquals(periods, tuner.periods(), 1);
        return p;
    }

    private static AdmissionTuner.Counts counts(long ops, long admitted, long readNs, long reads, long admissionNs,
                                                long admissionsTimed, long writesInAdmissions) {
        AdmissionTuner.Counts c = new AdmissionTuner.Counts();
        c.operations = ops;
        c.admissions = admitted;
        c.readNanos = readNs;
        c.reads = reads;
        c.admissionNanos = admissionNs;
        c.admissionsTimed = admissionsTimed;
        c.writesInAdmissions = writesInAdmissions;
        return c;
    }

    @Test
    void itFindsTheBestPriceOfMissesAndAdmissions() {
        // Admitting more leaves saves verbs with diminishing returns, and each admission costs half a verb:
        // the cost 2000 (0.5 + 0.5 / (1 + 20p)) + 1000 (0.5 p) is least at p = (sqrt(40) - 1) / 20 = 0.266.
        DoubleUnaryOperator verbs = p -> 0.5 + 0.5 / (1 + 20 * p);
        DoubleUnaryOperator admissions = p -> 0.5 * p;
        double p = tuneIn(verbs, admissions, 2000, 1000, 0, 60);
        assertTrue(p > 0.266 / 1.5 && p < 0.266 * 1.5, "P_A " + p + ", best 0.266");
        // Free admissions: then admitting every leaf is best.
        assertTrue(tuneIn(verbs, admissions, 2000, 0, 0, 60) > 0.8, "free admissions: admit every leaf");
        // Admissions dear (ten verbs each): admit hardly any.
        assertTrue(tuneIn(verbs, admissions, 2000, 20_000, 0, 60) < 0.03, "dear admissions: admit few");
    }

    @Test
    void aWriteBackWithinAnAdmissionIsPricedOnceAsAVerb() {
        // The world above, where each admission also writes a dirty victim back (a verb of 2000 ns within its time).
        // Priced twice, an admission would cost 3000 ns and P_A would settle near 0.13; priced once, near 0.266.
        DoubleUnaryOperator verbs = p -> 0.5 + 0.5 / (1 + 20 * p);
        double p = tuneIn(verbs, q -> 0.5 * q, 2000, 1000, 2000, 60);
        assertTrue(p > 0.266 / 1.4 && p < 0.266 * 1.4, "P_A " + p + ", best 0.266");
    }

    @Test
    void aFixedProbabilityIsNeverTuned() {
        AdmissionTuner fixed = new AdmissionTuner(DexEngineSettings.dex(1 << 20).withLeafAdmission(0.3), 100,
                () -> { throw new AssertionError("a fixed P_A reads no verbs"); });
        for (int i = 0; i < 1000; i++) {
            assertEquals(0.3, fixed.report(counts(AdmissionTuner.REPORT_EVERY, 100, 1000, 1, 1000, 1, 0)));
        }
        assertEquals(0, fixed.periods());
        assertEquals("0.3000", fixed.toString());
        AdmissionTuner noCache = new AdmissionTuner(DexEngineSettings.dex(0).withLeafAdmission(DexEngineSettings.AUTO_LEAF_ADMISSION),
                0, () -> { throw new AssertionError("no cache: nothing to tune"); });
        assertTrue(!noCache.tunes() && noCache.report(counts(256, 0, 0, 0, 0, 0, 0)) == 0, "no cache, no tuning, no leaf admitted");
    }

    /**
     * A read that fails while it is timed does not end the sampling: one in 20 reads fails, so within a few dozen samples
     * a timed one does, and a session that then never timed a read again would leave the price of a verb where it was.
     */
    @Test
    void readsAreStillTimedAfterATimedReadFailed() {
        try (DexFixture fixture = new DexFixture(1, 3, 60_000, 4, true, 0)) {
            fixture.connectionWrapper = memory -> new dev.dex.rdma.FaultInjectingRemoteMemory(memory,
                    dev.dex.rdma.FaultPlan.none().withRate(0.05).withKinds(dev.dex.rdma.FaultPlan.Kind.READ).withSeed(3));
            // no-offload: no cost model times reads of its own meanwhile.
            DexEngine engine = fixture.open(1, DexEngineSettings.withCache("no-offload", 60L * FrameHeaderDescriptor.FRAME_LENGTH)
                    .withLeafAdmission(DexEngineSettings.AUTO_LEAF_ADMISSION)).get(0);
            SplittableRandom random = new SplittableRandom(5);
            long failed = 0;
            try (DexSession session = engine.newSession()) {
                for (int op = 0; op < 100_000; op++) {
                    long key = 2L * random.nextInt(60_000) + 2;
                    try {
                        assertTrue(!session.lookup(key) || session.value() == key + 1, "key " + key);
                    } catch (dev.dex.rdma.FabricException injected) {
                        failed++;
                    }
                }
            }
            assertTrue(failed > 1_000, "reads failed: " + failed);
            // About two misses per operation, one in 16 timed: thousands, not the few dozen before a timed one fails.
            assertTrue(engine.admissionTuner.readsTimed() > 5_000, "reads timed: " + engine.admissionTuner.readsTimed());
        }
    }

    /**
     * A hot set of leaves that fits in the cache moves to another part of the key space every 4,000 operations:
     * a leaf is worth admitting on its first miss, since it will be read again soon, so the engine raises P_A.
     */
    @Test
    void anEngineWhoseHotLeavesMoveLearnsToAdmitEagerly() {
        try (DexFixture fixture = new DexFixture(1, 3, 60_000, 4, true, 2_000)) {
            DexEngine engine = fixture.open(1, DexEngineSettings.dex(300L * FrameHeaderDescriptor.FRAME_LENGTH)
                    .withLeafAdmission(DexEngineSettings.AUTO_LEAF_ADMISSION)).get(0);
            SplittableRandom random = new SplittableRandom(7);
            DexSession session = engine.newSession();
            int hotStart = 0;
            for (int op = 0; op < 400_000; op++) {
                if (op % 4_000 == 0) {
                    hotStart = random.nextInt(60_000 - 2_000);
                }
                int i = hotStart + random.nextInt(2_000);
                assertTrue(session.lookup(2L * i + 2) && session.value() == 2L * i + 3, "key " + i);
            }
            assertTrue(engine.admissionTuner.periods() >= 20, engine.leafAdmissionState());
            assertTrue(engine.leafAdmission() >= 0.5, "P_A rose from 0.1: " + engine.leafAdmissionState());
            session.close();
            CacheValidator.validate(engine);
        }
    }

    /**
     * Uniform lookups over a tree 20 times the cache: an admitted leaf is evicted before it is read again, so each
     * admission only costs; the engine lowers P_A. Writes run too, so P_A changes under cached dirty leaves.
     */
    @Test
    void anEngineWhoseLeavesAreNotReusedLearnsToAdmitLazilyAndStaysCorrect() {
        try (DexFixture fixture = new DexFixture(1, 3, 60_000, 4, true, 2_000)) {
            List<DexEngine> engines = fixture.open(1, DexEngineSettings.dex(60L * FrameHeaderDescriptor.FRAME_LENGTH)
                    .withLeafAdmission(DexEngineSettings.AUTO_LEAF_ADMISSION));
            DexEngine engine = engines.get(0);
            java.util.TreeMap<Long, Long> model = fixture.initialModel();
            SplittableRandom random = new SplittableRandom(11);
            DexSession session = engine.newSession();
            for (int op = 0; op < 400_000; op++) {
                long key = 2L * random.nextInt(60_000) + 2;
                if (op % 10 == 0) {
                    session.put(key, op);
                    model.put(key, (long) op);
                } else {
                    assertTrue(session.lookup(key) && session.value() == model.get(key), "key " + key);
                }
            }
            assertTrue(engine.admissionTuner.periods() >= 20, engine.leafAdmissionState());
            assertTrue(engine.leafAdmission() <= 0.03, "P_A fell from 0.1: " + engine.leafAdmissionState());
            session.close();
            CacheValidator.validate(engine);
            assertEquals(model, fixture.validateFlushAndRead(), "every write is in the tree");
        }
    }
}
