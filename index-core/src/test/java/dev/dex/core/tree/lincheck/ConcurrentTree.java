package dev.dex.core.tree.lincheck;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.agrona.concurrent.UnsafeBuffer;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.Validate;

import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.tree.BaselineTree;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * Lincheck's view of the tree: a fresh pool of two memory servers per invocation, bulk loaded with
 * full nodes after a {@link KeyLayout}, and two {@link BaselineTree} instances opened over two separate
 * clients, as two compute nodes would. Each Lincheck thread gets its own session, alternately from the
 * two instances. Lincheck has no per-invocation teardown, so each pool (about 0.5 MiB off-heap) is left
 * to the garbage collector.
 *
 * <pre>
 * Concurrency: sessions are created on a thread's first operation (computeIfAbsent); everything else a
 * thread touches is its own session. The in-flight and started counters only classify operations as
 * overlapping others, for the statistics; they order nothing.
 * </pre>
 */
@Param(name = "key", gen = IntGen.class, conf = "1:" + KeyLayout.TEST_KEYS)
@Param(name = "value", gen = IntGen.class, conf = "1:" + KeyLayout.MAX_TEST_VALUE)
public abstract class ConcurrentTree {
    private static final int SERVERS = 2;
    private static final int INSTANCES = 2;
    private static final long REGION_LENGTH = 256 << 10;
    private static final int CHUNK_LENGTH = 16 << 10;
    /** M = 0: leaves stay with the sibling they split from, inner nodes go round robin over both servers. */
    private static final TreeSettings CONFIG = new TreeSettings(0, 1.0);

    private final KeyLayout layout;
    private final RunStatistics statistics;
    private final RemoteMemory observer;
    private final BaselineTree[] trees = new BaselineTree[INSTANCES];
    private final Map<Thread, BaselineTree.Session> sessions = new ConcurrentHashMap<>();
    private final AtomicInteger nextTree = new AtomicInteger();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicLong started = new AtomicLong();

    ConcurrentTree(KeyLayout layout, RunStatistics statistics) {
        this.layout = layout;
        this.statistics = statistics;
        LocalFabric fabric = new LocalFabric();
        int[] servers = new int[SERVERS];
        for (int i = 0; i < SERVERS; i++) {
            servers[i] = i;
            fabric.export(i, REGION_LENGTH, CHUNK_LENGTH);
        }
        observer = fabric.connect(servers);
        BulkLoader.Result loaded = BulkLoader.formatAndLoad(observer, CONFIG, layout.entries(), n -> { });
        if (loaded.height() != layout.height() || loaded.leaves() != layout.nodesPerLevel()[0]) {
            throw new IllegalStateException("bulk load built " + loaded + ", the layout expects "
                    + Arrays.toString(layout.nodesPerLevel()) + " nodes per level");
        }
        for (int i = 0; i < INSTANCES; i++) {
            trees[i] = BaselineTree.open(fabric.connect(servers));
        }
    }

    @Operation
    public Long lookup(@Param(name = "key") int key) {
        return run(false, () -> {
            BaselineTree.Session session = session();
            return session.lookup(layout.key(key)) ? session.value() : null;
        });
    }

    @Operation
    public boolean insert(@Param(name = "key") int key, @Param(name = "value") int value) {
        return run(true, () -> session().insert(layout.key(key), value));
    }

    @Operation
    public boolean update(@Param(name = "key") int key, @Param(name = "value") int value) {
        return run(false, () -> session().update(layout.key(key), value));
    }

    @Operation
    public boolean put(@Param(name = "key") int key, @Param(name = "value") int value) {
        return run(true, () -> session().put(layout.key(key), value));
    }

    @Operation
    public boolean delete(@Param(name = "key") int key) {
        return run(false, () -> session().delete(layout.key(key)));
    }

    @Operation
    public String scan(@Param(name = "key") int key) {
        return run(false, () -> {
            long[] keys = new long[KeyLayout.SCAN_LENGTH];
            long[] values = new long[KeyLayout.SCAN_LENGTH];
            int n = session().scan(layout.key(key), KeyLayout.SCAN_LENGTH, keys, values);
            return layout.describe(keys, values, n);
        });
    }

    /**
     * After each invocation: the structure is valid, every background entry is intact, and no key or
     * value appears that no operation could have written.
     */
    @Validate
    public void validateTree() {
        long[] background = new long[1];
        TreeValidator.Report report = TreeValidator.validate(observer, (key, value) -> {
            int testKey = layout.testKeyOf(key);
            if (testKey != 0) {
                if ((value < 1 || value > KeyLayout.MAX_TEST_VALUE) && value != KeyLayout.initialValue(testKey)) {
                    throw new IllegalStateException("test key " + testKey + " holds " + value + ", which nobody wrote");
                }
            } else if (layout.isBackground(key) && value == KeyLayout.backgroundValue(key)) {
                background[0]++;
            } else {
                throw new IllegalStateException("entry " + key + "=" + value + " was never written");
            }
        });
        if (background[0] != layout.backgroundCount()) {
            throw new IllegalStateException(background[0] + " of " + layout.backgroundCount() + " background entries are left");
        }
        statistics.recordValidated(report, layout);
    }

    private BaselineTree.Session session() {
        return sessions.computeIfAbsent(Thread.currentThread(),
                thread -> trees[Math.floorMod(nextTree.getAndIncrement(), INSTANCES)].newSession());
    }

    /**
     * Runs one operation. For one that may split, records whether the root or a child of the root split
     * during it while another operation was in flight (the root pointer or an inner root's version moved).
     */
    private <T> T run(boolean maySplit, Supplier<T> operation) {
        long startedBefore = started.getAndIncrement();
        boolean overlapped = inFlight.getAndIncrement() > 0;
        RootStamp before = maySplit ? rootStamp() : null;
        try {
            return operation.get();
        } finally {
            if (maySplit) {
                RootStamp after = rootStamp();
                overlapped |= started.get() != startedBefore + 1;
                if (overlapped && !after.equals(before)) {
                    statistics.recordSplitWhileOverlapping();
                }
            }
            inFlight.decrementAndGet();
        }
    }

    /**
     * Where the root is and, for an inner root, its version: inner nodes are written only by splits of
     * themselves or of their children. A read torn by a concurrent split only makes that split show.
     */
    private RootStamp rootStamp() {
        long root = Superblock.read(observer).root();
        NodeView rootImage = new NodeView().wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        observer.read(root, rootImage.buffer(), 0, NodeHeaderDescriptor.NODE_LENGTH);
        return new RootStamp(root, rootImage.isLeaf() ? 0 : rootImage.version());
    }

    private record RootStamp(long address, long innerVersion) {
    }
}
