package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.function.DoubleUnaryOperator;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** The climb {@link AdmissionTuner} runs over log2(P_A), against cost functions whose minimum is known. */
class HillClimberTest {
    /** The tuner's shape: [-9, 0] from log2(0.1), first step 1, down to 0.25, decay 0.9, restart on a 25% jump. */
    private static HillClimber climber(double direction) {
        return new HillClimber(-9, 0, Math.log(0.1) / Math.log(2), direction, 1.0, 0.25, 0.9, 0.25);
    }

    private static double climb(HillClimber climber, DoubleUnaryOperator cost, int periods) {
        double x = climber.x();
        for (int i = 0; i < periods; i++) {
            x = climber.next(cost.applyAsDouble(x));
        }
        return x;
    }

    @ParameterizedTest
    @ValueSource(doubles = {-1, 1})
    void itSettlesWithinASmallStepOfTheMinimumWhicheverWayItStarts(double direction) {
        for (double best : new double[] {-7.5, -5, -1.5}) {
            HillClimber c = climber(direction);
            climb(c, x -> 1 + (x - best) * (x - best), 40);
            double[] visited = new double[10];
            for (int i = 0; i < visited.length; i++) {
                visited[i] = c.next(1 + (c.x() - best) * (c.x() - best));
            }
            for (double x : visited) {
                assertTrue(Math.abs(x - best) <= 0.5, "minimum at " + best + ", visited " + x);
            }
            assertEquals(0.25, c.step(), 1e-9, "the step has shrunk to its floor");
        }
    }

    @Test
    void aMinimumBeyondTheRangeHoldsItAtTheBound() {
        HillClimber up = climber(-1);
        assertEquals(0, climb(up, x -> 10 - x, 30), 0.25 + 1e-9, "cost falls towards P_A 1");
        HillClimber down = climber(1);
        assertEquals(-9, climb(down, x -> 10 + x, 40), 0.25 + 1e-9, "cost falls towards the least P_A");
    }

    @Test
    void aNoisyCostStillKeepsItNearTheMinimum() {
        for (int seed = 1; seed <= 20; seed++) {
            SplittableRandom noise = new SplittableRandom(seed);
            HillClimber c = climber(-1);
            // A shallow bowl (a 2x step off the minimum costs 6%) under +-3% noise, like a period of a real run.
            DoubleUnaryOperator cost = x -> (1 + 0.06 * (x + 4.5) * (x + 4.5)) * (1 + 0.06 * (noise.nextDouble() - 0.5));
            climb(c, cost, 30);
            double sum = 0;
            for (int i = 0; i < 40; i++) {
                sum += c.next(cost.applyAsDouble(c.x()));
            }
            double mean = sum / 40;
            assertTrue(Math.abs(mean + 4.5) <= 1.0, "seed " + seed + ": settled around " + mean + ", minimum at -4.5");
        }
    }

    @Test
    void aJumpInCostOnceSettledRestartsTheBigSteps() {
        HillClimber c = climber(-1);
        climb(c, x -> 1 + (x + 7) * (x + 7), 40);
        assertEquals(0.25, c.step(), 1e-9);
        // The workload changes: the minimum moves to -1 and every cost near -7 is far higher.
        DoubleUnaryOperator moved = x -> 10 + 3 * (x + 1) * (x + 1);
        double x = climb(c, moved, 8);
        assertTrue(Math.abs(x + 1) <= 1.0, "8 periods after the jump: at " + x + "; at the settled step it would need 24");
    }

    @Test
    void aPeriodWithNothingMeasuredChangesNothing() {
        HillClimber c = climber(-1);
        double x = c.x();
        assertEquals(x, c.next(Double.NaN));
        assertEquals(1.0, c.step());
        assertEquals(x - 1.0, c.next(5), 1e-9, "the first measured period moves by the first step, in the first direction");
    }

    @Test
    void aClimberOutsideItsRangeIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> new HillClimber(-9, 0, 1, -1, 1, 0.25, 0.9, 0.25));
        assertThrows(IllegalArgumentException.class, () -> new HillClimber(-9, 0, -3, 0, 1, 0.25, 0.9, 0.25));
        assertThrows(IllegalArgumentException.class, () -> new HillClimber(-9, 0, -3, 1, 0.1, 0.25, 0.9, 0.25));
    }
}
