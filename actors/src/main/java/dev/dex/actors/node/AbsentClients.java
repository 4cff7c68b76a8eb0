package dev.dex.actors.node;

import java.time.Duration;
import java.util.HashSet;
import java.util.Set;

import org.apache.pekko.cluster.Member;
import org.slf4j.Logger;

import dev.dex.rdma.Fabric;

/**
 * The fabric clients a memory node fences when it comes (back) into the cluster: those connected to its region whose
 * member is not in the cluster. A compute node the cluster downed while this memory node was away (restarting, or downed
 * itself and rejoining) was never fenced here, though its connections may still be open. A member's identity is its
 * unique id, new with every start, so a client without a member is one the cluster removed, or one whose joining
 * this node has not heard of yet.
 *
 * <p>The second kind is why a client is looked at twice, {@link #GRACE} apart, and fenced only when it is without a
 * member both times. A compute node that joins while this node comes up learns the region's address from the replica
 * coordinator or the receptionist, and may connect before the gossip that names it reaches this node; and the view
 * {@code Cluster.state()} gives lags the events this node is told of. Fencing such a node would leave a live member
 * refused for good. The cost is that a removed node's open connection stays {@code GRACE} longer: it was open for the
 * whole of this node's absence already, and the downing it missed happened before this node came back.
 *
 * <p>Not concurrent: called from the memory node's actor only.
 */
final class AbsentClients {
    /** Several gossip rounds (one a second by default): long enough for a joining member to reach this node's view. */
    static final Duration GRACE = Duration.ofSeconds(3);

    private AbsentClients() {
    }

    /** The clients of {@code serverId} connected now whose member is not among {@code members}. */
    static Set<Long> withoutMember(Fabric fabric, int serverId, Iterable<Member> members) {
        Set<Long> present = new HashSet<>();
        for (Member member : members) {
            present.add(Fabrics.clientId(member.uniqueAddress()));
        }
        Set<Long> absent = new HashSet<>();
        for (long client : fabric.connectedClients(serverId)) {
            if (!present.contains(client)) {
                absent.add(client);
            }
        }
        return absent;
    }

    /** Fences each of {@code clients} (still without a member, {@link #GRACE} after they were first seen so). */
    static void fence(Fabric fabric, int serverId, Set<Long> clients, Logger log) {
        for (long client : clients) {
            try {
                if (fabric.fence(serverId, client)) {
                    log.info("client {} is connected but its member left the cluster while this memory node was away:"
                            + " it is fenced", Long.toHexString(client));
                }
            } catch (RuntimeException failed) {
                log.error("client {} (its member gone) could not be fenced: {}", Long.toHexString(client), failed.toString());
            }
        }
    }
}
