package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.pekko.actor.Address;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

import dev.dex.rdma.ForwardingRemoteMemory;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * {@link LostServers} with one replica per memory server: a server whose memory node was downed or removed is marked
 * lost on the connection (its verbs then fail at once, and a partition that cannot be acquired for it fails its batches
 * at once); one that is only unreachable is not; the mark goes when its node is present again, and is set again after a
 * relocation cleared it on the connection.
 */
class LostServersTest {
    private static final Address NODE_0 = new Address("pekko", "dex", "10.0.0.5", 7355);
    private static final Address NODE_1 = new Address("pekko", "dex", "10.0.0.6", 7355);
    private static final Address NODE_1_AGAIN = new Address("pekko", "dex", "10.0.0.7", 7355);

    private final LocalFabric fabric = new LocalFabric();
    private final Recording connection;
    private final LostServers lostServers = new LostServers();
    private final Map<Integer, String> endpoints = Map.of(0, "10.0.0.5:41011", 1, "10.0.0.6:38861");

    LostServersTest() {
        fabric.export(0, 1 << 20, 1 << 16);
        fabric.export(1, 1 << 20, 1 << 16);
        connection = new Recording(fabric.connect(0, 1));
    }

    @AfterEach
    void close() {
        connection.close();
        fabric.close();
    }

    private List<String> update(Map<Integer, Address> nodes, List<Integer> out, Set<Address> reachable, Set<Address> present) {
        return lostServers.update(1, out, nodes, endpoints, ReplicaGroups.EMPTY, reachable, present, connection,
                LoggerFactory.getLogger(LostServersTest.class));
    }

    @Test
    void anUnreachableMemoryNodeIsNotLostButADownedOneIs() {
        Map<Integer, Address> nodes = Map.of(0, NODE_0, 1, NODE_1);
        // Unreachable but still a member (a pause, a blip): out, not lost.
        assertEquals(List.of(), update(nodes, List.of(1), Set.of(NODE_0), Set.of(NODE_0, NODE_1)));
        assertEquals(List.of(), connection.marks);

        // Downed or removed: lost, with a reason that names the server, its node and its endpoint.
        List<String> lost = update(nodes, List.of(1), Set.of(NODE_0), Set.of(NODE_0));
        assertEquals(1, lost.size());
        assertEquals("memory server 1 is lost: its only replica " + NODE_1 + " (10.0.0.6:38861) was downed or left the"
                + " cluster; operations on its keys fail until it is back with its region", lost.get(0));
        assertEquals(List.of("1=" + lost.get(0)), connection.marks);
    }

    @Test
    void theMarkGoesWhenTheNodeIsBackAndIsSetAgainAfterARelocationClearedIt() {
        Map<Integer, Address> nodes = new HashMap<>(Map.of(0, NODE_0, 1, NODE_1));
        String why = update(nodes, List.of(1), Set.of(NODE_0), Set.of(NODE_0)).get(0);
        // Still gone at the next tick: the mark is set again (a relocation to another endpoint clears it on the link).
        assertEquals(List.of(why), update(nodes, List.of(1), Set.of(NODE_0), Set.of(NODE_0)));
        assertEquals(List.of("1=" + why, "1=" + why), connection.marks);

        // A restarted memory node of server 1 described itself: it is present, and the mark goes, once.
        nodes.put(1, NODE_1_AGAIN);
        assertEquals(List.of(), update(nodes, List.of(), Set.of(NODE_0, NODE_1_AGAIN), Set.of(NODE_0, NODE_1_AGAIN)));
        assertEquals("1=null", connection.marks.get(2));
        assertEquals(List.of(), update(nodes, List.of(), Set.of(NODE_0, NODE_1_AGAIN), Set.of(NODE_0, NODE_1_AGAIN)));
        assertEquals(3, connection.marks.size(), "nothing to unmark again: " + connection.marks);
    }

    @Test
    void aServerThatIsNotOutIsNeverLost() {
        // Present in the reachable set although a membership event has not reached the present set yet.
        assertEquals(List.of(), update(Map.of(0, NODE_0, 1, NODE_1), List.of(), Set.of(NODE_0, NODE_1), Set.of()));
        assertEquals(List.of(), connection.marks);
        assertNull(LostServers.whyGone(1, NODE_1, "10.0.0.6:38861", Set.of(NODE_1)));
    }

    /** Records every {@link RemoteMemory#markLost} as "server=why". */
    private static final class Recording extends ForwardingRemoteMemory {
        final List<String> marks = new ArrayList<>();

        Recording(RemoteMemory delegate) {
            super(delegate);
        }

        @Override
        public void markLost(int serverId, String why) {
            marks.add(serverId + "=" + why);
            super.markLost(serverId, why);
        }
    }
}
