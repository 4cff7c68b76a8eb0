package dev.dex.actors.partition;

import static dev.dex.actors.partition.EntityProbes.get;
import static dev.dex.actors.partition.EntityProbes.put;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A partition applies a named client's batch of writes only under the epoch the batch names, and only if no later
 * batch of that client was applied before it: a late attempt (a batch its client timed out and sent again) can no
 * longer overwrite what the client wrote after it. Nor may a batch overtake the one its client sent it behind: a
 * batch that follows one the partition did not take (refused, or lost on its way) is refused, reads too, until the
 * client sends them again in order. Otherwise batches of reads, and batches of senders that name no client, are
 * always served.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
@ExtendWith(LogCapturingExtension.class)
class PartitionLateAttemptTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final int P = 1;
    private static final long ALICE = 0xa11ce;
    private static final long BOB = 0xb0b;

    @JUnit5TestKit
    ActorTestKit testKit = EntityProbes.localTestKit();

    private final EntityProbes probes = new EntityProbes(testKit);

    private Ops.Results send(ActorRef<Partition.Command> entity, long client, long seq, long epoch, List<Ops.Op> ops) {
        return send(entity, client, seq, 0, epoch, ops);
    }

    private Ops.Results send(ActorRef<Partition.Command> entity, long client, long seq, long follows, long epoch, List<Ops.Op> ops) {
        TestProbe<Ops.Results> probe = testKit.createTestProbe();
        entity.tell(new Partition.Execute(EntityProbes.DIRECT, seq, client, seq, epoch, follows, ops, probe.getRef()));
        Ops.Results results = probe.receiveMessage(EntityProbes.REPLY);
        assertEquals(seq, results.batch());
        assertEquals(ops.size(), results.results().size());
        return results;
    }

    private static void assertAll(int status, Ops.Results results, String what) {
        for (Ops.Result result : results.results()) {
            assertEquals(status, result.status(), what + ": " + result);
        }
    }

    @Test
    void aLateAttemptOfAClientNeverOverwritesItsLaterWrites() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(P) + 10);
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));

            // Before the client knows the epoch: its writes are refused and the answer names the epoch; reads are served.
            Ops.Results unknown = send(entity, ALICE, 1, 0, List.of(put(key, -1), get(key)));
            assertAll(Ops.STALE, unknown, "writes without the epoch");
            assertTrue(unknown.results().get(0).error().contains("did not know partition " + P + "'s epoch"),
                    unknown.results().get(0).error());
            long epoch = unknown.epoch();
            assertNotEquals(0, epoch, "the refusal names the epoch");
            Ops.Results read = send(entity, ALICE, 2, 0, List.of(get(key)));
            assertAll(Ops.OK, read, "reads without the epoch");
            assertEquals(key + 1, read.results().get(0).value(), "the refused put was not applied");
            assertEquals(epoch, read.epoch(), "every answer names the epoch");

            // Batch 3 goes out, times out, and its operations go again as batch 5; then the client writes 4 into the
            // key as batch 6. Batch 3 arrives only now: it must not bring the older value back.
            assertAll(Ops.OK, send(entity, ALICE, 5, epoch, List.of(put(key, 3))), "the second attempt");
            assertAll(Ops.OK, send(entity, ALICE, 6, epoch, List.of(put(key, 4))), "the later write");
            Ops.Results late = send(entity, ALICE, 3, epoch, List.of(put(key, 3), get(key)));
            assertAll(Ops.STALE, late, "the late first attempt");
            assertTrue(late.results().get(0).error().contains("batch 3 arrived after the client's batch 6"), late.results().get(0).error());
            assertAll(Ops.STALE, send(entity, ALICE, 6, epoch, List.of(put(key, 3))), "a batch id applied already");
            assertEquals(4, probes.execute(entity, List.of(get(key))).get(0).value(), "the later write stands");

            // Each client is ordered on its own; a sender that names no client (0) is not guarded.
            assertAll(Ops.OK, send(entity, BOB, 2, epoch, List.of(put(key, 7))), "another client's first batch");
            assertAll(Ops.OK, send(entity, 0, 1, 0, List.of(put(key + 2, 9))), "an unguarded sender");
            assertEquals(7, probes.execute(entity, List.of(get(key))).get(0).value());
            assertEquals(9, probes.execute(entity, List.of(get(key + 2))).get(0).value());
        }
    }

    @Test
    void aBatchSentBehindOneThePartitionDidNotTakeIsRefusedSoThatItCannotOvertakeIt() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(P) + 10);
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));
            long epoch = send(entity, ALICE, 1, 0, List.of(get(key))).epoch();

            // Batch 2 (a put) is lost on its way, or refused; batches 3 (a put) and 4 (a get) were sent behind it.
            Ops.Results behind = send(entity, ALICE, 3, 2, epoch, List.of(put(key, 3)));
            assertAll(Ops.STALE, behind, "a put sent behind a batch the partition did not take");
            assertTrue(behind.results().get(0).error().contains("follows the client's batch 2"), behind.results().get(0).error());
            assertAll(Ops.STALE, send(entity, ALICE, 4, 3, epoch, List.of(get(key))), "a get sent behind it, which would miss its put");
            assertEquals(key + 1, probes.execute(entity, List.of(get(key))).get(0).value(), "nothing of them was applied");

            // The client sends them again in their order, the first following nothing: taken in that order.
            assertAll(Ops.OK, send(entity, ALICE, 5, 0, epoch, List.of(put(key, 2))), "the lost put again");
            assertAll(Ops.OK, send(entity, ALICE, 6, 5, epoch, List.of(put(key, 3))), "the put behind it again");
            Ops.Results read = send(entity, ALICE, 7, 6, epoch, List.of(get(key)));
            assertAll(Ops.OK, read, "the get behind them again");
            assertEquals(3, read.results().get(0).value(), "the put the client sent later stands");

            // A batch that follows one taken earlier than the client's latest (the one between was lost) is refused too.
            assertAll(Ops.STALE, send(entity, ALICE, 9, 6, epoch, List.of(put(key, 9))), "a batch behind a batch not the latest");
            // Batches that follow another are a client's own chain: another client's batch naming none is taken.
            assertAll(Ops.OK, send(entity, BOB, 8, 0, epoch, List.of(put(key, 8))), "another client");
        }
    }

    @Test
    void aBatchSentForAnEarlierOwnerIsRefusedByTheNextOne() {
        try (LocalTree tree = LocalTree.bulkLoadedWithRedoLog(LOADED, PARTITIONS, 2)) {
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(P) + 10);
            ActorRef<Partition.Command> first = testKit.spawn(Partition.create(P, tree.workers));
            long epoch = send(first, ALICE, 1, 0, List.of(get(key))).epoch();
            assertAll(Ops.OK, send(first, ALICE, 10, epoch, List.of(put(key, 10))), "under the first owner");
            TestProbe<Object> stopped = testKit.createTestProbe();
            first.tell(Partition.Handoff.INSTANCE);
            stopped.expectTerminated(first, EntityProbes.REPLY);

            ActorRef<Partition.Command> next = testKit.spawn(Partition.create(P, tree.workers));
            Ops.Results refused = send(next, ALICE, 8, epoch, List.of(put(key, 8)));
            assertAll(Ops.STALE, refused, "a batch sent for the first owner");
            assertTrue(refused.epoch() > epoch, "the next owner's epoch is higher: " + epoch + " -> " + refused.epoch());
            assertTrue(refused.results().get(0).error().contains("sent for epoch " + epoch), refused.results().get(0).error());
            assertEquals(10, probes.execute(next, List.of(get(key))).get(0).value(), "the handoff kept the write, the refusal wrote nothing");

            // Under the new epoch the client's batches are ordered afresh.
            assertAll(Ops.OK, send(next, ALICE, 11, refused.epoch(), List.of(put(key, 11))), "under the next owner");
            assertEquals(11, probes.execute(next, List.of(get(key))).get(0).value());
        }
    }
}
