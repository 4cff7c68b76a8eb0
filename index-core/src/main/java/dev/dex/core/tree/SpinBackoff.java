package dev.dex.core.tree;

/** Bounded exponential backoff for optimistic retries: spin first, then yield the core. */
final class SpinBackoff {
    private static final int SPIN_ROUNDS = 6;

    private SpinBackoff() {
    }

    /** Pauses for about 2^attempt spin-waits, or yields once {@code attempt} is past the spin rounds. */
    static void pause(int attempt) {
        if (attempt < SPIN_ROUNDS) {
            for (int i = 1 << attempt; i > 0; i--) {
                Thread.onSpinWait();
            }
        } else {
            Thread.yield();
        }
    }
}
