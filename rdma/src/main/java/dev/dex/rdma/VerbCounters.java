package dev.dex.rdma;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Counts the verbs one client issues: one-sided reads, writes and atomics, two-sided messages, and the
 * bytes they move.
 *
 * <p>Concurrency: each thread owns a {@link Cell} and is its only writer; it publishes every increment
 * with an opaque store, so a hot path pays no fence and no contended cache line. {@link #snapshot()}
 * sums every cell with opaque loads: the sum is exact once the counted threads are quiescent, and
 * otherwise may miss increments that are in flight. {@link #reset()} never writes a cell (that would race
 * with its owner); it records the current sums as a baseline that later snapshots subtract.
 */
public final class VerbCounters {
    private final CopyOnWriteArrayList<Cell> cells = new CopyOnWriteArrayList<>();
    private final ThreadLocal<Cell> local = ThreadLocal.withInitial(this::register);
    private volatile VerbSnapshot baseline = VerbSnapshot.ZERO;

    private Cell register() {
        Cell cell = new Cell();
        cells.add(cell);
        return cell;
    }

    /** The calling thread's cell; cache it in a per-thread context to skip the thread-local lookup. */
    public Cell cell() {
        return local.get();
    }

    public void recordRead(int bytes) {
        cell().recordRead(bytes);
    }

    public void recordWrite(int bytes) {
        cell().recordWrite(bytes);
    }

    public void recordAtomic() {
        cell().recordAtomic();
    }

    /** A two-sided message (for example an offloaded operation) and the bytes of request plus reply. */
    public void recordTwoSided(int bytes) {
        cell().recordTwoSided(bytes);
    }

    /** Verbs of every thread since the last {@link #reset()}. */
    public VerbSnapshot snapshot() {
        return total().minus(baseline);
    }

    /** Starts counting from zero again. */
    public void reset() {
        baseline = total();
    }

    /**
     * Verbs of every thread since these counters were made, whatever {@link #reset()} did: for a rate between two
     * points in time that a reset by someone else must not upset.
     */
    public VerbSnapshot sinceStart() {
        return total();
    }

    private VerbSnapshot total() {
        long reads = 0;
        long writes = 0;
        long atomics = 0;
        long twoSided = 0;
        long bytes = 0;
        for (Cell c : cells) {
            reads += (long) Cell.READS.getOpaque(c);
            writes += (long) Cell.WRITES.getOpaque(c);
            atomics += (long) Cell.ATOMICS.getOpaque(c);
            twoSided += (long) Cell.TWO_SIDED.getOpaque(c);
            bytes += (long) Cell.BYTES.getOpaque(c);
        }
        return new VerbSnapshot(reads, writes, atomics, twoSided, bytes);
    }

    /** One thread's counts; written only by that thread. */
    public static final class Cell {
        static final VarHandle READS;
        static final VarHandle WRITES;
        static final VarHandle ATOMICS;
        static final VarHandle TWO_SIDED;
        static final VarHandle BYTES;

        static {
            try {
                MethodHandles.Lookup lookup = MethodHandles.lookup();
                READS = lookup.findVarHandle(Cell.class, "reads", long.class);
                WRITES = lookup.findVarHandle(Cell.class, "writes", long.class);
                ATOMICS = lookup.findVarHandle(Cell.class, "atomics", long.class);
                TWO_SIDED = lookup.findVarHandle(Cell.class, "twoSided", long.class);
                BYTES = lookup.findVarHandle(Cell.class, "bytes", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        private long reads;
        private long writes;
        private long atomics;
        private long twoSided;
        private long bytes;

        Cell() {
        }

        /** Writes this cell counted so far (an opaque load: any thread may ask, its owner sees its own count). */
        public long writes() {
            return (long) WRITES.getOpaque(this);
        }

        public void recordRead(int n) {
            READS.setOpaque(this, reads + 1);
            BYTES.setOpaque(this, bytes + n);
        }

        public void recordWrite(int n) {
            WRITES.setOpaque(this, writes + 1);
            BYTES.setOpaque(this, bytes + n);
        }

        public void recordAtomic() {
            ATOMICS.setOpaque(this, atomics + 1);
            BYTES.setOpaque(this, bytes + Long.BYTES);
        }

        public void recordTwoSided(int n) {
            TWO_SIDED.setOpaque(this, twoSided + 1);
            BYTES.setOpaque(this, bytes + n);
        }
    }
}
