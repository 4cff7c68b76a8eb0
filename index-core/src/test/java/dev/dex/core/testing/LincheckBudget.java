package dev.dex.core.testing;

/**
 * How many Lincheck iterations (scenarios) and invocations the linearizability tests run: the counts in each
 * test, a budget that keeps
 * {@code mvn -B verify} within its time on two cores, times {@code -Ddex.lincheck.scale=N} for a longer
 * search (for instance {@code mvn -B verify -pl index-core -Dtest='*Linearizability*' -Ddex.lincheck.scale=10}).
 */
public final class LincheckBudget {
    private LincheckBudget() {
    }

    /** {@code count} (iterations or invocations) times the configured scale (at least 1). */
    public static int scaled(int count) {
        double scale = Double.parseDouble(System.getProperty("dex.lincheck.scale", "1"));
        if (!(scale > 0)) {
            throw new IllegalArgumentException("dex.lincheck.scale must be > 0: " + scale);
        }
        return (int) Math.max(1, Math.round(count * scale));
    }
}
