package dev.dex.core.cache;

/**
 * A hill climber that minimises a measured cost over one parameter {@code x} in {@code [min, max]}: after each
 * period it is told the cost measured at the current {@code x} and moves by a step, on in the same direction
 * while the cost went down, back the other way when it went up. The step shrinks by {@code decay} each period down
 * to {@code minStep}, so the climb settles into an oscillation of about one small step around the best value; it
 * grows back to the first step when the cost jumps by more than {@code restartJump} (relative) once settled, which
 * is what a changed workload looks like. A flat cost keeps the direction (an unchanged cost is not worse).
 *
 * <p>Not thread-safe: its one user, {@link AdmissionTuner}, calls it under its own lock.
 */
final class HillClimber {
    private final double min;
    private final double max;
    private final double firstStep;
    private final double minStep;
    private final double decay;
    private final double restartJump;
    private double x;
    private double step;
    private double direction;
    private double previous = Double.NaN;

    /**
     * @param start       the first {@code x}
     * @param direction   +1 or -1: where the first step goes
     */
    HillClimber(double min, double max, double start, double direction, double firstStep, double minStep, double decay,
                double restartJump) {
        if (!(min < max && start >= min && start <= max && Math.abs(direction) == 1 && firstStep >= minStep && minStep > 0
                && decay > 0 && decay <= 1 && restartJump > 0)) {
            throw new IllegalArgumentException("bad hill climber: [" + min + ", " + max + "] from " + start);
        }
        this.min = min;
        this.max = max;
        this.x = start;
        this.direction = direction;
        this.firstStep = firstStep;
        this.minStep = minStep;
        this.decay = decay;
        this.restartJump = restartJump;
        this.step = firstStep;
    }

    /** Where the climb is: the {@code x} whose cost is measured next. */
    double x() {
        return x;
    }

    /** The step the next move takes. */
    double step() {
        return step;
    }

    /**
     * The cost measured at {@link #x()} over the period that ended; returns the {@code x} to measure next. A cost
     * that is not a number (nothing was measured) leaves everything as it is.
     */
    double next(double cost) {
        return next(cost, previous);
    }

    /**
     * As {@link #next(double)}, comparing {@code cost} with {@code previous}, the last period's cost measured again
     * in the same terms (the tuner prices both periods' counts at today's prices, so that a change of price is not
     * taken for a change of P_A's effect).
     */
    double next(double cost, double previous) {
        if (Double.isNaN(cost)) {
            return x;
        }
        if (!Double.isNaN(previous)) {
            if (step <= minStep && Math.abs(cost - previous) > restartJump * Math.max(Math.abs(previous), Double.MIN_NORMAL)) {
                step = firstStep;
            } else if (cost > previous) {
                direction = -direction;
            }
        }
        this.previous = cost;
        x = Math.max(min, Math.min(max, x + direction * step));
        step = Math.max(minStep, step * decay);
        return x;
    }
}
