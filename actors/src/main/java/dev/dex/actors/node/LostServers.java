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
 * out. Such a server is marked on the compute node's connection ({@link RemoteMemory#markLost}), so that its verbs fail
 * at once, without a failover wait, with an error that names its replicas; the mark goes when one of them is back.
 *
 * <p>Concurrency: used by the ComputeNode actor only.
 */
final class LostServers {
    /** Per memory server, the reason it is marked lost on the connection. */
    private final Map<Integer, String> marked = new HashMap<>();

    /** Addresses of the memory nodes that are Up (or WeaklyUp) and reachable, as {@code cluster} sees them now. */
    static Set<Address> reachableMemoryNodes(Cluster cluster) {
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

    /** The servers (sorted) whose memory node in {@code memory} is not in {@code reachable}. */
    static List<Integer> out(Map<Integer, ActorRef<MemoryNode.Command>> memory, Set<Address> reachable) {
        List<Integer> out = new ArrayList<>();
        for (Map.Entry<Integer, ActorRef<MemoryNode.Command>> server : memory.entrySet()) {
            if (!reachable.contains(server.getValue().path().address())) {
                out.add(server.getKey());
            }
        }
        out.sort(null);
        return out;
    }

    /**
     * Marks on {@code connection} the servers of {@code out} whose every replica in {@code groups} is out of the cluster,
     * and unmarks the others; returns why each lost server is lost (empty when none is).
     */
    List<String> update(List<Integer> out, Iterable<Integer> servers, ReplicaGroups groups, Set<Address> reachable,
                        RemoteMemory connection, Logger log) {
        List<String> lost = new ArrayList<>();
        for (int server : servers) {
            String why = out.contains(server) ? whyLost(server, groups.group(server), reachable) : null;
            if (why != null) {
                lost.add(why);
            }
            if (!Objects.equals(why, marked.get(server))) {
                connection.markLost(server, why);
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
