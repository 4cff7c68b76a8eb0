package dev.dex.bench;

import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;

import dev.dex.core.engine.IndexEngine;
import dev.dex.core.engine.IndexSession;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.rdma.VerbSnapshot;

/**
 * A {@link ConcurrentSkipListMap} behind the engine interfaces: the in-JVM reference point, with no fabric,
 * no verbs and no cache. Several instances may share one map (one per compute node of the run).
 */
final class SkipListEngine implements IndexEngine {
    private final ConcurrentSkipListMap<Long, Long> map;

    SkipListEngine(ConcurrentSkipListMap<Long, Long> map) {
        this.map = map;
    }

    @Override
    public String mode() {
        return Mode.SKIPLIST.cliName();
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
        return Double.NaN;
    }

    @Override
    public void resetStats() {
    }

    @Override
    public void close() {
    }

    private final class Session implements IndexSession {
        private long value;

        @Override
        public boolean lookup(long key) {
            Long found = map.get(NodeHeaderDescriptor.checkKey(key));
            if (found == null) {
                return false;
            }
            value = found;
            return true;
        }

        @Override
        public long value() {
            return value;
        }

        @Override
        public boolean insert(long key, long value) {
            return map.putIfAbsent(NodeHeaderDescriptor.checkKey(key), value) == null;
        }

        @Override
        public boolean update(long key, long value) {
            return map.replace(NodeHeaderDescriptor.checkKey(key), value) != null;
        }

        @Override
        public boolean put(long key, long value) {
            return map.put(NodeHeaderDescriptor.checkKey(key), value) != null;
        }

        @Override
        public boolean delete(long key) {
            return map.remove(NodeHeaderDescriptor.checkKey(key)) != null;
        }

        @Override
        public int scan(long startKey, int count, long[] keys, long[] values) {
            if (count < 0 || keys.length < count || values.length < count) {
                throw new IllegalArgumentException("scan of " + count + " entries needs arrays of at least that length");
            }
            int n = 0;
            for (Map.Entry<Long, Long> entry : map.tailMap(startKey, true).entrySet()) {
                if (n == count) {
                    break;
                }
                keys[n] = entry.getKey();
                values[n] = entry.getValue();
                n++;
            }
            return n;
        }

        @Override
        public void close() {
        }
    }
}
