package dev.dex.core.node;

/**
 * The index's point operations: one set of codes for every layer that runs them, and what each does to the leaf
 * that holds its key. The DEX engine ({@code DexSession}), the baseline tree ({@code BaselineTree}) and the memory
 * side's executor of offloaded operations ({@code SubtreeExecutor}) all decide and apply a write here, so an
 * operation means the same wherever it runs; the offload wire formats and the client's batch format carry these
 * codes ({@code OffloadRequest}, {@code Ops}, which adds a scan).
 *
 * <p>Stateless; thread-safe. {@link #apply} changes only the node view it is given.
 */
public final class LeafOps {
    /** Look the key up. */
    public static final int LOOKUP = 0;
    /** Add the key if absent; a present key keeps its value. */
    public static final int INSERT = 1;
    /** Replace the value of a present key; an absent key stays absent. */
    public static final int UPDATE = 2;
    /** Insert or replace. */
    public static final int PUT = 3;
    /** Remove the key if present. */
    public static final int DELETE = 4;

    private LeafOps() {
    }

    /** Whether {@code op} is one of the codes above. */
    public static boolean isValid(int op) {
        return op >= LOOKUP && op <= DELETE;
    }

    /** Whether {@code op} may add a key, so that a full leaf must be split before it runs. */
    public static boolean mayAdd(int op) {
        return op == INSERT || op == PUT;
    }

    /** Whether {@code op} changes a leaf in which its key is {@code present} (or absent). */
    public static boolean changes(int op, boolean present) {
        return switch (op) {
            case INSERT -> !present;
            case UPDATE, DELETE -> present;
            case PUT -> true;
            default -> false;
        };
    }

    /**
     * What the operation answers, given whether its key was {@code present} before it ran: an insert whether it
     * added the key; a lookup, an update, a put and a delete whether the key was there (for a put: whether it
     * replaced a value rather than added the key).
     */
    public static boolean result(int op, boolean present) {
        return op == INSERT ? !present : present;
    }

    /**
     * Applies the write {@code op} of {@code key} (its words) and {@code value} to {@code leaf}, in which
     * {@code leaf.search(key)} returned {@code pos}; only for an operation that {@link #changes} it, and an insert
     * only into a leaf that is not full.
     */
    public static void apply(NodeView leaf, int pos, int op, long[] key, long value) {
        if (op == DELETE) {
            leaf.removeEntry(pos);
        } else if (pos >= 0) {
            leaf.value(pos, value);
        } else {
            leaf.insertEntry(-pos - 1, key, value);
        }
    }

    /**
     * Copies a scan's entries out of a leaf: from its first key at or above {@code from}, the entries with keys
     * at most {@code stop}, into {@code keys} (entry {@code i}'s words at {@code [i * words, (i + 1) * words)}) and
     * {@code values} from entry {@code n} until entry {@code count}. An image read without a lock may be torn: at
     * most the leaf's capacity of entries is read, and the caller validates the image before it uses what was copied.
     *
     * @return the index after the last entry copied
     */
    public static int copyRange(NodeView leaf, long[] from, long[] stop, long[] keys, long[] values, int n, int count) {
        int words = leaf.format().words();
        int pos = leaf.search(from);
        if (pos < 0) {
            pos = -pos - 1;
        }
        int m = n;
        for (int c = Math.min(leaf.count(), leaf.format().leafCapacity()); pos < c && m < count; pos++, m++) {
            if (leaf.compareKey(stop, pos) < 0) {
                break;
            }
            leaf.key(pos, keys, m * words);
            values[m] = leaf.value(pos);
        }
        return m;
    }

    /** The operation's name, for messages. */
    public static String name(int op) {
        return switch (op) {
            case LOOKUP -> "lookup";
            case INSERT -> "insert";
            case UPDATE -> "update";
            case PUT -> "put";
            case DELETE -> "delete";
            default -> "operation " + op;
        };
    }
}
