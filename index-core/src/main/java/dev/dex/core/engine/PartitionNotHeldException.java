package dev.dex.core.engine;

/** An operation named a key whose logical partition this compute node does not hold. */
public final class PartitionNotHeldException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int partition;
    private final long key;

    public PartitionNotHeldException(int partition, long key) {
        super("key " + key + " is in partition " + partition + ", which this compute node does not hold");
        this.partition = partition;
        this.key = key;
    }

    /** For a key of any width: {@link #key()} is its first word. */
    public PartitionNotHeldException(int partition, long[] key) {
        super("key " + (key.length == 1 ? Long.toString(key[0]) : "0x" + Long.toHexString(key[0] ^ Long.MIN_VALUE) + "...")
                + " is in partition " + partition + ", which this compute node does not hold");
        this.partition = partition;
        this.key = key[0];
    }

    public int partition() {
        return partition;
    }

    /** The key, or for a wider key its first word. */
    public long key() {
        return key;
    }
}
