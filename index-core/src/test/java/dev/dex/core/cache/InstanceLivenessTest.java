package dev.dex.core.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.dex.core.engine.IndexSession;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.NodeHeaderDescriptor;
import dev.dex.core.node.NodeView;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.RemoteNodes;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.testing.TestResources;

/**
 * Whether the holder of a remote lock is alive, answered from the cluster's membership for any holder, also one that
 * died before the node asking was started (issue 26, item 6): an engine instance registers which member runs it
 * ({@link DexEngine#registerInstance}), and a fresh engine told which members are alive takes over the locks of the
 * others' instances, and only of those.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class InstanceLivenessTest {
    private static final long LOADED = 4_000;
    private static final long DEAD_MEMBER = 0xDEADL;
    private static final long LIVE_MEMBER = 0x11FEL;

    @AutoClose
    private final TestResources resources = new TestResources();
    private final LocalFabric fabric = resources.closeAfter(new LocalFabric());
    private final RemoteMemory admin;
    private final PartitionTable table;
    /** The members the cluster has now. */
    private final Set<Long> members = ConcurrentHashMap.newKeySet();

    InstanceLivenessTest() {
        resources.closeAfter(fabric.export(0, 64L << 20, 4096));
        admin = resources.closeAfter(fabric.connect(0));
        SharedLeaves.loadEvenKeys(admin, (int) LOADED);
        // Equal-width bounds: the leaves that straddle a bound are shared, written under their remote lock.
        table = PartitionTable.equalWidth(8, 0, 2 * LOADED + 2);
        PartitionTable.store(admin, table);
        members.add(LIVE_MEMBER);
    }

    private DexEngine engine() {
        return DexEngine.open(resources.closeAfter(fabric.connect(0)), new DexEngineSettings("no-offload", 0,
                DexEngineSettings.DEFAULT_COOLING_RATIO, 1.0), null, RedoLogSettings.ON);
    }

    private long[] sharedLeaf() {
        return SharedLeaves.find(admin, table);
    }

    /** Engine {@code dead}'s session holds the lock of the leaf at {@code address}, as when its node died mid-write. */
    private void lockAs(DexEngine dead, long address) {
        RemoteNodes holder = new RemoteNodes(admin, (dead.instanceId() << DexEngine.SESSION_BITS) | 7);
        NodeView node = new NodeView(KeyFormat.EIGHT).wrap(new UnsafeBuffer(new byte[NodeHeaderDescriptor.NODE_LENGTH]), 0);
        assertTrue(holder.readValidated(address, node));
        assertEquals(RemoteNodes.LOCKED, holder.lock(address, node.version()));
    }

    @Test
    void aLockOfAnInstanceWhoseMemberLeftIsTakenOverByANodeThatNeverSawIt() throws Exception {
        long[] leaf = sharedLeaf();
        DexEngine dead = engine();
        dead.registerInstance(DEAD_MEMBER);
        lockAs(dead, leaf[1]);
        // The member is gone (it was never a member of this cluster incarnation). A fresh engine, which never saw the
        // dead instance in any listing, serves the key.
        DexEngine fresh = engine();
        fresh.registerInstance(LIVE_MEMBER);
        fresh.instanceLiveness(members::contains);
        fresh.acquire(table.partitionOf(leaf[0]));
        try (IndexSession session = fresh.newSession()) {
            CompletableFuture<Boolean> write = CompletableFuture.supplyAsync(() -> session.put(leaf[0], 4242));
            assertTrue(write.get(10, TimeUnit.SECONDS), "the key existed: its value replaced");
            assertTrue(session.lookup(leaf[0]));
            assertEquals(4242, session.value());
        }
        assertEquals(0, TreeValidator.lockedNodes(admin), "the dead holder's lock was taken over and released");
    }

    @Test
    void aLockOfALiveMemberOrOfAnUnknownInstanceIsNotTakenOver() throws Exception {
        long[] leaf = sharedLeaf();
        DexEngine live = engine();
        live.registerInstance(LIVE_MEMBER);
        lockAs(live, leaf[1]);
        DexEngine fresh = engine();
        fresh.instanceLiveness(members::contains);
        fresh.acquire(table.partitionOf(leaf[0]));
        try (IndexSession session = fresh.newSession()) {
            CompletableFuture<Boolean> write = CompletableFuture.supplyAsync(() -> session.put(leaf[0], 1));
            Thread.sleep(300);
            assertFalse(write.isDone(), "the holder's member is in the cluster: its lock is waited for");
            members.remove(LIVE_MEMBER); // its member leaves the cluster
            assertTrue(write.get(10, TimeUnit.SECONDS), "the key existed");
        }
        // An instance that never registered (an engine of an older build): not known to be dead, never taken over.
        DexEngine unregistered = engine();
        lockAs(unregistered, leaf[1]);
        try (IndexSession session = fresh.newSession()) {
            CompletableFuture<Boolean> write = CompletableFuture.supplyAsync(() -> session.put(leaf[0], 2));
            Thread.sleep(300);
            assertFalse(write.isDone(), "an unknown holder may be alive");
            new RemoteNodes(admin, (unregistered.instanceId() << DexEngine.SESSION_BITS) | 7).unlock(leaf[1]);
            assertTrue(write.get(10, TimeUnit.SECONDS), "the key existed");
        }
    }
}
