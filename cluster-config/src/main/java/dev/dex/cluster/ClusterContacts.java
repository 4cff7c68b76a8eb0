package dev.dex.cluster;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;

/**
 * The cluster members a memory node last saw ({@code host:port}, clients left out), so that it can rejoin that
 * cluster: after the cluster downed its actor system (the process starts another one on the same region), and
 * after a restart of its process on a kept region, where it was started without {@code --seed}
 * (docs/replication.md, "Downing").
 *
 * <p>The list is kept in memory and, where the memory node's region outlives its process ({@code shm}, {@code tcp}
 * with a region directory), in {@code cluster-contacts-<server id>.txt} beside the region, written whole to a
 * temporary file and moved over the old one, so a crash never leaves half a list.
 *
 * <p>Concurrency: the actor is the only writer; {@link #current} is an atomic reference the process's starting
 * thread reads.
 */
final class ClusterContacts {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(ClusterContacts.class);

    private ClusterContacts() {
    }

    /** The file a memory node of {@code serverId} keeps its contacts in, in the directory of its kept region. */
    static Path file(Path keptRegions, int serverId) {
        return keptRegions.resolve("cluster-contacts-" + serverId + ".txt");
    }

    /**
     * A member to rejoin through: {@code host:port}, and the memory server it serves ({@code -1} for a compute node),
     * from its role {@value #SERVER_ROLE}{@code <id>}.
     */
    record Contact(String hostPort, int memoryServer) {
        String line() {
            return memoryServer < 0 ? hostPort : hostPort + " memory-server " + memoryServer;
        }
    }

    /** The role prefix that names a memory node's server id ({@code dex-memory-server-3}), set by {@link MemoryNodeProcess}. */
    static final String SERVER_ROLE = "dex-memory-server-";

    /** The contacts a previous run left in {@code file}; empty when there is none or it cannot be read. */
    static List<Contact> read(Path file) {
        if (file == null || !Files.isRegularFile(file)) {
            return List.of();
        }
        try {
            List<Contact> contacts = new ArrayList<>();
            for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
                String[] fields = line.strip().split("\\s+");
                if (fields[0].isEmpty() || fields[0].startsWith("#")) {
                    continue;
                }
                try {
                    DexNodes.seedAddress(fields[0]);
                    int server = fields.length == 3 && fields[1].equals("memory-server") ? Integer.parseInt(fields[2]) : -1;
                    contacts.add(new Contact(fields[0], server));
                } catch (IllegalArgumentException malformed) {
                    LOG.warn("{}: '{}' is not host:port [memory-server ID]; left out", file, line.strip());
                }
            }
            return contacts;
        } catch (IOException e) {
            LOG.warn("cannot read the cluster contacts in {} ({}); this memory node starts without them", file, e.toString());
            return List.of();
        }
    }

    /**
     * Follows the membership: every change sets {@code current} to the members that came up (memory and compute
     * nodes, not clients, not this node) and did not leave, and writes them to {@code file} (null: kept in memory
     * only). A member that left or exited is dropped; a downed one stays (this node may have downed it in its own view
     * while it runs on). An empty list replaces nothing: a node that sees itself alone keeps the last members it knew.
     *
     * <p>Once this node itself is downed, leaves, or its cluster shuts down, the list is frozen: a cluster that shuts
     * down publishes every member still up as removed, which would otherwise leave only the downed ones (often dead) to
     * rejoin through (MemoryNodeCrashIT failed so, a resumed primary and a backup downed while joining alike).
     */
    static Behavior<ClusterEvent.ClusterDomainEvent> create(AtomicReference<List<Contact>> current, Path file) {
        return Behaviors.setup(context -> {
            Cluster cluster = Cluster.get(context.getSystem());
            Address self = cluster.selfMember().address();
            // Kept from the events themselves: the cluster's state object may lag behind the event just delivered.
            java.util.TreeMap<String, Contact> up = new java.util.TreeMap<>();
            boolean[] frozen = {false};
            cluster.subscriptions().tell(Subscribe.create(context.getSelf().narrow(), ClusterEvent.MemberEvent.class));
            cluster.subscriptions().tell(Subscribe.create(context.getSelf().narrow(), ClusterEvent.ClusterShuttingDown$.class));
            return Behaviors.receiveMessage(domainEvent -> {
                if (frozen[0] || !(domainEvent instanceof ClusterEvent.MemberEvent event)) {
                    frozen[0] = true; // the cluster shuts down: what follows is its teardown, not the membership
                    return Behaviors.same();
                }
                Member member = event.member();
                if (member.address().equals(self) && !(event instanceof ClusterEvent.MemberUp)
                        && !(event instanceof ClusterEvent.MemberJoined) && !(event instanceof ClusterEvent.MemberWeaklyUp)) {
                    frozen[0] = true; // this node is downed or leaves: the members it knew stay its contacts
                    return Behaviors.same();
                }
                String contact = member.address().getHost().orElse("127.0.0.1") + ":" + member.address().getPort().orElse(0);
                if (event instanceof ClusterEvent.MemberUp && !member.hasRole("client") && !member.address().equals(self)) {
                    int server = -1;
                    for (String role : member.getRoles()) {
                        if (role.startsWith(SERVER_ROLE)) {
                            try {
                                server = Integer.parseInt(role.substring(SERVER_ROLE.length()));
                            } catch (NumberFormatException ignored) {
                                // not one of ours
                            }
                        }
                    }
                    up.put(contact, new Contact(contact, server));
                } else if (event instanceof ClusterEvent.MemberDowned || event instanceof ClusterEvent.MemberRemoved removed
                        && removed.previousStatus().equals(org.apache.pekko.cluster.MemberStatus.down())) {
                    // Downed in this node's view, often by this node itself: resumed after a pause, its split-brain
                    // resolver downs every member it finds unreachable, or all of them, while they run on. Dropping
                    // them one by one left only the last one dropped to rejoin through, which could be a dead node
                    // (MemoryNodeCrashIT failed so). They stay contacts; a dead one costs a failed join attempt.
                } else if (!(event instanceof ClusterEvent.MemberUp) && !(event instanceof ClusterEvent.MemberJoined)
                        && !(event instanceof ClusterEvent.MemberWeaklyUp)) {
                    up.remove(contact); // leaving or exiting: gone for good, no contact to rejoin through
                }
                if (!up.isEmpty() && !new ArrayList<>(up.values()).equals(current.get())) {
                    current.set(List.copyOf(up.values()));
                    write(file, up.values());
                }
                return Behaviors.same();
            });
        });
    }

    private static void write(Path file, Iterable<Contact> contacts) {
        if (file == null) {
            return;
        }
        StringBuilder text = new StringBuilder("# Members of the cluster this memory node last saw; it rejoins through them when it"
                + " starts again on this region without --seed.\n");
        for (Contact contact : contacts) {
            text.append(contact.line()).append('\n');
        }
        try {
            Path temporary = file.resolveSibling(file.getFileName() + ".tmp");
            Files.writeString(temporary, text, StandardCharsets.UTF_8);
            Files.move(temporary, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            LOG.warn("cannot write the cluster contacts to {} ({}); a restart without --seed will not find the cluster", file,
                    e.toString());
        }
    }
}
