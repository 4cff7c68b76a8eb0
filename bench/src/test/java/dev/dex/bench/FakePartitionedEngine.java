package dev.dex.bench;

import java.util.BitSet;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.LongAdder;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.engine.PartitionNotHeldException;
import dev.dex.core.partition.PartitionedEngine;
import dev.dex.core.partition.PartitionTable;
import dev.dex.rdma.VerbSnapshot;

/**
 * A partitioned engine over a shared map that, like the real one, refuses keys of partitions it does not
 * hold, and counts the operations it served. Partitions are acquired before worker threads start.
 */
final class FakePartitionedEngine implements PartitionedEngine {
    private final PartitionTable table;
    private final ConcurrentSkipListMap<Long, Long> map;
    private final BitSet held = new BitSet();
    final LongAdder served = new LongAdder();
    /** Operations served before every further one fails, to test failure handling. */
    volatile long failAfter = Long.MAX_VALUE;
    /** Commits, and operations run inside a batch; a batch that touched two partitions or none is counted too. */
    final LongAdder commits = new LongAdder();
    final LongAdder batchedOps = new LongAdder();
    final LongAdder badBatches = new LongAdder();
    /** The largest batch committed. */
    final java.util.concurrent.atomic.AtomicInteger largestBatch = new java.util.concurrent.atomic.AtomicInteger();

    FakePartitionedEngine(PartitionTable table, ConcurrentSkipListMap<Long, Long> map) {
        this.table = table;
        this.map = map;
    }

    @Override
    public PartitionTable partitions() {
        return table;
    }

    @Override
    public synchronized void acquire(int partition) {
        held.set(partition);
    }

    @Override
    public synchronized ReleaseReport release(int partition) {
        held.clear(partition);
        return new ReleaseReport(partition, 0, 0, 0, 0);
    }

    @Override
    public synchronized boolean holds(int partition) {
        return held.get(partition);
    }

    @Override
    public String mode() {
        return "fake";
    }

    @Override
    public IndexSession newSession() {
        return new Session();
    }

    @Override
    public VerbSnapshot verbs() {
        return VerbSnapshot.ZERO;
    }

    @Override
    public double cacheHitRatio() {
        return 0.5;
    }

    @Override
    public void resetStats() {
    }

    @Override
    public void close() {
    }

    private final class Session implements IndexSession {
        private long value;
        private boolean batching;
        private int batchPartition = -1;
        private int batchOps;

        @Override
        public void beginBatch() {
            batching = true;
            batchPartition = -1;
            batchOps = 0;
        }

        @Override
        public void commit() {
            if (batching) {
                commits.increment();
                batchedOps.add(batchOps);
                largestBatch.accumulateAndGet(batchOps, Math::max);
                if (batchOps == 0) {
                    badBatches.increment();
                }
            }
            batching = false;
        }

        private int check(long key) {
            int p = table.partitionOf(key);
            if (!holds(p)) {
                throw new PartitionNotHeldException(p, key);
            }
            if (batching) {
                if (batchPartition >= 0 && batchPartition != p) {
                    badBatches.increment();
                }
                batchPartition = p;
                batchOps++;
            }
            if (served.sum() >= failAfter) {
                throw new IllegalStateException("injected failure");
            }
            served.increment();
            return p;
        }

        @Override
        public boolean lookup(long key) {
            check(key);
            Long v = map.get(key);
            if (v != null) {
                value = v;
            }
            return v != null;
        }

        @Override
        public long value() {
            return value;
        }

        @Override
        public boolean insert(long key, long value) {
            check(key);
            return map.putIfAbsent(key, value) == null;
        }

        @Override
        public boolean update(long key, long value) {
            check(key);
            return map.replace(key, value) != null;
        }

        @Override
        public boolean put(long key, long value) {
            check(key);
            return map.put(key, value) != null;
        }

        @Override
        public boolean delete(long key) {
            check(key);
            return map.remove(key) != null;
        }

        /** Stops at the end of the start key's partition, as an engine holding only that partition would. */
        @Override
        public int scan(long startKey, int count, long[] keys, long[] values) {
            int p = check(startKey);
            int n = 0;
            for (Map.Entry<Long, Long> e : map.subMap(startKey, true, table.upperInclusive(p), true).entrySet()) {
                if (n == count) {
                    break;
                }
                keys[n] = e.getKey();
                values[n] = e.getValue();
                n++;
            }
            return n;
        }

        @Override
        public void close() {
        }
    }
}
