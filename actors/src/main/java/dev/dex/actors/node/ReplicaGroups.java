package dev.dex.actors.node;

import java.util.ArrayList;
import java.util.List;

import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.cluster.ddata.Key;
import org.apache.pekko.cluster.ddata.LWWRegister;
import org.apache.pekko.cluster.ddata.LWWRegisterKey;
import org.apache.pekko.cluster.ddata.typed.javadsl.DistributedData;
import org.apache.pekko.cluster.ddata.typed.javadsl.Replicator;

import dev.dex.actors.CborSerializable;

/**
 * The replica groups' map (docs/replication.md): per memory server, its view, primary and backups. Immutable; the
 * {@link ReplicaCoordinator} stores each new version in Distributed Data under {@link #KEY}, and compute nodes follow it.
 *
 * @param generation one more with every change the coordinator stores: the register's clock, so that a later
 *                   coordinator's map wins over an earlier one's whatever the hosts' clocks say
 */
public record ReplicaGroups(long generation, List<Group> groups) implements CborSerializable {

    public static final Key<LWWRegister<ReplicaGroups>> KEY = LWWRegisterKey.create("dex-replica-groups");
    public static final ReplicaGroups EMPTY = new ReplicaGroups(0, List.of());
    /** Orders versions of the map by generation, not by wall clock. */
    public static final LWWRegister.Clock<ReplicaGroups> CLOCK = (current, value) -> Math.max(current + 1, value.generation());

    public ReplicaGroups {
        groups = groups == null ? List.of() : List.copyOf(groups);
    }

    /**
     * One memory server's group.
     *
     * @param view    grows with every change of the group
     * @param backups the replicas that apply the primary's stream in this view
     */
    public record Group(int serverId, long view, Replica primary, List<Replica> backups) implements CborSerializable {
        public Group {
            backups = backups == null ? List.of() : List.copyOf(backups);
        }
    }

    /**
     * A memory node in a group: its actor, its region's fabric endpoint, and its region's identity (the same when the node
     * restarts on its kept region: how the coordinator knows a restarted node as a member; 0: unknown).
     */
    public record Replica(ActorRef<MemoryNode.Command> node, String endpoint, long regionId) implements CborSerializable {
        public Replica(ActorRef<MemoryNode.Command> node, String endpoint) {
            this(node, endpoint, 0);
        }

        static Replica of(MemoryNode.Description description) {
            return new Replica(description.node(), description.endpoint(), description.replica().regionId());
        }

        @Override
        public String toString() {
            return node.path().address() + " (" + endpoint + ")";
        }
    }

    /** Tells {@code context}'s actor every new version of the map, as {@code adapt} makes it a message. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static <T> void subscribe(org.apache.pekko.actor.typed.javadsl.ActorContext<T> context,
                              java.util.function.Function<ReplicaGroups, T> adapt) {
        ActorRef<Replicator.SubscribeResponse<LWWRegister<ReplicaGroups>>> changes = (ActorRef) context.messageAdapter(
                Replicator.SubscribeResponse.class, changed -> adapt.apply(changed instanceof Replicator.Changed<?> c
                        ? (ReplicaGroups) ((LWWRegister<?>) c.dataValue()).getValue() : EMPTY));
        DistributedData.get(context.getSystem()).replicator().tell(new Replicator.Subscribe<>(KEY, changes));
    }

    /** Server {@code serverId}'s group, or null. */
    public Group group(int serverId) {
        for (Group group : groups) {
            if (group.serverId() == serverId) {
                return group;
            }
        }
        return null;
    }

    /** This map with {@code group} in place of its server's, one generation on. */
    public ReplicaGroups with(Group group) {
        List<Group> next = new ArrayList<>();
        for (Group other : groups) {
            if (other.serverId() != group.serverId()) {
                next.add(other);
            }
        }
        next.add(group);
        next.sort(java.util.Comparator.comparingInt(Group::serverId));
        return new ReplicaGroups(generation + 1, next);
    }

    /** One line per group, for logs and status. */
    public String describe() {
        if (groups.isEmpty()) {
            return "(none)";
        }
        StringBuilder out = new StringBuilder();
        for (Group group : groups) {
            out.append("server ").append(group.serverId()).append(" view ").append(group.view()).append(": primary ")
                    .append(group.primary()).append(", backups ").append(group.backups()).append("; ");
        }
        return out.toString();
    }
}
