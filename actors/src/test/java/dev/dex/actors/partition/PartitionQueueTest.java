package dev.dex.actors.partition;

import static dev.dex.actors.partition.EntityProbes.get;
import static dev.dex.actors.partition.EntityProbes.put;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;


/** A partition runs its batches one at a time in arrival order, and refuses batches beyond its waiting limit. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
@ExtendWith(LogCapturingExtension.class)
class PartitionQueueTest {
    private static final int LOADED = 4_000;
    private static final int PARTITIONS = 4;
    private static final int P = 2;
    private static final int REFUSED = 3;

    @JUnit5TestKit
    ActorTestKit testKit = EntityProbes.localTestKit();

    private final EntityProbes probes = new EntityProbes(testKit);

    @Test
    void batchesRunOneAtATimeInArrivalOrderAndTooManyWaitingAreAnsweredOverloaded() {
        try (LocalTree tree = LocalTree.bulkLoaded(LOADED, PARTITIONS, 2)) {
            long key = LocalTree.loadedModel(LOADED).higherKey(tree.table.lowerExclusive(P) + 50);
            ActorRef<Partition.Command> entity = testKit.spawn(Partition.create(P, tree.workers));
            assertEquals(Ops.OK, probes.execute(entity, List.of(get(key))).get(0).status(), "the partition is acquired");

            // Both workers held: the first batch waits at the workers, the next MAX_WAITING in the entity.
            CountDownLatch first = EntityProbes.occupy(tree.workers);
            CountDownLatch second = EntityProbes.occupy(tree.workers);
            List<TestProbe<Ops.Results>> accepted = new ArrayList<>();
            for (int i = 0; i <= Partition.MAX_WAITING; i++) {
                accepted.add(probes.send(entity, List.of(put(key, i), get(key))));
            }
            for (int i = 0; i < REFUSED; i++) {
                List<Ops.Result> refused = probes.send(entity, List.of(put(key, -1), get(key))).receiveMessage(EntityProbes.REPLY).results();
                assertEquals(2, refused.size());
                for (Ops.Result result : refused) {
                    assertEquals(Ops.OVERLOADED, result.status(), result.toString());
                    assertTrue(result.error().contains(Partition.MAX_WAITING + " batches waiting"), result.error());
                }
            }
            first.countDown();
            second.countDown();

            // Each batch's get sees its own put: no other batch of the partition ran in between.
            for (int i = 0; i < accepted.size(); i++) {
                List<Ops.Result> results = accepted.get(i).receiveMessage(EntityProbes.REPLY).results();
                assertEquals(Ops.OK, results.get(0).status(), "batch " + i);
                assertEquals(i, results.get(1).value(), "batch " + i + " read its own write");
            }
            assertEquals((long) Partition.MAX_WAITING, probes.execute(entity, List.of(get(key))).get(0).value(),
                    "the refused batches wrote nothing");
        }
    }
}
