package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A compute node's router: the batches of a bundle reach the region in order under ids of the router's own,
 * and their answers go back to each client with the client's ids, several in one message.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
@ExtendWith(LogCapturingExtension.class)
class PartitionRouterTest {
    @JUnit5TestKit
    ActorTestKit testKit = EntityProbes.localTestKit();

    private static List<Ops.Op> gets(long... keys) {
        List<Ops.Op> ops = new ArrayList<>();
        for (long key : keys) {
            ops.add(EntityProbes.get(key));
        }
        return ops;
    }

    @Test
    void batchesReachTheRegionInBundleOrderAndTheirAnswersComeBackBundledWithTheClientsIds() {
        TestProbe<Partition.Command> region = testKit.createTestProbe();
        TestProbe<Ops.ResultsBundle> alice = testKit.createTestProbe();
        TestProbe<Ops.ResultsBundle> bob = testKit.createTestProbe();
        ActorRef<PartitionRouter.Command> router = testKit.spawn(PartitionRouter.create(region.getRef()));

        router.tell(new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(10, 7, gets(10, 11)),
                new PartitionRouter.Routed(20, 8, gets(20))), alice.getRef()));
        router.tell(new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(30, 7, gets(30))), bob.getRef()));

        List<Partition.Execute> executes = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            executes.add(region.expectMessageClass(Partition.Execute.class));
        }
        assertEquals(List.of(10L, 20L, 30L), executes.stream().map(Partition.Execute::partition).toList(), "bundle order");
        assertEquals(gets(10, 11), executes.get(0).ops());
        Set<Long> ids = new HashSet<>();
        executes.forEach(execute -> ids.add(execute.batch()));
        assertEquals(3, ids.size(), "Alice's 7 and Bob's 7 are told apart");
        assertEquals(executes.get(0).replyTo(), executes.get(2).replyTo(), "answers go to the router");
        assertNotEquals(alice.getRef(), executes.get(0).replyTo());

        // Answered out of order: each client gets its own answers, under its own ids.
        ActorRef<Ops.Results> answers = executes.get(0).replyTo();
        answers.tell(new Ops.Results(executes.get(1).batch(), List.of(Ops.Result.of(true, 200)), "node-1"));
        answers.tell(new Ops.Results(executes.get(2).batch(), List.of(Ops.Result.of(false, 0)), "node-1"));
        answers.tell(new Ops.Results(executes.get(0).batch(), List.of(Ops.Result.of(true, 100), Ops.Result.of(true, 110)), "node-1"));

        List<Ops.Results> toAlice = new ArrayList<>();
        while (toAlice.size() < 2) {
            toAlice.addAll(alice.expectMessageClass(Ops.ResultsBundle.class).answers());
        }
        assertEquals(List.of(8L, 7L), toAlice.stream().map(Ops.Results::batch).toList());
        assertEquals(List.of(Ops.Result.of(true, 100), Ops.Result.of(true, 110)), toAlice.get(1).results());
        assertEquals("node-1", toAlice.get(0).host());
        Ops.ResultsBundle toBob = bob.expectMessageClass(Ops.ResultsBundle.class);
        assertEquals(List.of(new Ops.Results(7, List.of(Ops.Result.of(false, 0)), "node-1")), toBob.answers());

        answers.tell(new Ops.Results(executes.get(0).batch(), List.of(Ops.Result.of(true, 1)), "node-1"));
        answers.tell(new Ops.Results(12_345, List.of(Ops.Result.of(true, 1)), "node-1"));
        alice.expectNoMessage(Duration.ofMillis(200));
        bob.expectNoMessage(Duration.ZERO);

        TestProbe<PartitionRouter.Stats> stats = testKit.createTestProbe();
        router.tell(new PartitionRouter.GetStats(stats.getRef()));
        assertEquals(new PartitionRouter.Stats(2, 3), stats.receiveMessage());
    }

    /**
     * A leaving node's router (its coordinated shutdown began) forwards nothing more to a region that is about to hand
     * its partitions off and stop: each batch is answered NOT_HELD at once, without a host (the client sends it again at
     * once through sharding), and the router leaves the Receptionist's listing. An answer to a batch it forwarded
     * before still reaches its client.
     */
    @Test
    void aLeavingRouterAnswersEveryBatchNotHeldAtOnceAndLeavesTheListing() {
        TestProbe<Partition.Command> region = testKit.createTestProbe();
        TestProbe<Ops.ResultsBundle> client = testKit.createTestProbe();
        ActorRef<PartitionRouter.Command> router = testKit.spawn(PartitionRouter.create(region.getRef()));
        TestProbe<org.apache.pekko.actor.typed.receptionist.Receptionist.Listing> listings = testKit.createTestProbe();
        testKit.system().receptionist().tell(org.apache.pekko.actor.typed.receptionist.Receptionist.subscribe(PartitionRouter.KEY,
                listings.getRef()));
        listings.fishForMessage(Duration.ofSeconds(5), listing -> listing.getServiceInstances(PartitionRouter.KEY).contains(router)
                ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.complete()
                : org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.continueAndIgnore());
        router.tell(new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(10, 1, gets(10))), client.getRef()));
        Partition.Execute before = region.expectMessageClass(Partition.Execute.class);

        TestProbe<org.apache.pekko.Done> acknowledged = testKit.createTestProbe();
        router.tell(new PartitionRouter.Leaving(acknowledged.getRef()));
        // The batch forwarded before is not answered yet: the leave is acknowledged only once it is (or after a while).
        acknowledged.expectNoMessage(Duration.ofMillis(300));
        router.tell(new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(10, 2, gets(10, 11)),
                new PartitionRouter.Routed(20, 3, gets(20))), client.getRef()));

        Ops.ResultsBundle refused = client.expectMessageClass(Ops.ResultsBundle.class);
        assertEquals(List.of(2L, 3L), refused.answers().stream().map(Ops.Results::batch).toList());
        assertEquals(List.of(2, 1), refused.answers().stream().map(answer -> answer.results().size()).toList(), "one result per operation");
        for (Ops.Results answer : refused.answers()) {
            assertEquals(null, answer.host(), "no partition was asked");
            answer.results().forEach(result -> assertEquals(Ops.NOT_HELD, result.status(), String.valueOf(result)));
        }
        region.expectNoMessage(Duration.ofMillis(200));
        listings.fishForMessage(Duration.ofSeconds(5), listing -> listing.getServiceInstances(PartitionRouter.KEY).contains(router)
                ? org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.continueAndIgnore()
                : org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes.complete());

        before.replyTo().tell(new Ops.Results(before.batch(), List.of(Ops.Result.of(true, 100)), "node-1"));
        assertEquals(List.of(new Ops.Results(1, List.of(Ops.Result.of(true, 100)), "node-1")),
                client.expectMessageClass(Ops.ResultsBundle.class).answers(), "an earlier batch's answer still comes back");
        acknowledged.expectMessage(Duration.ofMillis(500), org.apache.pekko.Done.getInstance()); // at once after that answer
    }

    /** A leaving router whose forwarded batch is never answered acknowledges the leave anyway, after its wait. */
    @Test
    void aLeavingRouterDoesNotWaitLongerThanItsWaitForAnswersThatDoNotCome() {
        TestProbe<Partition.Command> region = testKit.createTestProbe();
        TestProbe<Ops.ResultsBundle> client = testKit.createTestProbe();
        ActorRef<PartitionRouter.Command> router = testKit.spawn(PartitionRouter.create(region.getRef()));
        router.tell(new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(10, 1, gets(10))), client.getRef()));
        region.expectMessageClass(Partition.Execute.class);
        TestProbe<org.apache.pekko.Done> acknowledged = testKit.createTestProbe();
        long asked = System.nanoTime();
        router.tell(new PartitionRouter.Leaving(acknowledged.getRef()));
        acknowledged.expectMessage(PartitionRouter.ANSWERS_WAIT.plusSeconds(2), org.apache.pekko.Done.getInstance());
        assertTrue(System.nanoTime() - asked >= PartitionRouter.ANSWERS_WAIT.toNanos() - 50_000_000L,
                "acknowledged only after the wait for the forwarded batch's answer");
    }

    /**
     * A leaving router that refuses a bundle of many full batches answers in several messages, each within Artery's
     * frame (every refused operation carries the refusal's text): one message for all of them was dropped by Artery as
     * oversized, and its operations waited for the client's batch timeout (seen in the demo's leave).
     */
    @Test
    void aLeavingRouterRefusesALargeBundleInMessagesThatEachFitTheFrame() {
        final int OPS = 160; // 32 batches of gets: about 100 KiB asked, about 500 KiB of refusals
        TestProbe<Partition.Command> region = testKit.createTestProbe();
        TestProbe<Ops.ResultsBundle> client = testKit.createTestProbe();
        ActorRef<PartitionRouter.Command> router = testKit.spawn(PartitionRouter.create(region.getRef()));
        TestProbe<org.apache.pekko.Done> acknowledged = testKit.createTestProbe();
        router.tell(new PartitionRouter.Leaving(acknowledged.getRef()));
        acknowledged.expectMessage(org.apache.pekko.Done.getInstance());
        List<PartitionRouter.Routed> batches = new ArrayList<>();
        for (int b = 0; b < 32; b++) {
            long[] keys = new long[OPS];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = (long) b * OPS + i;
            }
            batches.add(new PartitionRouter.Routed(b, b, gets(keys)));
        }
        router.tell(new PartitionRouter.Bundle(batches, client.getRef()));

        var serialization = org.apache.pekko.serialization.SerializationExtension.get(
                org.apache.pekko.actor.typed.javadsl.Adapter.toClassic(testKit.system()));
        List<Long> answered = new ArrayList<>();
        int messages = 0;
        while (answered.size() < batches.size()) {
            Ops.ResultsBundle refused = client.expectMessageClass(Ops.ResultsBundle.class);
            messages++;
            int bytes = serialization.serialize(refused).get().length;
            assertTrue(bytes <= 256 * 1024, "a refusal of " + bytes + " bytes passes Artery's 256 KiB frame");
            for (Ops.Results answer : refused.answers()) {
                answered.add(answer.batch());
                assertEquals(OPS, answer.results().size());
            }
        }
        assertEquals(java.util.stream.LongStream.range(0, batches.size()).boxed().toList(), answered, "each batch once, in order");
        assertTrue(messages > 1, "several messages");
        client.expectNoMessage(Duration.ofMillis(200));
    }

    private record Hold(CountDownLatch holding, CountDownLatch release) implements NoSerializationVerificationNeeded {
    }

    /**
     * The router and a blocker share a dispatcher of one thread: while the blocker holds it, all 50 answers reach
     * the router's mailbox before it handles the first, so what is asserted is the bundling, not the scheduler.
     */
    @Test
    void answersArrivingTogetherTravelTogetherAndALargeOneStartsABundleOfItsOwn() throws InterruptedException {
        DispatcherSelector oneThread = DispatcherSelector.fromConfig("dex-test-one-thread");
        TestProbe<Partition.Command> region = testKit.createTestProbe();
        TestProbe<Ops.ResultsBundle> client = testKit.createTestProbe();
        ActorRef<PartitionRouter.Command> router = testKit.spawn(PartitionRouter.create(region.getRef()), "router", oneThread);
        ActorRef<Hold> blocker = testKit.spawn(Behaviors.receiveMessage(hold -> {
            hold.holding().countDown();
            hold.release().await(30, TimeUnit.SECONDS);
            return Behaviors.same();
        }), "blocker", oneThread);
        List<PartitionRouter.Routed> batches = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            batches.add(new PartitionRouter.Routed(i, i, gets(i)));
        }
        router.tell(new PartitionRouter.Bundle(batches, client.getRef()));
        List<Partition.Execute> executes = region.receiveSeveralMessages(50).stream().map(Partition.Execute.class::cast).toList();
        long[] keys = new long[Ops.MAX_SCAN];
        Ops.Result fullScan = new Ops.Result(Ops.OK, true, 0, keys, keys.clone(), Long.MIN_VALUE, null);
        assertTrue(PartitionRouter.sizeOf(new Ops.Results(1, List.of(fullScan), "h")) > PartitionRouter.MAX_BUNDLE_BYTES);

        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        blocker.tell(new Hold(holding, release));
        assertTrue(holding.await(10, TimeUnit.SECONDS), "the blocker holds the router's only thread");
        try {
            for (Partition.Execute execute : executes) {
                Ops.Result result = execute.partition() == 49 ? fullScan : Ops.Result.of(true, execute.partition());
                execute.replyTo().tell(new Ops.Results(execute.batch(), List.of(result), "h"));
            }
        } finally {
            release.countDown();
        }

        Ops.ResultsBundle small = client.expectMessageClass(Ops.ResultsBundle.class);
        Ops.ResultsBundle large = client.expectMessageClass(Ops.ResultsBundle.class);
        client.expectNoMessage(Duration.ofMillis(100));
        List<Long> first49 = new ArrayList<>();
        for (long i = 0; i < 49; i++) {
            first49.add(i);
        }
        assertEquals(first49, small.answers().stream().map(Ops.Results::batch).toList(),
                "the 49 small answers travel together, in the order they were answered");
        assertEquals(List.of(49L), large.answers().stream().map(Ops.Results::batch).toList(), "the large answer travels alone");
        assertEquals(Ops.MAX_SCAN, large.answers().get(0).results().get(0).keys().length);
    }
}
