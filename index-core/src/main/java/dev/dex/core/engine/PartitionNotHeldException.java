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

    public int partition() {
        return partition;
    }

    public long key() {
        return key;
    }
}
