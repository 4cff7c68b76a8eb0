package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import com.typesafe.config.ConfigFactory;

/**
 * The coordinator's failover on a backup's report (docs/replication.md, "Failover"), against two stand-in memory nodes
 * of server 0 in a one-node cluster, where the cluster's failure detector never finds anyone unreachable: a report
 * is the only thing that can move the primary's role. The coordinator fails over only when the primary's node does not
 * answer as primary, and ignores a report of a view the map has left.
 */
@Timeout(60)
class ReplicaCoordinatorTest {
    private ActorTestKit kit;

    @BeforeEach
    void cluster() throws InterruptedException {
        kit = ActorTestKit.create("dex", ConfigFactory.parseString("""
                pekko.cluster.roles = [compute, voter]
                pekko.cluster.distributed-data.role = voter
                """).withFallback(ActorTestKit.applicationTestConfig()));
        Cluster cluster = Cluster.get(kit.system());
        cluster.manager().tell(Join.create(cluster.selfMember().address()));
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (cluster.selfMember().status() != MemberStatus.up()) {
            assertTrue(System.nanoTime() < deadline, "the node came up");
            Thread.sleep(20);
        }
    }

    @AfterEach
    void close() {
        kit.shutdownTestKit();
    }

    /** What the coordinator asked of which stand-in. */
    private record Asked(StandIn node, MemoryNode.Replicate replicate)
            implements org.apache.pekko.actor.NoSerializationVerificationNeeded {
    }

    /** A memory node as the coordinator sees it: it describes itself, takes the parts it is asked, and can go silent. */
    private static final class StandIn {
        final String endpoint;
        final AtomicReference<MemoryNode.Replica> replica = new AtomicReference<>(new MemoryNode.Replica(
                MemoryNode.Replica.SOLE_ROLE, 0, 0, true, 0, null));
        final AtomicBoolean silent = new AtomicBoolean();
        final TestProbe<Asked> asked;
        ActorRef<MemoryNode.Command> ref;

        StandIn(ActorTestKit kit, String name, TestProbe<Asked> asked) {
            this.endpoint = "127.0.0.1:" + (name.hashCode() & 0x7fff);
            this.asked = asked;
            this.ref = kit.spawn(behavior(), name);
            kit.system().receptionist().tell(Receptionist.register(MemoryNode.KEY, ref));
        }

        MemoryNode.Description description(ActorRef<MemoryNode.Command> self) {
            return new MemoryNode.Description(0, 1L << 20, endpoint, self, replica.get());
        }

        private Behavior<MemoryNode.Command> behavior() {
            return Behaviors.receive(MemoryNode.Command.class)
                    .onMessage(MemoryNode.Describe.class, describe -> {
                        if (!silent.get()) {
                            describe.replyTo().tell(description(ref));
                        }
                        return Behaviors.same();
                    })
                    .onMessage(MemoryNode.Replicate.class, replicate -> {
                        asked.getRef().tell(new Asked(this, replicate));
                        String role = MemoryNode.Replicate.BECOME_BACKUP.equals(replicate.op())
                                ? MemoryNode.Replica.BACKUP_ROLE : MemoryNode.Replica.PRIMARY_ROLE;
                        replica.set(new MemoryNode.Replica(role, replicate.view(), replica.get().applied(),
                                !MemoryNode.Replica.BACKUP_ROLE.equals(role), 0, null));
                        replicate.replyTo().tell(new MemoryNode.Replicated(description(ref), null));
                        return Behaviors.same();
                    })
                    .build();
        }
    }

    private static Asked expect(TestProbe<Asked> asked, String op, long view) {
        Asked next = asked.expectMessageClass(Asked.class, Duration.ofSeconds(20));
        assertEquals(op + " " + view, next.replicate().op() + " " + next.replicate().view());
        return next;
    }

    @Test
    void aBackupsReportFailsOverOnlyWhenThePrimaryDoesNotAnswerAndOnlyForTheCurrentView() {
        TestProbe<Asked> asked = kit.createTestProbe();
        StandIn first = new StandIn(kit, "memory-a", asked);
        StandIn second = new StandIn(kit, "memory-b", asked);
        ActorRef<ReplicaCoordinator.Command> coordinator = kit.spawn(ReplicaCoordinator.create(2), "coordinator");

        // The group forms: the first node described is primary of view 1, the other joins as a backup in view 2.
        StandIn a = expect(asked, MemoryNode.Replicate.BECOME_PRIMARY, 1).node();
        StandIn b = a == first ? second : first;
        assertEquals(b, expect(asked, MemoryNode.Replicate.BECOME_BACKUP, 2).node());
        Asked install = expect(asked, MemoryNode.Replicate.INSTALL_VIEW, 2);
        assertEquals(a, install.node());
        assertEquals(List.of(b.endpoint), install.replicate().backups());
        b.replica.set(new MemoryNode.Replica(MemoryNode.Replica.BACKUP_ROLE, 2, 1_000, true, 0, null)); // its copy is done
        MemoryNode.Description lost = new MemoryNode.Description(0, 1L << 20, b.endpoint, b.ref, new MemoryNode.Replica(
                MemoryNode.Replica.BACKUP_ROLE, 2, 1_000, true, 0, "the stream's connection from the primary of view 2 closed"));

        // The primary still answers as primary: only the stream broke. No failover.
        coordinator.tell(new ReplicaCoordinator.PrimarySuspected(lost));
        asked.expectNoMessage(ReplicaCoordinator.CONFIRM.multipliedBy(2));

        // The primary goes silent; a report of a view the map has left (1) moves nothing.
        a.silent.set(true);
        coordinator.tell(new ReplicaCoordinator.PrimarySuspected(new MemoryNode.Description(0, 1L << 20, b.endpoint, b.ref,
                new MemoryNode.Replica(MemoryNode.Replica.BACKUP_ROLE, 1, 1_000, true, 0, "an old view's stream closed"))));
        asked.expectNoMessage(ReplicaCoordinator.CONFIRM.multipliedBy(2));

        // The current view's report, with the primary silent: the backup becomes primary of view 3 (no other backups).
        coordinator.tell(new ReplicaCoordinator.PrimarySuspected(lost));
        Asked promoted = expect(asked, MemoryNode.Replicate.BECOME_PRIMARY, 3);
        assertEquals(b, promoted.node());
        assertEquals(List.of(), promoted.replicate().backups());
    }
}
