package dev.dex.actors.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.dex.core.node.LeafOps;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.rdma.GlobalAddress;

/**
 * The cluster's offload channel sends each phase to the memory node of its start node with everything the memory
 * node checks (the partition and the sender's owner epoch, the key, the deadline) and hands the answer back to the
 * waiting engine thread.
 */
class ActorOffloadChannelTest {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private final ActorTestKit kit = ActorTestKit.create();

    @AfterEach
    void close() {
        kit.shutdownTestKit();
    }

    @Test
    void aPhaseTravelsWithItsPartitionAndOwnerEpochAndItsAnswerComesBack() throws Exception {
        TestProbe<MemoryNode.Command> server = kit.createTestProbe();
        CompletableFuture<ActorOffloadChannel> made = new CompletableFuture<>();
        kit.spawn(Behaviors.<Void>setup(context -> {
            ActorOffloadChannel channel = new ActorOffloadChannel(Map.of(2, server.getRef()), context.getSystem().scheduler(),
                    Duration.ofSeconds(30), context);
            channel.replyTo(context.spawn(channel.replyBehavior(), "replies"));
            made.complete(channel);
            return Behaviors.empty();
        }));
        ActorOffloadChannel channel = made.get(10, TimeUnit.SECONDS);

        long start = GlobalAddress.of(2, 4096);
        OffloadRequest request = new OffloadRequest();
        request.owner(3, 7);
        request.write(LeafOps.PUT, 42, 43, start);
        long before = System.currentTimeMillis();
        channel.submit(request);
        MemoryNode.Offload sent = server.expectMessageClass(MemoryNode.Offload.class, WAIT);
        assertEquals(3, sent.partition());
        assertEquals(7, sent.epoch());
        assertEquals(OffloadRequest.WRITE, sent.phase());
        assertEquals(LeafOps.PUT, sent.op());
        assertEquals(42, sent.key());
        assertEquals(43, sent.value());
        assertEquals(start, sent.start());
        long deadline = sent.deadline() - before;
        assertFalse(deadline < 14_000 || deadline > 16_000, "it may start within half the 30 s timeout: " + deadline + " ms");
        long mayRun = request.mayRunUntil() - System.nanoTime();
        assertTrue(mayRun > TimeUnit.SECONDS.toNanos(25) && mayRun <= TimeUnit.SECONDS.toNanos(30),
                "until the answer, it may run for the whole timeout (the memory node's clock may lag): " + mayRun);

        sent.replyTo().tell(new MemoryNode.OffloadResult(sent.id(), OffloadRequest.OK, true, 99, new long[] {start, start + 1024},
                new long[] {5, 6}, 2));
        request.await();
        assertEquals(OffloadRequest.OK, request.status());
        assertEquals(2, request.pathLength());
        assertEquals(start + 1024, request.pathNode(1));
        assertEquals(6, request.pathVersion(1));

        assertTrue(request.found());
        assertEquals(99, request.value());
        assertEquals(0, request.mayRunUntil(), "answered, it will not run again");

        request.read(42, start);
        channel.submit(request);
        MemoryNode.Offload read = server.expectMessageClass(MemoryNode.Offload.class, WAIT);
        assertEquals(3, read.partition(), "every request names the owner");
        assertEquals(7, read.epoch());
        assertEquals(OffloadRequest.READ, read.phase());
        ActorRef<MemoryNode.OffloadResult> replies = read.replyTo();
        replies.tell(new MemoryNode.OffloadResult(read.id(), OffloadRequest.STALE, false, 0, new long[0], new long[0], 0));
        request.await();
        assertEquals(OffloadRequest.STALE, request.status(), "a refusal reaches the engine thread");
    }
}
