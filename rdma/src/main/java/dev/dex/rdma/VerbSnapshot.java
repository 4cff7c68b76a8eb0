package dev.dex.rdma;

/** Verb counts at one moment: one-sided reads, writes, atomics, two-sided messages, and bytes moved. */
public record VerbSnapshot(long reads, long writes, long atomics, long twoSided, long bytes) {
    public static final VerbSnapshot ZERO = new VerbSnapshot(0, 0, 0, 0, 0);

    public VerbSnapshot minus(VerbSnapshot other) {
        return new VerbSnapshot(reads - other.reads, writes - other.writes, atomics - other.atomics,
                twoSided - other.twoSided, bytes - other.bytes);
    }

    public VerbSnapshot plus(VerbSnapshot other) {
        return new VerbSnapshot(reads + other.reads, writes + other.writes, atomics + other.atomics,
                twoSided + other.twoSided, bytes + other.bytes);
    }

    /** All verbs, one-sided and two-sided. */
    public long verbs() {
        return reads + writes + atomics + twoSided;
    }
}
