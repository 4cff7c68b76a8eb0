package dev.dex.core.tree.lincheck;

import java.util.concurrent.atomic.LongAdder;

import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;

/**
 * What the invocations of one Lincheck check did to the tree's shape, so that a test can assert that
 * the checked runs really split nodes: a linearizability check that never splits proves little.
 */
final class RunStatistics {
    private final LongAdder validations = new LongAdder();
    private final LongAdder rootSplits = new LongAdder();
    private final LongAdder[] grownLevels = new LongAdder[TreeSettings.MAX_HEIGHT];
    private final LongAdder splitsWhileOverlapping = new LongAdder();

    RunStatistics() {
        for (int level = 0; level < grownLevels.length; level++) {
            grownLevels[level] = new LongAdder();
        }
    }

    void reset() {
        validations.reset();
        rootSplits.reset();
        for (LongAdder grown : grownLevels) {
            grown.reset();
        }
        splitsWhileOverlapping.reset();
    }

    /** Records the tree an invocation left, against the bulk-loaded shape. */
    void recordValidated(TreeValidator.Report report, KeyLayout layout) {
        validations.increment();
        if (report.height() > layout.height()) {
            rootSplits.increment();
        }
        long[] loaded = layout.nodesPerLevel();
        for (int level = 0; level < loaded.length; level++) {
            if (report.nodesPerLevel()[level] > loaded[level]) {
                grownLevels[level].increment();
            }
        }
    }

    /** Records an operation during which the root or a child of the root split while another operation ran. */
    void recordSplitWhileOverlapping() {
        splitsWhileOverlapping.increment();
    }

    long validations() {
        return validations.sum();
    }

    /** Validated trees that had grown a level. */
    long rootSplits() {
        return rootSplits.sum();
    }

    /** Validated trees with more nodes at {@code level} than were loaded (a root split counts at its level). */
    long splitsAt(int level) {
        return grownLevels[level].sum();
    }

    long splitsWhileOverlapping() {
        return splitsWhileOverlapping.sum();
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("validations=").append(validations()).append(", rootSplits=").append(rootSplits());
        for (int level = 0; level < grownLevels.length; level++) {
            if (splitsAt(level) > 0) {
                sb.append(", splitsAtLevel").append(level).append('=').append(splitsAt(level));
            }
        }
        return sb.append(", splitsWhileOverlapping=").append(splitsWhileOverlapping()).toString();
    }
}
