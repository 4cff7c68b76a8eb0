package dev.dex.bench;

/**
 * What an operation found: lookups, updates and scans find or not; inserts add a key or find it present. With
 * injected faults an operation may also fail (it threw), and the run goes on.
 */
enum Outcome {
    FOUND("found"),
    NOT_FOUND("not found"),
    INSERTED("inserted"),
    ALREADY_PRESENT("already present"),
    FAILED("failed");

    private final String label;

    Outcome(String label) {
        this.label = label;
    }

    String label() {
        return label;
    }
}
