package dev.dex.actors.node;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.slf4j.Logger;

import dev.dex.rdma.RemoteMemory;

/**
 * A compute node's view of the memory servers that are out of the cluster, and of those among them that lost every
 * replica (docs/replication.md, "Every replica lost"): a replicated server whose group's primary and backups are all
 * out, or a server of one replica whose memory node was downed or removed (not one that is only unreachable: that may
 * be a pause or a blip, and its verbs fail or wait as they would), over {@code tcp}, where the region lives in the memory
 * node's process (over {@code shm} and {@code local} it outlives the process; {@code disni} has no mark yet). Such a server is marked on the compute node's
 * connection ({@link RemoteMemory#markLost}), so that its verbs fail at once, without a failover wait, with an error
 * that names its replicas, and a partition that cannot be acquired for it answers its batches failed at once instead of
 * letting clients send them again until they time out; the mark goes when one of them is back.
 *
 * <p>Concurrency: used by the ComputeNode actor only.
 */
final class LostServers {
    /** Per memory server, the reason it is marked lost on the connection. */
    private final Map<Integer, String> marked = new HashMap<>();
    /** Per memory server: since when (nanoTime) it has been a reachable member, as health ticks saw it; absent while out. */
    private final Map<Integer, Long> memberSince = new HashMap<>();

    /**
     * Since when (nanoTime) this compute node's own writes (or, replicated over disni, reads without a read lease) have
     * failed to a memory server of {@code servers} that is a member, or 0. Writes to a server count as this node's own
     * failure only from when it was a member again (a memory node that just came back has had no time to take the
     * writes yet); writes to one that is {@code out} of the cluster fail on every compute node alike, and leaving would
     * not help.
     */
    long failingAlone(Set<Integer> servers, List<Integer> out, long now, dev.dex.core.cache.DexEngine engine,
                      dev.dex.rdma.replica.ReplicatedRemoteMemory replicated) {
        long failingAlone = 0;
        for (int server : servers) {
            if (out.contains(server)) {
                memberSince.remove(server);
                continue;
            }
            long back = memberSince.computeIfAbsent(server, s -> now);
            long failing = engine.writesFailingSinceNanos(server);
            long unread = replicated == null ? 0 : replicated.readsFailingSinceNanos(server); // no read lease (disni)
            failing = failing == 0 ? unread : unread == 0 ? failing : Math.min(failing, unread);
            if (failing != 0) {
                long alone = Math.max(failing, back);
                failingAlone = failingAlone == 0 ? alone : Math.min(failingAlone, alone);
            }
        }
        return failingAlone;
    }

    /** Addresses of the memory nodes that are Up (or WeaklyUp) and reachable, as {@code cluster} sees them now. */
    private static Set<Address> reachableMemoryNodes(Cluster cluster) {
        Set<Address> reachable = new HashSet<>();
        for (Member member : cluster.state().getMembers()) {
            if (member.hasRole("memory") && (member.status() == MemberStatus.up() || member.status() == MemberStatus.weaklyUp())) {
                reachable.add(member.address());
            }
        }
        for (Member member : cluster.state().getUnreachable()) {
            reachable.remove(member.address());
        }
        return reachable;
    }

    /**
     * Addresses of the memory nodes that are members of the cluster and not on their way out: in any status but Down,
     * Exiting or Removed, reachable or not.
     */
    static Set<Address> presentMemoryNodes(Cluster cluster) {
        Set<Address> present = new HashSet<>();
        for (Member member : cluster.state().getMembers()) {
            MemberStatus status = member.status();
            if (member.hasRole("memory") && status != MemberStatus.down() && status != MemberStatus.exiting()
                    && status != MemberStatus.removed()) {
                present.add(member.address());
            }
        }
        return present;
    }

    /** The servers (sorted) whose memory node in {@code memory} is not in {@code reachable}. */
    private static List<Integer> out(Map<Integer, ActorRef<MemoryNode.Command>> memory, Set<Address> reachable) {
        List<Integer> out = new ArrayList<>();
        for (Map.Entry<Integer, ActorRef<MemoryNode.Command>> server : memory.entrySet()) {
            if (!reachable.contains(server.getValue().path().address())) {
                out.add(server.getKey());
            }
        }
        out.sort(null);
        return out;
    }

