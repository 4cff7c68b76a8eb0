package dev.dex.bench;

import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * What the engine acknowledged for each key of a run with injected faults: the values a later read may find. A
 * key starts as bulk load left it (a loaded key holds key + 1, any other key is absent). An acknowledged write sets
 * what the key holds exactly; a write that threw may or may not have taken effect, so it adds its value to what
 * the key may hold, and only a later acknowledged write makes the key exact again.
 *
 * <pre>
 * Concurrency: a worker holds the key's stripe monitor ({@link #stripe}) from before its write is sent until the
 * model has recorded the write's result, so the model takes a key's writes in the order the engine applied them,
 * also when several threads write the same hot key. The map is concurrent only for its structure; each key's entry
 * is immutable and replaced under the key's stripe. The end-of-run check reads the map after the workers ended.
 * </pre>
 */
final class KeyModel {
    /** Stripes of key monitors: enough that two threads rarely share one by chance, even when they write hot keys. */
    static final int STRIPES = 4096;

    /**
     * The values a key may hold, and whether it may be absent. Immutable.
     *
     * @param values the values it may hold, none twice
     * @param absent whether it may be absent
     */
    record Allowed(long[] values, boolean absent) {
        static final Allowed ABSENT = new Allowed(new long[0], true);

        static Allowed exactly(long value) {
            return new Allowed(new long[] {value}, false);
        }

        boolean allows(long value) {
            for (long v : values) {
                if (v == value) {
                    return true;
                }
            }
            return false;
        }

        /** This, and also {@code value}. */
        Allowed orAlso(long value) {
            if (allows(value)) {
                return this;
            }
            long[] more = Arrays.copyOf(values, values.length + 1);
            more[values.length] = value;
            return new Allowed(more, absent);
        }

        @Override
        public String toString() {
            return (values.length == 0 ? "" : Arrays.toString(values)) + (absent ? (values.length == 0 ? "absent" : " or absent") : "");
        }
    }

    private final KeySpace keySpace;
    private final Object[] stripes = new Object[STRIPES];
    private final ConcurrentHashMap<Long, Allowed> written = new ConcurrentHashMap<>();
    private final LongAdder wrongAnswers = new LongAdder();

    KeyModel(KeySpace keySpace) {
        this.keySpace = keySpace;
        for (int i = 0; i < STRIPES; i++) {
            stripes[i] = new Object();
        }
    }

    /** The monitor that guards {@code key}'s writes and their records here. */
    Object stripe(long key) {
        long h = key * 0x9E37_79B9_7F4A_7C15L; // loaded keys differ only above bit 20: spread them over the stripes
        return stripes[(int) (h >>> 52) & (STRIPES - 1)];
    }

    /** What {@code key} may hold now. */
    Allowed allowed(long key) {
        Allowed a = written.get(key);
        if (a != null) {
            return a;
        }
        return keySpace.isLoaded(key) ? Allowed.exactly(key + 1) : Allowed.ABSENT;
    }

    /**
     * Records a write the engine acknowledged with {@code outcome}. Call holding the key's stripe.
     *
     * @param value the value the write sent
     */
    void acknowledged(Op op, long key, Outcome outcome, long value) {
        Allowed now = allowed(key);
        boolean possible = switch (outcome) {
            case FOUND, ALREADY_PRESENT -> now.values().length > 0;
            case NOT_FOUND, INSERTED -> now.absent();
            case FAILED -> true;
        };
        if (!possible) {
            wrongAnswers.increment();
        }
        Allowed next = switch (outcome) {
            case FOUND, INSERTED -> Allowed.exactly(value);
            // An update that found nothing: absent, if that was possible; if not, the key was lost, which the end check reports.
            case NOT_FOUND -> now.absent() ? Allowed.ABSENT : now;
            // An insert that found the key: present, with one of its values, if one was possible.
            case ALREADY_PRESENT -> now.values().length > 0 ? new Allowed(now.values(), false) : now;
            case FAILED -> throw new IllegalArgumentException("a failed " + op + " is not acknowledged");
        };
        if (next != now) {
            written.put(key, next);
        }
    }

    /** Records a write of {@code value} that threw: it may or may not have taken effect. Call holding the key's stripe. */
    void failed(long key, long value) {
        Allowed now = allowed(key);
        Allowed next = now.orAlso(value);
        if (next != now) {
            written.put(key, next);
        }
    }

    /**
     * Acknowledged writes whose answer the model rules out: found or already present for a key that cannot be there,
     * not found or inserted for one that must be (the workloads never delete, so such a key was lost).
     */
    long wrongAnswers() {
        return wrongAnswers.sum();
    }

    /** The keys written during the run, in no order; read after the workers ended. */
    long[] writtenKeys() {
        return written.keySet().stream().mapToLong(Long::longValue).toArray();
    }
}
