package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import org.apache.pekko.actor.DeadLetter;
import org.apache.pekko.actor.Dropped;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.eventstream.EventStream;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.actors.partition.EntityProbes;
import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;

/**
 * A batch the node could not deliver (sharding dropped it while its partition moved, or a stopped entity left it
 * in its mailbox) is answered NOT_HELD at once, under its batch id, so its client sends it again instead of
 * waiting for its timeout; other dead letters are left alone.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
@ExtendWith(LogCapturingExtension.class)
class DroppedBatchesTest {
    @JUnit5TestKit
    ActorTestKit testKit = EntityProbes.localTestKit();

    @Test
    void undeliveredBatchesAreAnsweredNotHeldAndNothingElseIs() {
        TestProbe<Ops.Results> client = testKit.createTestProbe();
        testKit.spawn(DroppedBatches.create("pekko://dex@127.0.0.1:7"), "dropped-batches");
        var nobody = Adapter.toClassic(testKit.system()).deadLetters();
        // The actor subscribes when it starts: a marker batch goes to the dead letters until it is answered.
        Partition.Execute marker = new Partition.Execute(0, 0, List.of(EntityProbes.get(0)), client.getRef());
        boolean subscribed = false;
        for (int i = 0; i < 100 && !subscribed; i++) {
            publish(new DeadLetter(marker, nobody, nobody));
            subscribed = poll(client);
        }
        assertTrue(subscribed, "the actor heard the dead letters within 10 s");

        Partition.Execute dropped = new Partition.Execute(10, 7, 0xc, 7, 3, 6, List.of(EntityProbes.put(10, 1), EntityProbes.get(10)),
                client.getRef());
        publish(new DeadLetter(Dropped.apply(dropped, "Avoiding reordering of buffered messages at shard handoff", nobody), nobody,
                nobody));
        Ops.Results answer = nextBesidesMarkers(client);
        assertEquals(7, answer.batch());
        assertEquals("pekko://dex@127.0.0.1:7", answer.host());
        assertEquals(2, answer.results().size());
        for (Ops.Result result : answer.results()) {
            assertEquals(Ops.NOT_HELD, result.status(), result.toString());
        }

        publish(new DeadLetter(new Partition.Execute(20, 8, List.of(EntityProbes.get(20)), client.getRef()), nobody, nobody));
        assertEquals(8, nextBesidesMarkers(client).batch(), "a batch left in a stopped entity's mailbox");

        publish(new DeadLetter(new Ops.Results(9, List.of(), "h"), nobody, nobody));
        publish(new DeadLetter(Partition.Handoff.INSTANCE, nobody, nobody));
        Ops.Results late;
        while ((late = poll(client, Duration.ofMillis(300))) != null) {
            assertEquals(0, late.batch(), "only markers: other dead letters are left alone, not " + late);
        }
    }

    private static boolean poll(TestProbe<Ops.Results> probe) {
        return poll(probe, Duration.ofMillis(100)) != null;
    }

    private static Ops.Results poll(TestProbe<Ops.Results> probe, Duration wait) {
        try {
            return probe.receiveMessage(wait);
        } catch (AssertionError timeout) {
            return null;
        }
    }

    /** The next answer that is not to a marker (markers published while the actor was starting may come late). */
    private static Ops.Results nextBesidesMarkers(TestProbe<Ops.Results> probe) {
        Ops.Results answer;
        do {
            answer = probe.receiveMessage(Duration.ofSeconds(5));
        } while (answer.batch() == 0);
        return answer;
    }

    private void publish(Object event) {
        testKit.system().eventStream().tell(new EventStream.Publish<>(event));
    }
}