    /** The memory servers out of the cluster (sorted), and why each lost one among them is lost. */
    record Seen(List<Integer> out, List<String> lost) {
    }

    /**
     * Marks on {@code connection} the servers out of the cluster that are lost, and unmarks the others; returns the
     * servers out of the cluster and why each lost one is lost (empty when none is). With {@code replicas} above 1, a server is lost when every replica in
     * {@code groups} is out of {@code reachable}; with one, when its memory node ({@code nodes}: per server, the address
     * of the memory node this compute node uses, and {@code endpoints} its fabric endpoint) is not {@code present}.
     */
    Seen update(Cluster cluster, String transport, int replicas, Map<Integer, ActorRef<MemoryNode.Command>> memory,
                Map<Integer, String> endpoints, ReplicaGroups groups, RemoteMemory connection, Logger log) {
        Set<Address> reachable = reachableMemoryNodes(cluster);
        List<Integer> out = out(memory, reachable);
        if (!transport.equals("tcp") && replicas <= 1) {
            return new Seen(out, List.of());
        }
        Map<Integer, Address> nodes = new HashMap<>();
        memory.forEach((server, node) -> nodes.put(server, node.path().address()));
        return new Seen(out, update(replicas, out, nodes, endpoints, groups, reachable, presentMemoryNodes(cluster), connection,
                log));
    }

    /**
     * {@link #update(Cluster, String, int, Map, Map, ReplicaGroups, RemoteMemory, Logger)} with the cluster's state
     * given, over {@code tcp} or with replica groups.
     */
    List<String> update(int replicas, List<Integer> out, Map<Integer, Address> nodes, Map<Integer, String> endpoints,
                        ReplicaGroups groups, Set<Address> reachable, Set<Address> present, RemoteMemory connection, Logger log) {
        List<String> lost = new ArrayList<>();
        for (int server : nodes.keySet()) {
            String why = !out.contains(server) ? null
                    : replicas > 1 ? whyLost(server, groups.group(server), reachable)
                    : whyGone(server, nodes.get(server), endpoints.get(server), present);
            if (why != null) {
                lost.add(why);
            }
            if (why != null || marked.containsKey(server)) {
                connection.markLost(server, why); // again each time: a relocation to a new endpoint clears it
            }
            if (!Objects.equals(why, marked.get(server))) {
                if (why == null) {
                    marked.remove(server);
                    log.info("memory server {} has a replica in the cluster again", server);
                } else {
                    marked.put(server, why);
                    log.error("{}", why);
                }
            }
        }
        return lost;
    }

    /** Why the memory server of one replica whose memory node is {@code node} is lost, or null while it is present. */
    static String whyGone(int server, Address node, String endpoint, Set<Address> present) {
        if (present.contains(node)) {
            return null; // unreachable, perhaps only for a moment: not given up for lost
        }
        return "memory server " + server + " is lost: its only replica " + node + " (" + endpoint + ") was downed or left the"
                + " cluster; operations on its keys fail until it is back with its region";
    }

    private static String whyLost(int server, ReplicaGroups.Group group, Set<Address> reachable) {
        if (group == null) {
            return null;
        }
        List<ReplicaGroups.Replica> replicas = new ArrayList<>();
        replicas.add(group.primary());
        replicas.addAll(group.backups());
        List<String> named = new ArrayList<>();
        for (ReplicaGroups.Replica replica : replicas) {
            if (reachable.contains(replica.node().path().address())) {
                return null; // a replica is there: a failover, not a loss
            }
            named.add(replica.node().path().address() + " (" + replica.endpoint() + ")");
        }
        return "memory server " + server + " is lost: every replica of its group in view " + group.view() + " is out of the"
                + " cluster (" + String.join(", ", named) + "); operations on its keys fail until one of them is back";
    }
}
